"""Mixture-of-experts systems on the engine: the fast path (decode curves, fast-forward)
gives the step-by-step reference's times, with continuous batching, chunked prefill,
expert parallelism and offloading."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulations.core.engine.requests import generate_requests
from simulations.core.policies.homogeneous import HomogeneousPolicy
from simulations.core.policies.moe_offload import MoeOffloadPolicy
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    DevicePlacement,
    LengthDist,
    LengthDistKind,
    SystemSpec,
    WorkloadSpec,
)

from .catalog import moe_catalog, moe_model

CAT = moe_catalog()


def _requests(model: Any, n: int = 80) -> Any:
    w = WorkloadSpec(
        requests=n,
        input_tokens=LengthDist(LengthDistKind.UNIFORM, low=64, high=1500),
        output_tokens=LengthDist(LengthDistKind.UNIFORM, low=8, high=300),
        arrival=ArrivalSpec(ArrivalKind.POISSON, rate_per_s=6.0),
        seed=3,
    )
    return generate_requests(w, model)


def _gpu(slug: str, count: int, role: str = "", runtime: str = "vllm-fp16") -> DevicePlacement:
    return DevicePlacement(CAT.device(slug), count, CAT.runtime(runtime), role)


CASES = [
    pytest.param(
        "mixtral-8x7b",
        SystemSpec(
            "ep2-dp-attention",
            "homogeneous",
            (_gpu("h100-sxm", 2),),
            {"max_batch": 64, "expert_parallel": 2, "link": "nvlink4"},
            CAT.link("nvlink4"),
        ),
        id="ep2-dp-attention",
    ),
    pytest.param(
        "qwen3-30b-a3b",
        SystemSpec(
            "chunked-zipf",
            "homogeneous",
            (_gpu("h100-sxm", 1),),
            {
                "max_batch": 64,
                "chunked_prefill": True,
                "max_batched_tokens": 512,
                "moe_routing_zipf": 0.8,
            },
        ),
        id="chunked-skewed",
    ),
    pytest.param(
        "gpt-oss-20b",
        SystemSpec(
            "sliding-window-chunked",
            "homogeneous",
            (_gpu("h100-sxm", 1),),
            {"max_batch": 64, "chunked_prefill": True, "max_batched_tokens": 512},
        ),
        id="sliding-window-chunked",
    ),
    pytest.param(
        "qwen3-30b-a3b",
        SystemSpec(
            "offload",
            "moe-offload",
            (
                _gpu("l40s", 1, "gpu"),
                DevicePlacement(
                    CAT.device("epyc-9575f"),
                    1,
                    CAT.default_runtime(CAT.device("epyc-9575f")),
                    "host",
                ),
            ),
            {"max_batch": 32},
        ),
        id="offload",
    ),
]


@pytest.mark.parametrize(("slug", "system"), CASES)
def test_the_fast_path_gives_the_step_by_step_times(slug: str, system: SystemSpec) -> None:
    model = moe_model(slug)
    reqs = _requests(model)
    cls = HomogeneousPolicy if system.policy == "homogeneous" else MoeOffloadPolicy
    fast = cls().simulate(system, model, reqs)
    ref = cls(reference=True).simulate(system, model, reqs)
    for a, b in ((fast.first_token_s, ref.first_token_s), (fast.finish_s, ref.finish_s)):
        assert np.allclose(a, b, rtol=1e-9, atol=0)
    assert np.all(np.isfinite(fast.finish_s))
