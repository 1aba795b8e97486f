"""Tensor-parallel homogeneous GPU systems in the search space: the planner tries the
degrees a plan lists, only whole replicas of them, and recommends a 70B model's TP system
where no single 80 GB card holds it."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.planner import Search, enumerate_space
from tests.core.planner.helpers import parse


def tp_doc(degrees: list[int], **policy_options: Any) -> dict[str, Any]:
    """Llama-3.1-70B (141 GB of FP16 weights) on up to 8 H100s under homogeneous batching."""
    return {
        "name": "70b tensor parallel",
        "model": "llama3.1-70b",
        "workload": {
            "requests": 40,
            "input_tokens": {"dist": "uniform", "low": 64, "high": 512},
            "output_tokens": {"dist": "uniform", "low": 8, "high": 64},
            "arrival": {"kind": "poisson", "rate_per_s": 1.0},
            "seed": 1,
        },
        "targets": {"ttft_p90_ms": 2000, "tpot_p90_ms": 100},
        "space": {
            "devices": [{"device": "h100-sxm", "max_count": 8, "runtime": "vllm-fp16"}],
            "policies": [
                {
                    "policy": "homogeneous",
                    "options": {
                        "max_batch": [64],
                        "tensor_parallel": degrees,
                        "link": ["nvlink4"],
                        **policy_options,
                    },
                }
            ],
        },
        "search": {"sensitivity": False, "round_size": 4},
    }


def test_only_whole_replicas_of_each_degree_are_in_the_space() -> None:
    plan = parse(tp_doc([1, 2, 4, 8]))
    space = enumerate_space(plan)
    counts = {
        (dict(g.signature.options)["tensor_parallel"], int(c))
        for g in space.groups
        for c in g.counts[:, 0]
    }
    assert {c for tp, c in counts if tp == 1} == set(range(1, 9))
    assert {c for tp, c in counts if tp == 2} == {2, 4, 6, 8}
    assert {c for tp, c in counts if tp == 4} == {4, 8}
    assert {c for tp, c in counts if tp == 8} == {8}


def test_a_70b_model_that_fits_only_with_tensor_parallelism_gets_a_recommendation() -> None:
    without = Search(parse(tp_doc([1]))).run()
    assert without["recommendation"] is None
    report = Search(parse(tp_doc([1, 2, 4]))).run()
    rec = report["recommendation"]
    assert rec is not None
    assert rec["system"]["options"]["tensor_parallel"] in (2, 4)
    assert rec["system"]["options"]["link"] == "nvlink4"
    assert rec["system"]["devices"][0]["count"] % rec["system"]["options"]["tensor_parallel"] == 0


def test_the_screen_rejects_a_degree_that_does_not_divide_the_heads_as_invalid() -> None:
    search = Search(parse(tp_doc([3])))
    search.run()
    assert search.verdicts
    for verdict in search.verdicts:
        assert verdict.detail.startswith("invalid: options.tensor_parallel")
        assert "3 does not divide" in verdict.detail


def test_pipeline_parallelism_is_not_searched_and_the_plan_says_so() -> None:
    with pytest.raises((ScenarioValidationError, SpecError)) as exc:
        parse(tp_doc([2], pipeline_parallel=[2]))
    assert "pipeline parallelism" in str(exc.value)
