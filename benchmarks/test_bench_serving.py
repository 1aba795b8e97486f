"""Speed targets for loaded devices:

- 10,000 Azure-conversation requests at 4 requests/s on one A100 (vllm-fp16, continuous
  batching with chunked prefill, 2048-token budget): engine time under 0.5 s (device
  models cold, requests drawn outside the timing, as in ``test_bench_engine``);
- identical systems in one scenario are computed once: eight identical systems cost at
  most 1.2× one;
- ``manage.py simulate --help`` starts in under 1 s (wall time of a fresh process).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.test_bench_engine import MODEL, TRACE, _fresh_models
from simulations.core.catalog import builtin_catalog
from simulations.core.engine.requests import generate_requests
from simulations.core.policies.homogeneous import HomogeneousPolicy
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    DevicePlacement,
    LengthDist,
    LengthDistKind,
    SystemSpec,
    WorkloadSpec,
)
from simulations.core.traces import load_azure_trace

REPO = Path(__file__).resolve().parent.parent
CAT = builtin_catalog()


def test_bench_loaded_a100_with_chunked_prefill(benchmark: Any) -> None:
    workload = WorkloadSpec(
        10_000,
        LengthDist(LengthDistKind.TRACE),
        LengthDist(LengthDistKind.TRACE),
        ArrivalSpec(ArrivalKind.POISSON, rate_per_s=4.0),
        0,
        load_azure_trace(TRACE),
    )
    requests = generate_requests(workload, MODEL)
    device = CAT.device("a100-80gb")
    system = SystemSpec(
        "1xA100 chunked",
        "homogeneous",
        (DevicePlacement(device, 1, CAT.runtimes["vllm-fp16"]),),
        {"max_batch": 256, "max_batched_tokens": 2048, "chunked_prefill": True},
    )
    benchmark.extra_info.update(
        name="engine: 10k conv reqs at 4/s on 1xA100, chunked prefill", unit="s", target=0.5
    )
    out = benchmark.pedantic(
        lambda: HomogeneousPolicy(_fresh_models()).simulate(system, MODEL, requests),
        rounds=3,
        iterations=1,
    )
    assert len(out.finish_s) == 10_000


def _scenario(copies: int) -> Any:
    doc = json.loads((REPO / "examples/azure-conv-chunked-prefill.json").read_text())
    system = doc["systems"][1]
    doc["systems"] = [{**system, "name": f"copy {i}"} for i in range(copies)]
    return parse_scenario(doc, CAT, trace_dir=REPO / "examples")


def test_bench_identical_systems_are_computed_once(benchmark: Any) -> None:
    one, eight = _scenario(1), _scenario(8)
    t0 = time.perf_counter()
    simulate(one)
    single = time.perf_counter() - t0
    benchmark.pedantic(lambda: simulate(eight), rounds=1, iterations=1)
    benchmark.extra_info.update(
        name="simulate: 8 identical systems / 1 system (wall time)",
        value=benchmark.stats.stats.mean / single,
        unit="x",
        target=1.2,
    )


def test_bench_cli_start_up(benchmark: Any) -> None:
    def start() -> None:
        subprocess.run(
            [sys.executable, "manage.py", "simulate", "--help"],
            cwd=REPO,
            check=True,
            capture_output=True,
        )

    benchmark.extra_info.update(name="CLI: manage.py simulate --help", unit="s", target=1.0)
    benchmark.pedantic(start, rounds=3, iterations=1)


def _conv_requests(model_slug: str, rate_per_s: float) -> Any:
    workload = WorkloadSpec(
        10_000,
        LengthDist(LengthDistKind.TRACE),
        LengthDist(LengthDistKind.TRACE),
        ArrivalSpec(ArrivalKind.POISSON, rate_per_s=rate_per_s),
        0,
        load_azure_trace(TRACE),
    )
    return generate_requests(workload, CAT.model(model_slug))


def _tp_system(device: str, count: int, tp: int, link: str, *, chunked: bool = False) -> SystemSpec:
    chunking = {"chunked_prefill": True, "max_batched_tokens": 2048} if chunked else {}
    return SystemSpec(
        f"{count}x{device} TP{tp}",
        "homogeneous",
        (DevicePlacement(CAT.device(device), count, CAT.runtimes["vllm-fp16"]),),
        {"max_batch": 256, "tensor_parallel": tp, "link": link, **chunking},
    )


def test_bench_8xh100_tp8_10k_requests(benchmark: Any) -> None:
    """10,000 conversation requests at 4 requests/s through one 8×H100 NVLink4 TP8 replica
    serving Llama-3.1-70B: engine time under 2 s."""
    model = CAT.model("llama3.1-70b")
    requests = _conv_requests("llama3.1-70b", 4.0)
    system = _tp_system("h100-sxm", 8, 8, "nvlink4")
    benchmark.extra_info.update(
        name="engine: 10k conv reqs at 4/s, Llama-3.1-70B on 8xH100 TP8", unit="s", target=2.0
    )
    out = benchmark.pedantic(
        lambda: HomogeneousPolicy(_fresh_models()).simulate(system, model, requests),
        rounds=3,
        iterations=1,
    )
    assert len(out.finish_s) == 10_000


@pytest.mark.parametrize("chunked", [False, True], ids=["batching", "chunked-prefill"])
def test_bench_tensor_parallel_70b_costs_no_more_than_7b(benchmark: Any, chunked: bool) -> None:
    """Simulator time of Llama-3.1-70B on 4×H100 TP4 over that of Llama-3.1-8B on one H100,
    same 10,000 requests at 2 requests/s, with the papers' continuous batching and with
    chunked prefill (the default of a new system): a tensor-parallel group is simulated as
    one unit whose decode curve learns like a single GPU's, so the ratio should stay at
    about 1 (target ≤ 1.2: no per-shard work). The 70B system holds about twice as many
    sequences at once (32 against 17), so its curves learn more batch sizes."""
    small_model, big_model = CAT.model("llama3.1-8b"), CAT.model("llama3.1-70b")
    small_req = _conv_requests("llama3.1-8b", 2.0)
    big_req = _conv_requests("llama3.1-70b", 2.0)
    small = _tp_system("h100-sxm", 1, 1, "nvlink4", chunked=chunked)
    big = _tp_system("h100-sxm", 4, 4, "nvlink4", chunked=chunked)

    def run(system: SystemSpec, model: Any, requests: Any) -> float:
        t0 = time.perf_counter()
        HomogeneousPolicy(_fresh_models()).simulate(system, model, requests)
        return time.perf_counter() - t0

    small_s = min(run(small, small_model, small_req) for _ in range(3))
    benchmark.pedantic(lambda: run(big, big_model, big_req), rounds=3, iterations=1)
    benchmark.extra_info.update(
        name="engine: 70B on 4xH100 TP4 / 8B on 1xH100 (10k conv reqs at 2/s, "
        + ("chunked prefill)" if chunked else "continuous batching)"),
        value=benchmark.stats.stats.min / small_s,
        unit="x",
        target=1.2,
    )
