"""The homogeneous policy's batching options: chunked prefill and prefix caching are
checked together, refused on devices that cannot run them, and off by default."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.scenario import parse_scenario, scenario_to_document
from simulations.core.simulate import simulate

CAT = builtin_catalog()
DOC: dict[str, Any] = {
    "name": "batching options",
    "model": "llama2-7b",
    "workload": {
        "requests": 20,
        "input_tokens": 300,
        "output_tokens": 20,
        "arrival": {"kind": "poisson", "rate_per_s": 4.0},
        "seed": 2,
        "shared_prefix": {"tokens": 256, "fraction": 0.5},
    },
    "systems": [
        {
            "name": "1xA100",
            "policy": "homogeneous",
            "devices": [{"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16"}],
            "options": {"max_batch": 32, "chunked_prefill": True, "prefix_caching": True},
        }
    ],
}


def _doc(**options: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["systems"][0]["options"] = options
    return doc


def test_prefix_caching_without_chunked_prefill_is_refused_naming_the_option() -> None:
    with pytest.raises(ScenarioValidationError) as err:
        parse_scenario(_doc(max_batch=32, prefix_caching=True), CAT)
    assert "systems[0].options.prefix_caching" in err.value.errors


def test_a_token_budget_below_max_batch_is_refused_with_chunked_prefill() -> None:
    with pytest.raises(ScenarioValidationError) as err:
        parse_scenario(_doc(max_batch=64, max_batched_tokens=32, chunked_prefill=True), CAT)
    assert "systems[0].options.max_batched_tokens" in err.value.errors


def test_chunked_prefill_on_an_fpga_is_refused_naming_the_option() -> None:
    doc = _doc(max_batch=4, chunked_prefill=True)
    doc["systems"][0]["devices"] = [{"device": "u280", "count": 1}]
    with pytest.raises(SpecError) as err:
        simulate(parse_scenario(doc, CAT))
    assert err.value.field == "systems[0].options.chunked_prefill"


def test_both_are_off_by_default() -> None:
    spec = parse_scenario(_doc(max_batch=32), CAT)
    options = spec.systems[0].options
    assert options["chunked_prefill"] is False and options["prefix_caching"] is False


def test_a_scenario_with_a_shared_prefix_round_trips_and_reports_its_hits() -> None:
    spec = parse_scenario(DOC, CAT)
    assert parse_scenario(scenario_to_document(spec), CAT) == spec
    scheduler = simulate(spec)["systems"][0]["scheduler"]
    assert scheduler["chunked_prefill"] is True
    assert scheduler["prefix_lookups"] > 0
    assert 0 < scheduler["prefix_hit_rate"] <= 1
    assert scheduler["prefill_tokens_saved"] == 256 * scheduler["prefix_hits"]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"tokens": 0, "fraction": 0.5}, "workload.shared_prefix.tokens"),
        ({"tokens": 10, "fraction": 1.5}, "workload.shared_prefix.fraction"),
        ({"tokens": 10, "fraction": "half"}, "workload.shared_prefix.fraction"),
        ({"tokens": 10, "fraction": 0.5, "where": "start"}, "workload.shared_prefix.where"),
    ],
)
def test_a_bad_shared_prefix_is_refused_naming_the_field(value: Any, field: str) -> None:
    doc = copy.deepcopy(DOC)
    doc["workload"]["shared_prefix"] = value
    with pytest.raises(ScenarioValidationError) as err:
        parse_scenario(doc, CAT)
    assert field in err.value.errors


def test_a_tensor_parallel_group_runs_chunked_prefill_and_a_pipeline_refuses_it() -> None:
    doc = _doc(
        max_batch=32, chunked_prefill=True, prefix_caching=True, tensor_parallel=2, link="nvlink4"
    )
    doc["systems"][0]["devices"] = [{"device": "h100-sxm", "count": 2, "runtime": "vllm-fp16"}]
    result = simulate(parse_scenario(doc, CAT))["systems"][0]
    assert result["scheduler"]["chunked_prefill"] is True
    assert result["scheduler"]["prefix_hits"] > 0
    doc["systems"][0]["options"] = {
        "max_batch": 32,
        "chunked_prefill": True,
        "pipeline_parallel": 2,
        "link": "nvlink4",
    }
    with pytest.raises(SpecError) as err:
        simulate(parse_scenario(doc, CAT))
    assert err.value.field == "systems[0].options.chunked_prefill"
