"""Neo speed target: 5,000 requests of the Azure code trace (its own arrival
times) on an A10G + g5.4xlarge host CPU simulate in under 3 s on one core."""

from __future__ import annotations

from typing import Any

import numpy as np

from simulations.core.catalog import builtin_catalog
from simulations.core.engine.requests import RequestSet
from simulations.core.policies.neo import NeoPolicy
from simulations.core.spec import DevicePlacement, SystemSpec
from simulations.core.traces import AZURE_CODE, load_bundled_trace

REQUESTS = 5000


def test_bench_neo_code_trace_a10g(benchmark: Any) -> None:
    benchmark.extra_info.update(
        name="neo: 5,000 code-trace requests, A10G + g5.4xlarge CPU", unit="s", target=3.0
    )
    cat = builtin_catalog()
    trace = load_bundled_trace(AZURE_CODE)
    requests = RequestSet.from_lists(
        np.asarray(trace.arrival_s[:REQUESTS]),
        list(trace.input_tokens[:REQUESTS]),
        list(trace.output_tokens[:REQUESTS]),
    )
    system = SystemSpec(
        "a10g+g5.4xlarge",
        "neo",
        (
            DevicePlacement(cat.device("a10g"), 1, cat.runtime("vllm-fp16"), "gpu"),
            DevicePlacement(
                cat.device("g5-4xlarge-cpu"), 1, cat.runtime("ispc-paged-attention-cpu"), "cpu"
            ),
        ),
    )
    model = cat.model("llama3.1-8b")

    def run() -> Any:
        return NeoPolicy().simulate(system, model, requests)

    out = benchmark.pedantic(run, rounds=3, iterations=1)
    assert int(np.count_nonzero(np.isfinite(out.finish_s))) == REQUESTS
