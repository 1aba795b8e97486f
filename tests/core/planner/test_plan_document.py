"""The plan document: every problem reported at once, keyed by the JSON path at fault."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.core.errors import ScenarioValidationError
from simulations.core.planner import document as plan_spec
from tests.core.planner.helpers import parse, small_doc


def _errors(doc: Any) -> dict[str, list[str]]:
    with pytest.raises(ScenarioValidationError) as info:
        parse(doc)
    return info.value.errors


def test_a_valid_document_resolves_devices_runtimes_options_and_defaults() -> None:
    plan = parse(small_doc())
    assert [d.label for d in plan.devices] == ["a100-80gb", "v100s", "u280"]
    assert plan.devices[2].runtime.slug == "flightllm-w4a8"
    assert [p.policy for p in plan.policies] == ["homogeneous", "glitches"]
    assert plan.policies[0].options == (("max_batch", (1,)),)
    assert plan.targets.ttft() == [(90.0, 1000.0)]
    assert plan.search.round_size == 4 and plan.search.sensitivity is False
    assert plan.constraints.as_dict() == {}


def test_it_rejects_a_non_object() -> None:
    assert "document" in _errors([1, 2])


def test_it_names_unknown_top_level_fields_and_missing_ones() -> None:
    doc = small_doc(colour="red")
    del doc["targets"]
    del doc["space"]
    errs = _errors(doc)
    assert "colour" in errs and "targets" in errs and "space" in errs


def test_it_rejects_unknown_devices_and_devices_without_a_price() -> None:
    doc = small_doc()
    doc["space"]["devices"][0]["device"] = "a999"
    doc["space"]["devices"][1]["device"] = "vhk158"
    errs = _errors(doc)
    assert "unknown device" in errs["space.devices[0].device"][0]
    assert "no price" in errs["space.devices[1].price_usd"][0]


def test_a_quoted_price_prices_a_device_the_catalog_has_no_price_for() -> None:
    doc = small_doc()
    doc["space"]["devices"][1] = {"device": "t4", "max_count": 2, "price_usd": 2500}
    plan = parse(doc)
    assert plan.devices[1].price_usd == 2500.0
    assert plan.devices[1].price_source == "plan document (space.devices[1].price_usd)"
    # A catalog price is cited with its source unless the document quotes another.
    assert plan.devices[0].price_usd == 17000.0
    assert "GLITCHES Table II" in plan.devices[0].price_source
    doc["space"]["devices"][0]["price_usd"] = 15000
    plan = parse(doc)
    assert plan.devices[0].price_usd == 15000.0
    assert plan.devices[0].price_source.startswith("plan document")


@pytest.mark.parametrize(
    ("price", "words"),
    [
        (0, "positive"),
        (-5, "positive"),
        (float("inf"), "finite"),
        (float("nan"), "finite"),
        ("3000", "number"),
        (True, "number"),
        (plan_spec.MAX_PRICE_USD * 2, "at most"),
    ],
)
def test_a_quoted_price_must_be_a_finite_bounded_positive_number(price: Any, words: str) -> None:
    doc = small_doc()
    doc["space"]["devices"][0]["price_usd"] = price
    assert words in _errors(doc)["space.devices[0].price_usd"][0]


def test_the_capex_of_a_configuration_uses_the_quoted_prices() -> None:
    from simulations.core.planner.space import enumerate_space

    doc = small_doc()
    doc["space"]["devices"] = [{"device": "t4", "min_count": 2, "max_count": 2, "price_usd": 2100}]
    doc["space"]["policies"] = [{"policy": "homogeneous", "options": {"max_batch": [1]}}]
    space = enumerate_space(parse(doc))
    assert [float(c) for g in space.groups for c in g.capex_usd] == [4200.0]


def test_it_checks_counts_and_runtime_kinds() -> None:
    doc = small_doc()
    doc["space"]["devices"][0].update(min_count=3, max_count=2)
    doc["space"]["devices"][1]["max_count"] = 0
    doc["space"]["devices"][2]["runtime"] = "hf-eager-fp16"
    errs = _errors(doc)
    assert "min_count" in errs["space.devices[0].max_count"][0]
    assert "at least 1" in errs["space.devices[1].max_count"][0]
    assert "gpu devices" in errs["space.devices[2].runtime"][0]


def test_it_rejects_a_device_listed_twice_on_the_same_runtime() -> None:
    doc = small_doc()
    doc["space"]["devices"].append({"device": "u280", "max_count": 1})
    assert "listed twice" in _errors(doc)["space.devices[3].device"][0]


def test_the_same_device_on_two_runtimes_is_two_entries() -> None:
    doc = small_doc()
    doc["space"]["devices"].append({"device": "a100-80gb", "max_count": 2, "runtime": "vllm-fp16"})
    plan = parse(doc)
    assert plan.devices[3].label == "a100-80gb@vllm-fp16"


def test_it_names_bad_policies_and_option_values() -> None:
    doc = small_doc()
    doc["space"]["policies"] = [
        {"policy": "nope"},
        {"policy": "heterollm"},
        {"policy": "homogeneous", "options": {"max_batch": [1, 0], "colour": [1]}},
        {"policy": "glitches", "options": {"prefetch_ratio": []}},
    ]
    errs = _errors(doc)
    assert "not implemented" in errs["space.policies[0].policy"][0]
    assert "cannot be searched" in errs["space.policies[1].policy"][0]
    assert "SoC" in errs["space.policies[1].policy"][0]
    assert "at least 1" in errs["space.policies[2].options.max_batch[1]"][0]
    assert "unknown option" in errs["space.policies[2].options.colour"][0]
    assert "at least one value" in errs["space.policies[3].options.prefetch_ratio"][0]


def test_a_policy_without_a_device_for_a_required_role_is_rejected() -> None:
    doc = small_doc()
    doc["space"]["policies"] = [{"policy": "glitches", "devices": ["u280"]}]
    errs = _errors(doc)
    assert "role 'prefill'" in errs["space.policies[0].devices"][0]
    doc["space"]["policies"] = [{"policy": "glitches", "devices": ["t4"]}]
    assert "not one of space.devices" in _errors(doc)["space.policies[0].devices[0]"][0]


def test_targets_must_be_positive_and_at_least_one_must_be_set() -> None:
    errs = _errors(small_doc(targets={}))
    assert "at least one" in errs["targets"][0]
    errs = _errors(small_doc(targets={"ttft_p90_ms": -1, "tpot_p90_ms": float("nan"), "x": 1}))
    assert "positive" in errs["targets.ttft_p90_ms"][0]
    assert "finite" in errs["targets.tpot_p90_ms"][0]
    assert "unknown field" in errs["targets.x"][0]


def test_constraints_and_search_options_are_bounded() -> None:
    doc = small_doc(
        constraints={"max_capex_usd": 0, "max_nodes": 2, "max_power_w": "a lot"},
        search={"round_size": 0, "max_load_factor": 1, "sensitivity": "yes", "bogus": 1},
    )
    errs = _errors(doc)
    assert "positive" in errs["constraints.max_capex_usd"][0]
    assert "max_devices_per_node" in errs["constraints.max_nodes"][0]
    assert "number" in errs["constraints.max_power_w"][0]
    assert "at least 1" in errs["search.round_size"][0]
    assert "greater than 1" in errs["search.max_load_factor"][0]
    assert "true or false" in errs["search.sensitivity"][0]
    assert "unknown field" in errs["search.bogus"][0]


def test_workload_errors_use_the_scenario_parser_paths() -> None:
    doc = small_doc()
    doc["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": -2}
    doc["workload"]["output_tokens"] = {"dist": "uniform", "low": 9, "high": 3}
    errs = _errors(doc)
    assert "workload.arrival.rate_per_s" in errs
    assert "workload.output_tokens.high" in errs


def test_it_caps_the_requests_and_the_size_of_the_space() -> None:
    doc = small_doc()
    doc["workload"]["requests"] = plan_spec.MAX_PLAN_REQUESTS + 1
    assert "workload.requests" in _errors(doc)
    doc = small_doc()
    doc["space"]["devices"] = [
        {"device": d, "max_count": 256} for d in ("a100-80gb", "v100s", "h100-sxm", "u280")
    ]
    doc["space"]["policies"] = [{"policy": "glitches", "options": {"prefetch_ratio": [1, 2, 4, 8]}}]
    assert "configurations" in _errors(doc)["space"][0]


def test_the_configuration_count_matches_the_enumeration() -> None:
    from simulations.core.planner.space import enumerate_space

    plan = parse(small_doc())
    space = enumerate_space(plan)
    assert space.total == plan_spec.count_configurations(plan.devices, plan.policies)
    # homogeneous: 3 + 3 + 4; glitches: (3 + 3) GPUs × (4 FPGA counts + none)
    assert space.total == 10 + 6 * 5


def _h2m2_doc(**memory: Any) -> dict[str, Any]:
    doc = small_doc()
    options = {"hbm_gb": [48, 96], "lpddr_gb": [256], "hbm_usd_per_gb": 20, "lpddr_usd_per_gb": 4}
    options.update(memory)
    doc["space"]["devices"] = [
        {"device": "h2m2", "max_count": 2, "price_usd": 9000, "memory_options": options}
    ]
    doc["space"]["policies"] = [{"policy": "h2m2", "options": {"mapping": ["h2m2", "sublayer"]}}]
    return doc


def test_memory_options_make_one_priced_device_per_capacity_combination() -> None:
    plan = parse(_h2m2_doc())
    assert [d.label for d in plan.devices] == ["h2m2[hbm48+lpddr256]", "h2m2[hbm96+lpddr256]"]
    assert [d.price_usd for d in plan.devices] == [9000 + 48 * 20 + 256 * 4, 9000 + 96 * 20 + 1024]
    assert [t.capacity_gb for t in plan.devices[1].device.memory] == [96, 256]
    assert "memory_options" in plan.devices[0].price_source
    assert plan_spec.count_configurations(plan.devices, plan.policies) == 2 * 2 * 2


def test_memory_options_are_validated_by_path() -> None:
    errs = _errors(_h2m2_doc(hbm_gb=[0, "x"], lpddr_usd_per_gb=None, colour=1))
    assert "positive" in errs["space.devices[0].memory_options.hbm_gb[0]"][0]
    assert "number" in errs["space.devices[0].memory_options.hbm_gb[1]"][0]
    assert "required" in errs["space.devices[0].memory_options.lpddr_usd_per_gb"][0]
    assert "unknown field" in errs["space.devices[0].memory_options.colour"][0]
    doc = small_doc()
    doc["space"]["devices"][0]["memory_options"] = {"lpddr_gb": [64], "lpddr_usd_per_gb": 3}
    errs = _errors(doc)
    assert "no lpddr memory tier" in errs["space.devices[0].memory_options.lpddr_gb"][0]


def test_the_8_hbm_baseline_is_not_a_board_a_plan_can_price() -> None:
    doc = _h2m2_doc()
    doc["space"]["policies"][0]["options"]["mapping"] = ["h2m2", "8-hbm"]
    assert "eight HBM devices" in _errors(doc)["space.policies[0].options.mapping[1]"][0]
