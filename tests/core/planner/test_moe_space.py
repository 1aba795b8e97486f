"""The planner searches a mixture of experts' expert-parallel degree like the tensor-parallel
one, with bounds that hold."""

from __future__ import annotations

from typing import Any

from simulations.core.planner import Search
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


def test_the_recommendation_names_the_expert_and_tensor_parallel_layout_it_chose() -> None:
    search = Search(parse_plan(PLAN, moe_catalog()))
    report = search.run()
    layouts = {
        (
            int(dict(c.signature.options)["expert_parallel"]),
            int(dict(c.signature.options)["tensor_parallel"]),
        )
        for c in (g.config(i, search.plan) for g in search.groups for i in range(len(g)))
    }
    assert layouts == {(1, 1), (1, 2), (2, 1), (2, 2)}
    rec = report["recommendation"]
    assert rec is not None
    opts = rec["system"]["options"]
    ep, tp = int(opts["expert_parallel"]), int(opts["tensor_parallel"])
    said = [r for r in rec["reasons"] if r.startswith("Mixture of experts")]
    assert len(said) == 1
    assert f"expert_parallel {ep} × tensor_parallel {tp}:" in said[0]
    assert said[0] in rec["metrics"]["explanation"]
    # Mixtral's 8 experts: whole experts split over the EP GPUs, or slices of all of them
    assert ("4 of the 8 routed experts" if ep == 2 else "a 1/2 slice of all 8") in said[0]


def test_a_dense_model_gets_no_mixture_of_experts_explanation() -> None:
    doc = {**PLAN, "model": "llama3.1-8b"}
    doc["space"] = {
        "devices": PLAN["space"]["devices"],
        "policies": [
            {
                "policy": "homogeneous",
                "options": {"max_batch": [32], "tensor_parallel": [1, 2], "link": ["nvlink4"]},
            }
        ],
    }
    report = plan_search(parse_plan(doc, moe_catalog()))
    assert report["recommendation"] is not None
    assert "explanation" not in report["recommendation"]["metrics"]
