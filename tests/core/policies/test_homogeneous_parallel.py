"""The ``homogeneous`` policy's tensor and pipeline parallelism: replicas of tp × pp GPUs
behind the router, the communication share in the result, and the scenario refusing what
cannot run, naming the option."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate

CAT = builtin_catalog()


def scenario(
    options: dict[str, Any],
    *,
    device: str = "h100-sxm",
    count: int = 4,
    model: str = "llama3.1-70b",
    runtime: str = "vllm-fp16",
) -> dict[str, Any]:
    return {
        "name": "tp",
        "model": model,
        "workload": {
            "requests": 24,
            "input_tokens": {"dist": "uniform", "low": 200, "high": 900},
            "output_tokens": {"dist": "uniform", "low": 20, "high": 80},
            "arrival": {"kind": "poisson", "rate_per_s": 4.0},
            "seed": 3,
        },
        "systems": [
            {
                "name": "s",
                "policy": "homogeneous",
                "devices": [{"device": device, "count": count, "runtime": runtime}],
                "options": {"max_batch": 64, **options},
            }
        ],
    }


def errors(doc: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(ScenarioValidationError) as err:
        parse_scenario(doc, CAT)
    return err.value.errors


def result(doc: dict[str, Any]) -> dict[str, Any]:
    return simulate(parse_scenario(doc, CAT))["systems"][0]


def test_explicit_degrees_of_one_give_exactly_the_data_parallel_result() -> None:
    base = scenario({}, model="llama2-7b", device="a100-80gb", count=2)
    explicit = copy.deepcopy(base)
    explicit["systems"][0]["options"].update(
        tensor_parallel=1, pipeline_parallel=1, micro_batches=1, link="nvlink3"
    )
    a, b = result(base), result(explicit)
    a["scheduler"].pop("options")
    b["scheduler"].pop("options")
    assert a == b
    assert "parallel" not in a["devices"][0]


def test_a_70b_model_runs_on_four_h100s_as_one_tp4_replica() -> None:
    r = result(scenario({"tensor_parallel": 4, "link": "nvlink4"}))
    dev = r["devices"][0]
    assert dev["count"] == 4
    par = dev["parallel"]
    assert (par["tensor_parallel"], par["replicas"], par["devices_per_replica"]) == (4, 1, 4)
    assert par["link"] == "nvlink4" and par["bubble_fraction"] == 0.0
    assert 0.0 < par["comm_share"] < 0.5
    # Per device: a quarter of 141 GB of weights, within one card's 80 GB.
    assert 35 < par["memory_peak_gb_per_device"] < 80 and par["memory_capacity_gb_per_device"] == 80
    assert dev["memory_capacity_gb"] == 4 * 80  # the replica's


def test_eight_gpus_at_tp4_are_two_replicas_behind_the_router() -> None:
    r = result(scenario({"tensor_parallel": 4, "link": "pcie4-x16"}, device="a100-80gb", count=8))
    par = r["devices"][0]["parallel"]
    assert (par["replicas"], r["devices"][0]["count"]) == (2, 8)
    assert len(r["timeline"]) == 2


def test_a_slower_link_raises_the_communication_share() -> None:
    fast = result(scenario({"tensor_parallel": 4, "link": "nvlink4"}))
    slow = result(scenario({"tensor_parallel": 4, "link": "ethernet-100g"}))
    f, s = fast["devices"][0]["parallel"], slow["devices"][0]["parallel"]
    assert s["comm_share"] > f["comm_share"]
    assert slow["tpot_ms"]["mean"] > fast["tpot_ms"]["mean"]


def test_a_pipeline_shows_its_bubble_fraction() -> None:
    r = result(
        scenario(
            {"tensor_parallel": 2, "pipeline_parallel": 2, "micro_batches": 3, "link": "nvlink4"}
        )
    )
    par = r["devices"][0]["parallel"]
    assert par["bubble_fraction"] == pytest.approx(1 / 4)
    assert par["pipeline_parallel"] == 2 and par["replicas"] == 1


def test_a_degree_that_does_not_divide_the_heads_is_refused_naming_tensor_parallel() -> None:
    errs = errors(scenario({"tensor_parallel": 3, "link": "nvlink4"}, count=3))
    assert list(errs) == ["systems[0].options.tensor_parallel"]
    assert "n_heads" in errs["systems[0].options.tensor_parallel"][0]


def test_a_degree_that_does_not_divide_the_layers_is_refused_naming_pipeline_parallel() -> None:
    errs = errors(scenario({"pipeline_parallel": 3, "link": "nvlink4"}, count=3))
    assert list(errs) == ["systems[0].options.pipeline_parallel"]


def test_a_model_that_does_not_fit_even_with_tp_is_refused_naming_tensor_parallel() -> None:
    # 141 GB of FP16 weights over two 40 GB A100s: 70 GB per device.
    errs = errors(scenario({"tensor_parallel": 2, "link": "nvlink3"}, device="a100-40gb", count=2))
    assert list(errs) == ["systems[0].options.tensor_parallel"]
    assert "per device" in errs["systems[0].options.tensor_parallel"][0]


def test_a_count_the_group_does_not_divide_is_refused_naming_the_count() -> None:
    errs = errors(scenario({"tensor_parallel": 4, "link": "nvlink4"}, count=6))
    assert list(errs) == ["systems[0].devices[0].count"]


def test_a_parallel_system_without_a_link_is_refused_naming_the_link() -> None:
    assert list(errors(scenario({"tensor_parallel": 4}))) == ["systems[0].options.link"]


def test_an_unknown_link_is_refused_naming_the_link() -> None:
    errs = errors(scenario({"tensor_parallel": 4, "link": "nvlink9"}))
    assert list(errs) == ["systems[0].options.link"]
    assert "nvlink4" in errs["systems[0].options.link"][0]


def test_parallelism_on_a_non_gpu_device_is_refused_naming_the_device() -> None:
    doc = scenario(
        {"tensor_parallel": 2, "link": "pcie4-x16"},
        device="u280",
        count=2,
        model="llama2-7b",
        runtime="flightllm-w4a8",
    )
    assert list(errors(doc)) == ["systems[0].devices[0].device"]
