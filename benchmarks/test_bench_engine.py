"""Speed of the request-level engine: 10,000 Poisson requests with the Azure
conversation trace's prompt/output lengths, LLaMA2-7B, on 1×A100 + 7×U280 (``glitches``)
and on 8×A100 with continuous batching (``homogeneous``, ``max_batch`` 256).

Targets: each simulation under 2 s of wall time on one core (reported also as simulated
requests per wall-clock second, target 5,000), and raising every output length 8× raises
the wall time less than 1.5× — the engine fast-forwards runs of decode iterations, so its
cost follows requests and scheduling events, not generated tokens.

What is measured: drawing the requests is outside the timing; everything else is inside —
building the device units and fresh device cost models (their internal caches start cold
in every round, as in a new process), the event loop and the fast-forward, the metrics.
Arrivals are Poisson at 1.2 requests/s (about three quarters of what the GLITCHES node
sustains on these lengths, so queues stay bounded in the 1× case). With outputs 8×
longer, requests that no longer fit LLaMA2-7B's 4096-token window are clipped to it (as
in every simulation); the row's name gives the resulting growth of generated tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.metrics import system_result
from simulations.core.policies.glitches import GlitchesPolicy
from simulations.core.policies.homogeneous import HomogeneousPolicy
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
    TraceData,
    WorkloadSpec,
)
from simulations.core.traces import load_azure_trace

TRACE = Path(__file__).resolve().parent.parent / "examples/traces/AzureLLMInferenceTrace_conv.csv"
CAT = builtin_catalog()
MODEL = CAT.model("llama2-7b")
REQUESTS = 10_000
RATE_PER_S = 1.2
TARGET_S = 2.0
TARGET_SCALING = 1.5


def _placement(slug: str, count: int, role: str = "") -> DevicePlacement:
    device = CAT.device(slug)
    return DevicePlacement(device, count, CAT.default_runtime(device), role)


SYSTEMS = {
    "glitches": SystemSpec(
        "1xA100+7xU280",
        "glitches",
        (_placement("a100-80gb", 1, "prefill"), _placement("u280", 7, "decode")),
        {"prefetch_ratio": 4},
    ),
    "8xa100-cb": SystemSpec(
        "8xA100 continuous batching",
        "homogeneous",
        (_placement("a100-80gb", 8),),
        {"max_batch": 256},
    ),
}


@cache
def _requests(output_scale: int) -> RequestSet:
    trace = load_azure_trace(TRACE)
    if output_scale != 1:
        trace = TraceData(
            trace.arrival_s,
            trace.input_tokens,
            tuple(o * output_scale for o in trace.output_tokens),
            trace.name,
        )
    workload = WorkloadSpec(
        requests=REQUESTS,
        input_tokens=LengthDist(LengthDistKind.TRACE),
        output_tokens=LengthDist(LengthDistKind.TRACE),
        arrival=ArrivalSpec(ArrivalKind.POISSON, rate_per_s=RATE_PER_S),
        seed=0,
        trace=trace,
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


def _simulate(key: str, output_scale: int) -> dict[str, Any]:
    system = SYSTEMS[key]
    requests = _requests(output_scale)
    policy = (GlitchesPolicy if system.policy == "glitches" else HomogeneousPolicy)(_fresh_models())
    out = policy.simulate(system, MODEL, requests)
    return system_result(system, out, SloSpec())


@pytest.mark.parametrize("key", list(SYSTEMS))
def test_bench_engine_10k_poisson_requests(benchmark: Any, key: str) -> None:
    _requests(1)  # drawn outside the timing
    label = SYSTEMS[key].name
    benchmark.extra_info.update(
        name=f"engine: 10k Poisson reqs (Azure conv) on {label}", unit="s", target=TARGET_S
    )
    result = benchmark.pedantic(lambda: _simulate(key, 1), rounds=3, iterations=1)
    assert result["requests"] == REQUESTS
    from benchmarks.report import record

    record(
        f"engine: simulated requests per wall-clock second, {label}",
        REQUESTS / benchmark.stats.stats.mean,
        "req/s",
        REQUESTS / TARGET_S,
        higher_is_better=True,
    )


@pytest.mark.parametrize("key", list(SYSTEMS))
def test_bench_engine_wall_time_with_8x_output_lengths(benchmark: Any, key: str) -> None:
    _requests(1)
    _requests(8)
    base = []
    for _ in range(3):
        t0 = time.perf_counter()
        short = _simulate(key, 1)
        base.append(time.perf_counter() - t0)
    long = benchmark.pedantic(lambda: _simulate(key, 8), rounds=3, iterations=1)
    ratio = benchmark.stats.stats.mean / (sum(base) / len(base))
    growth = long["generated_tokens"] / short["generated_tokens"]
    benchmark.extra_info.update(
        name=f"engine: wall x for 8x outputs ({growth:.1f}x tokens), {SYSTEMS[key].name}",
        value=ratio,
        unit="x",
        target=TARGET_SCALING,
    )
    assert growth > 4
