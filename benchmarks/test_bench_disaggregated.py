"""Speed of the disaggregated scheduler: 10,000 Poisson requests with the Azure
conversation trace's prompt/output lengths, LLaMA2-7B, through a 4-pool, 16-device system —
4×H100-SXM and 4×A100 prefill, 4×A100 and 4×L40S decode (vLLM FP16), KV over PCIe 5 x16.

Target: under 3 s of wall time on one core. What is measured: drawing the requests is
outside the timing; building the units with fresh (cold) device cost models, the event
loop, the hand-overs and the metrics are inside. Arrivals are Poisson at 20 requests/s,
within what the pools sustain on these lengths (no hand-over queue builds up).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.metrics import system_result
from simulations.core.policies.disaggregated import DisaggregatedPolicy
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    DevicePlacement,
    DeviceSpec,
    LengthDist,
    LengthDistKind,
    RuntimeProfile,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)
from simulations.core.traces import load_azure_trace

TRACE = Path(__file__).resolve().parent.parent / "examples/traces/AzureLLMInferenceTrace_conv.csv"
CAT = builtin_catalog()
MODEL = CAT.model("llama2-7b")
REQUESTS = 10_000
RATE_PER_S = 20.0
TARGET_S = 3.0
FP16 = CAT.runtime("vllm-fp16")


def _placement(slug: str, role: str) -> DevicePlacement:
    return DevicePlacement(CAT.device(slug), 4, FP16, role)


SYSTEM = SystemSpec(
    "4xH100+4xA100 prefill, 4xA100+4xL40S decode",
    "disaggregated",
    (
        _placement("h100-sxm", "prefill"),
        _placement("a100-80gb", "prefill"),
        _placement("a100-80gb", "decode"),
        _placement("l40s", "decode"),
    ),
    {"kv_link": "pcie5-x16"},
)


@cache
def _requests() -> RequestSet:
    workload = WorkloadSpec(
        requests=REQUESTS,
        input_tokens=LengthDist(LengthDistKind.TRACE),
        output_tokens=LengthDist(LengthDistKind.TRACE),
        arrival=ArrivalSpec(ArrivalKind.POISSON, rate_per_s=RATE_PER_S),
        seed=0,
        trace=load_azure_trace(TRACE),
    )
    return generate_requests(workload, MODEL)


def _fresh_models() -> Callable[[DeviceSpec, RuntimeProfile], DeviceModel]:
    """A factory of new (cold) device models, one per (device, runtime) per simulation."""
    made: dict[tuple[str, str], DeviceModel] = {}

    def make(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
        key = (device.slug, runtime.slug)
        if key not in made:
            made[key] = type(build_device_model(device, runtime))(device, runtime)
        return made[key]

    return make


def _simulate() -> dict[str, Any]:
    policy = DisaggregatedPolicy(_fresh_models())
    out = policy.simulate(SYSTEM, MODEL, _requests())
    out.extra.pop("disaggregated")
    return system_result(SYSTEM, out, SloSpec())


def test_bench_disaggregated_10k_requests_16_devices_4_pools(benchmark: Any) -> None:
    _requests()  # drawn outside the timing
    benchmark.extra_info.update(
        name="engine: 10k Poisson reqs (Azure conv), disaggregated 4 pools / 16 devices",
        unit="s",
        target=TARGET_S,
    )
    result = benchmark.pedantic(_simulate, rounds=3, iterations=1)
    assert result["requests"] == REQUESTS
    assert sum(d["count"] for d in result["devices"]) == 16
