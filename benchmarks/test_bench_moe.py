"""Speed of a mixture-of-experts run against a dense one of the same size:
10,000 Poisson requests with the Azure conversation trace's lengths on 8×H100-SXM with
vLLM-like continuous batching (``homogeneous``, ``max_batch`` 256), Qwen3-30B-A3B (128
experts, top-8) against the dense Llama-3.1-8B.

Target: the MoE run's wall time at most 2× the dense run's. What is measured is as in
``test_bench_engine.py``: drawing the requests is outside the timing; building fresh (cold)
device models, the event loop with its fast-forward and the metrics are inside. The MoE
run pays for the expected-distinct-experts sums of every new batch size its decode curves
learn (cached per pass size).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.metrics import system_result
from simulations.core.policies.homogeneous import HomogeneousPolicy
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    DevicePlacement,
    DeviceSpec,
    LengthDist,
    LengthDistKind,
    ModelSpec,
    RuntimeProfile,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)
from simulations.core.traces import load_azure_trace

TRACE = Path(__file__).resolve().parent.parent / "examples/traces/AzureLLMInferenceTrace_conv.csv"
CAT = builtin_catalog()
REQUESTS = 10_000
RATE_PER_S = 8.0
TARGET_RATIO = 2.0
MOE, DENSE = "qwen3-30b-a3b", "llama3.1-8b"
SYSTEM = SystemSpec(
    "8xH100 continuous batching",
    "homogeneous",
    (DevicePlacement(CAT.device("h100-sxm"), 8, CAT.runtime("vllm-fp16")),),
    {"max_batch": 256},
)


@cache
def _requests(slug: str) -> RequestSet:
    workload = WorkloadSpec(
        requests=REQUESTS,
        input_tokens=LengthDist(LengthDistKind.TRACE),
        output_tokens=LengthDist(LengthDistKind.TRACE),
        arrival=ArrivalSpec(ArrivalKind.POISSON, rate_per_s=RATE_PER_S),
        seed=0,
        trace=load_azure_trace(TRACE),
    )
    return generate_requests(workload, CAT.model(slug))


def _fresh_models() -> Callable[[DeviceSpec, RuntimeProfile], DeviceModel]:
    made: dict[tuple[str, str], DeviceModel] = {}

    def make(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
        key = (device.slug, runtime.slug)
        if key not in made:
            made[key] = type(build_device_model(device, runtime))(device, runtime)
        return made[key]

    return make


def _simulate(slug: str) -> dict[str, Any]:
    model: ModelSpec = CAT.model(slug)
    out = HomogeneousPolicy(_fresh_models()).simulate(SYSTEM, model, _requests(slug))
    return system_result(SYSTEM, out, SloSpec())


def test_bench_moe_run_against_a_dense_run_of_the_same_size(benchmark: Any) -> None:
    _requests(MOE)
    _requests(DENSE)
    dense = []
    for _ in range(3):
        t0 = time.perf_counter()
        _simulate(DENSE)
        dense.append(time.perf_counter() - t0)
    result = benchmark.pedantic(lambda: _simulate(MOE), rounds=3, iterations=1)
    assert result["requests"] == REQUESTS
    ratio = benchmark.stats.stats.mean / (sum(dense) / len(dense))
    benchmark.extra_info.update(
        name=f"engine: 10k-request MoE run ({MOE}) / dense run ({DENSE}), wall time",
        value=ratio,
        unit="x",
        target=TARGET_RATIO,
    )
