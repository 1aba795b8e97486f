"""A plan's device entry ``tdp_w`` (the user's power quote) works like its price quote: a
device without published power is refused without one, by JSON path; the quote is the
board power of the whole search (power constraint, engine runs); the report says where it
came from and its scenario carries it, so a re-run reproduces the plan's energy."""

from __future__ import annotations

import copy
import math
from functools import cache
from typing import Any

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog, catalog_from_records, iter_records
from simulations.core.errors import ScenarioValidationError
from simulations.core.planner import PlanSpec, Search, parse_plan
from simulations.core.planner.space import enumerate_space
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from tests.core.planner.helpers import small_doc

#: The A100 80GB record without a power figure, as the catalog holds TPUs and the Alveo V80.
_RECORD = next(r for r in iter_records("devices") if r["slug"] == "a100-80gb")
UNPOWERED = "a100-unpowered"
CATALOG = catalog_from_records(
    devices=[{**copy.deepcopy(_RECORD), "slug": UNPOWERED, "tdp_w": None}],
    base=builtin_catalog(),
)


def _parse(doc: dict[str, Any]) -> PlanSpec:
    return parse_plan(doc, CATALOG)


def _errors(doc: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(ScenarioValidationError) as info:
        _parse(doc)
    return info.value.errors


def _doc(*devices: dict[str, Any], **over: Any) -> dict[str, Any]:
    doc = small_doc(**over)
    doc["workload"]["requests"] = 12
    doc["targets"] = {"tpot_p90_ms": 1000}
    doc["space"] = {
        "devices": list(devices),
        "policies": [{"policy": "homogeneous", "options": {"max_batch": [4]}}],
    }
    return doc


def test_a_device_without_published_power_is_refused_without_a_quote_naming_the_field() -> None:
    errs = _errors(
        _doc({"device": "a100-80gb", "max_count": 2}, {"device": UNPOWERED, "max_count": 2})
    )
    assert list(errs) == ["space.devices[1].tdp_w"]
    assert errs["space.devices[1].tdp_w"][0].startswith(f"{UNPOWERED} has no published power")


@pytest.mark.parametrize(
    ("quote", "words"),
    [(0, "positive"), (-5, "positive"), (float("nan"), "finite"), ("300", "number")],
)
def test_a_power_quote_must_be_a_finite_bounded_positive_number(quote: Any, words: str) -> None:
    errs = _errors(
        _doc(
            {"device": "a100-80gb", "max_count": 2},
            {"device": UNPOWERED, "max_count": 1, "tdp_w": quote},
        )
    )
    assert list(errs) == ["space.devices[1].tdp_w"]
    assert words in errs["space.devices[1].tdp_w"][0]


def test_a_quote_is_the_devices_power_and_its_source() -> None:
    plan = _parse(
        _doc(
            {"device": UNPOWERED, "max_count": 2, "tdp_w": 350},
            {"device": "a100-80gb", "max_count": 2, "runtime": "hf-eager-fp16"},
        )
    )
    quoted, catalog = plan.devices
    assert quoted.device.tdp_w == 350 and quoted.quoted_tdp_w == 350
    assert quoted.power_source == "plan document (space.devices[0].tdp_w)"
    assert catalog.quoted_tdp_w is None
    assert catalog.power_source == f"catalog ({_RECORD['sources']['tdp_w']})"


def test_the_power_constraint_uses_the_quote() -> None:
    doc = _doc(
        {"device": UNPOWERED, "min_count": 1, "max_count": 3, "tdp_w": 500},
        constraints={"max_power_w": 1000},
    )
    space = enumerate_space(_parse(doc))
    powers = sorted(float(p) for g in space.groups for p in g.power_w)
    assert powers == [500.0, 1000.0]
    assert space.excluded["max_power_w"] == 1


@cache
def _report() -> dict[str, Any]:
    doc = _doc({"device": UNPOWERED, "max_count": 2, "tdp_w": 450, "price_usd": 9000})
    return Search(_parse(doc)).run()


def test_the_report_carries_the_quote_and_says_where_it_came_from() -> None:
    report = _report()
    (per_type,) = report["per_device_type"]
    assert per_type["tdp_w"] == 450
    assert per_type["power_source"] == "plan document (space.devices[0].tdp_w)"
    rec = report["recommendation"]
    assert rec is not None
    for d in rec["system"]["devices"]:
        assert d["tdp_w"] == 450 and d["price_usd"] == 9000
    for system in report["scenario"]["systems"]:
        assert [d["tdp_w"] for d in system["devices"]] == [450]
    for d in rec["metrics"]["devices"]:
        assert d["tdp_w"] == 450 and d["power_source"] == "scenario"


def test_re_running_the_report_scenario_reproduces_the_plans_energy() -> None:
    report = _report()
    rec = report["recommendation"]
    first = simulate(parse_scenario(report["scenario"], CATALOG))["systems"][0]
    assert first["name"] == rec["key"]
    assert math.isclose(first["energy_j_per_token"], rec["metrics"]["energy_j_per_token"])
    assert math.isclose(first["avg_power_w"], rec["metrics"]["avg_power_w"])


def test_a_plan_without_power_keys_keeps_its_report_shape() -> None:
    doc = _doc({"device": "a100-80gb", "max_count": 1})
    report = Search(_parse(doc)).run()
    assert "tdp_w" not in report["per_device_type"][0]
    assert "power_source" not in report["per_device_type"][0]
    assert np.all(["tdp_w" not in d for d in report["recommendation"]["system"]["devices"]])
