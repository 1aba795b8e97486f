"""The planner searches a mixture of experts' expert-parallel degree like the tensor-parallel
one, with bounds that hold."""

from __future__ import annotations

from typing import Any

from simulations.core.planner.document import parse_plan
from simulations.core.planner.search import plan_search
from tests.core.moe.catalog import moe_catalog

PLAN: dict[str, Any] = {
    "name": "Mixtral-8x7B on H100s, searching TP and EP",
    "model": "mixtral-8x7b",
    "workload": {
        "requests": 60,
        "input_tokens": 512,
        "output_tokens": 64,
        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
        "seed": 0,
    },
    "targets": {"ttft_p90_ms": 2000, "tpot_p90_ms": 60},
    "space": {
        "devices": [{"device": "h100-sxm", "max_count": 2, "runtime": "vllm-fp16"}],
        "policies": [
            {
                "policy": "homogeneous",
                "options": {
                    "max_batch": [32],
                    "tensor_parallel": [1, 2],
                    "expert_parallel": [1, 2],
                    "link": ["nvlink4"],
                },
            }
        ],
    },
    "constraints": {"max_devices_per_node": 8, "max_nodes": 1},
    "search": {"round_size": 8},
}


def test_the_planner_searches_expert_parallel_layouts_with_holding_bounds() -> None:
    report = plan_search(parse_plan(PLAN, moe_catalog()))
    evaluated = report["evaluated"]
    keys = {e["key"] for e in evaluated}
    assert any("expert_parallel=2,link=nvlink4,max_batch=32,tensor_parallel=1" in k for k in keys)
    assert any("expert_parallel=2,link=nvlink4,max_batch=32,tensor_parallel=2" in k for k in keys)
    # one H100 cannot hold Mixtral's 93 GB: every layout needs both GPUs
    assert all(e["key"].startswith("homogeneous:2x") for e in evaluated)
    for e in evaluated:
        m, s = e["metrics"], e["screen"]
        if not m:
            continue
        assert s["tpot_floor_ms"] <= m["tpot_p90_ms"]
        assert s["ttft_floor_ms"] <= m["ttft_p90_ms"]
        assert s["throughput_ceiling_tok_s"] >= m["throughput_tok_s"]
    assert report["recommendation"] is not None
