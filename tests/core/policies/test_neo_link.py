"""Neo's tensor-parallel GPU groups all-reduce over the system's catalog ``link`` (the
core's ring formula), and cost nothing without one, as before."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.parallel import (
    ALLREDUCES_PER_LAYER,
    allreduce_bytes,
    ring_allreduce_s,
)
from simulations.core.policies.neo.costs import StageCosts
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate

CAT = builtin_catalog()
MODEL = CAT.model("llama3.1-8b")


def gpu_only(options: dict[str, Any]) -> dict[str, Any]:
    doc = {
        "name": "neo-tp",
        "model": "llama3.1-8b",
        "workload": {
            "requests": 12,
            "input_tokens": 400,
            "output_tokens": 30,
            "arrival": {"kind": "poisson", "rate_per_s": 3.0},
        },
        "systems": [
            {
                "name": "tp2",
                "policy": "gpu-only",
                "devices": [
                    {"device": "h100-sxm", "count": 2, "role": "gpu", "runtime": "vllm-fp16"},
                    {"device": "xeon-8462y-plus-numa-node", "count": 1, "role": "cpu"},
                ],
                "options": options,
            }
        ],
    }
    return simulate(parse_scenario(doc, CAT))["systems"][0]


def test_gpu_only_tp_pays_its_allreduces_over_the_named_link() -> None:
    free = gpu_only({})["devices"][0]["parallel"]
    paid = gpu_only({"link": "pcie5-x16"})["devices"][0]["parallel"]
    assert free["comm_share"] == 0.0 and free["link"] is None
    assert paid["comm_share"] > 0.0 and paid["link"] == "pcie5-x16"


def test_neo_stage_costs_add_two_ring_allreduces_per_layer_over_the_link() -> None:
    gpu = build_device_model(CAT.device("h100-sxm"), CAT.runtime("vllm-fp16"))
    link = CAT.link("nvlink4")
    without = StageCosts(gpu, None, MODEL, 2)
    with_link = StageCosts(gpu, None, MODEL, 2, link)
    extra = ALLREDUCES_PER_LAYER * ring_allreduce_s(link, 2, allreduce_bytes(MODEL, 64))
    assert with_link.linear_layer_s(64) == pytest.approx(without.linear_layer_s(64) + extra)
