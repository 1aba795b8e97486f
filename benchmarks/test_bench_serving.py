"""Speed targets of issue 19 item 5 (loaded devices):

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
