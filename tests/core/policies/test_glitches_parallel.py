"""Tensor parallelism for GLITCHES' GPU prefill role: groups of ``tensor_parallel`` GPUs
prefill (and decode when every FPGA is busy) as one unit, their all-reduces show as the
communication share, and the scenario refuses what cannot run, naming the option. At
``tensor_parallel`` 1 the paper's system is unchanged (``tests/core/test_outputs_unchanged``
compares every number of the GLITCHES examples and reproduction)."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate

CAT = builtin_catalog()


def scenario(gpus: int, options: dict[str, Any], model: str = "llama2-7b") -> dict[str, Any]:
    return {
        "name": "glitches tp",
        "model": model,
        "workload": {
            "requests": 40,
            "input_tokens": {"dist": "uniform", "low": 200, "high": 1500},
            "output_tokens": {"dist": "uniform", "low": 20, "high": 120},
            "arrival": {"kind": "poisson", "rate_per_s": 3.0},
            "seed": 5,
        },
        "systems": [
            {
                "name": "g",
                "policy": "glitches",
                "devices": [
                    {"device": "a100-80gb", "count": gpus, "role": "prefill"},
                    {"device": "u280", "count": 4, "role": "decode"},
                ],
                "options": options,
            }
        ],
    }


def run(doc: dict[str, Any]) -> dict[str, Any]:
    return simulate(parse_scenario(doc, CAT))["systems"][0]


def test_a_tensor_parallel_prefill_group_prefills_faster_and_reports_its_communication() -> None:
    one = run(scenario(1, {}))
    tp2 = run(scenario(2, {"tensor_parallel": 2, "link": "nvlink3"}))
    gpu = tp2["devices"][0]
    assert gpu["count"] == 2
    block = gpu["parallel"]
    assert (block["tensor_parallel"], block["replicas"], block["link"]) == (2, 1, "nvlink3")
    assert 0 < block["comm_share"] < 1
    assert "parallel" not in one["devices"][0]
    # one group of two GPUs prefills each prompt in less time than one GPU
    assert tp2["ttft_ms"]["p50"] < one["ttft_ms"]["p50"]
    assert tp2["scheduler"]["options"]["tensor_parallel"] == 2


def test_a_slower_link_never_speeds_the_group_up() -> None:
    fast = run(scenario(2, {"tensor_parallel": 2, "link": "nvlink3"}))
    slow = run(scenario(2, {"tensor_parallel": 2, "link": "pcie4-x16"}))
    assert slow["ttft_ms"]["mean"] >= fast["ttft_ms"]["mean"]
    assert (
        slow["devices"][0]["parallel"]["comm_share"] > fast["devices"][0]["parallel"]["comm_share"]
    )


@pytest.mark.parametrize(
    ("gpus", "options", "path", "words"),
    [
        (3, {"tensor_parallel": 3, "link": "nvlink3"}, "options.tensor_parallel", "divide"),
        (2, {"tensor_parallel": 2}, "options.link", "interconnect"),
        (3, {"tensor_parallel": 2, "link": "nvlink3"}, "devices[0].count", "groups"),
    ],
)
def test_a_prefill_group_that_cannot_run_is_refused_naming_the_field(
    gpus: int, options: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(ScenarioValidationError) as exc:
        parse_scenario(scenario(gpus, options), CAT)
    errors = exc.value.errors
    assert f"systems[0].{path}" in errors, errors
    assert words in " ".join(errors[f"systems[0].{path}"])


def test_the_planner_refuses_to_search_glitches_tensor_parallelism() -> None:
    from simulations.core.policies import get_policy

    assert get_policy("glitches").unsearchable_option("tensor_parallel", 2) is not None
    assert get_policy("glitches").unsearchable_option("tensor_parallel", 1) is None
