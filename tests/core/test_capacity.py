"""A scenario's ``capacity``: each system's highest arrival rate within the SLO by bounded
bisection, and the ``overloaded`` flag when the offered load exceeds what it serves."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import parse_scenario, scenario_to_document
from simulations.core.simulate import simulate

CATALOG = builtin_catalog()
SYSTEM = {
    "name": "2xA100",
    "policy": "homogeneous",
    "devices": [{"device": "a100-80gb", "count": 2}],
}


def _doc(rate: float = 1.0, **extra: Any) -> dict[str, Any]:
    return {
        "name": "capacity",
        "model": "llama2-7b",
        "workload": {
            "requests": 60,
            "input_tokens": {"dist": "uniform", "low": 200, "high": 800},
            "output_tokens": {"dist": "uniform", "low": 32, "high": 128},
            "arrival": {"kind": "poisson", "rate_per_s": rate},
            "seed": 3,
        },
        "systems": [copy.deepcopy(SYSTEM)],
        "slo": {"ttft_p90_ms": 400, "tpot_p90_ms": 100},
        "capacity": {"requests": 60, "steps": 6},
        **extra,
    }


def _entry(doc: dict[str, Any]) -> dict[str, Any]:
    return simulate(parse_scenario(doc, CATALOG))["systems"][0]


def test_a_system_at_twice_its_capacity_is_flagged_overloaded() -> None:
    saturation = _entry(_doc())["capacity"]["saturation_rps"]
    assert saturation > 0
    over = _entry(_doc(rate=2 * saturation))
    assert over["overloaded"] is True
    assert over["capacity"]["offered_rps"] == pytest.approx(2 * saturation)
    under = _entry(_doc(rate=0.5 * saturation))
    assert under["overloaded"] is False


def test_the_bisection_brackets_the_slo_boundary() -> None:
    entry = _entry(_doc())
    cap = entry["capacity"]
    assert cap["limit"] == "slo"
    best = entry["max_load_rps_at_slo"]
    runs = cap["runs"]
    # Bounded work: one run at saturation, then one per step (plus the closed run).
    assert len(runs) == 1 + cap["steps"]
    passed = {r["rate_rps"]: r["slo_met"] for r in runs}
    assert passed[best] is True
    failing_above = min(r["rate_rps"] for r in runs if not r["slo_met"] and r["rate_rps"] > best)
    assert failing_above - best <= cap["saturation_rps"] / 2 ** cap["steps"] * (1 + 1e-12)
    assert not any(r["slo_met"] for r in runs if r["rate_rps"] >= failing_above)
    assert all(r["slo_met"] for r in runs if r["rate_rps"] <= best)
    # Each run is within the SLO exactly when its own latencies are.
    for r in runs:
        assert r["slo_met"] is (r["ttft_p90_ms"] <= 400 and r["tpot_p90_ms"] <= 100)


def test_a_loose_slo_is_limited_by_throughput() -> None:
    doc = _doc(slo={"ttft_p90_ms": 1e8})
    entry = _entry(doc)
    assert entry["capacity"]["limit"] == "throughput"
    assert entry["max_load_rps_at_slo"] == entry["capacity"]["saturation_rps"]
    assert len(entry["capacity"]["runs"]) == 1


def test_closed_arrivals_are_not_flagged() -> None:
    doc = _doc()
    doc["workload"]["arrival"] = {"kind": "closed"}
    assert _entry(doc)["overloaded"] is None


def test_without_capacity_a_result_has_no_capacity_keys() -> None:
    doc = _doc()
    del doc["capacity"]
    assert not {"capacity", "max_load_rps_at_slo", "overloaded"} & set(_entry(doc))


@pytest.mark.parametrize(
    ("capacity", "slo", "field"),
    [
        (True, None, "capacity"),
        ({"requests": 5}, {"ttft_p90_ms": 100}, "capacity.requests"),
        ({"requests": 10**6}, {"ttft_p90_ms": 100}, "capacity.requests"),
        ({"steps": 0}, {"ttft_p90_ms": 100}, "capacity.steps"),
        ({"steps": 50}, {"ttft_p90_ms": 100}, "capacity.steps"),
        ({"rate": 1}, {"ttft_p90_ms": 100}, "capacity.rate"),
        ("yes", {"ttft_p90_ms": 100}, "capacity"),
    ],
)
def test_it_refuses_a_bad_capacity_naming_the_field(capacity: Any, slo: Any, field: str) -> None:
    doc = _doc(capacity=capacity)
    if slo is None:
        del doc["slo"]
    else:
        doc["slo"] = slo
    with pytest.raises(ScenarioValidationError) as info:
        parse_scenario(doc, CATALOG)
    assert field in info.value.errors


def test_capacity_round_trips_through_the_document() -> None:
    spec = parse_scenario(_doc(), CATALOG)
    assert parse_scenario(scenario_to_document(spec), CATALOG).capacity == spec.capacity
