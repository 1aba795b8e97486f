"""A scenario's ``costs``: validation naming the field, and each result's total cost of
ownership — consistent by arithmetic with the result's own fields, null (with a reason)
when a device has no price, absent without ``costs``."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import parse_scenario, scenario_to_document
from simulations.core.simulate import simulate
from simulations.core.tco import HOURS_PER_YEAR, SECONDS_PER_YEAR

CATALOG = builtin_catalog()
COSTS: dict[str, Any] = {
    "electricity_usd_per_kwh": 0.15,
    "pue": 1.4,
    "amortisation_years": 4,
    "utilisation": 0.5,
    "hosting_usd_per_device_year": 1200,
}


def _doc(costs: Any = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "tco",
        "model": "llama2-7b",
        "workload": {
            "requests": 16,
            "input_tokens": {"dist": "uniform", "low": 100, "high": 400},
            "output_tokens": {"dist": "uniform", "low": 8, "high": 40},
            "arrival": {"kind": "poisson", "rate_per_s": 2.0},
            "seed": 0,
        },
        "systems": [
            {
                "name": "2xA100",
                "policy": "homogeneous",
                "devices": [{"device": "a100-80gb", "count": 2}],
            },
            {
                "name": "A100+U280",
                "policy": "glitches",
                "devices": [
                    {"device": "a100-80gb", "count": 1, "role": "prefill"},
                    {"device": "u280", "count": 2, "role": "decode"},
                ],
            },
        ],
        **extra,
    }
    if costs is not None:
        doc["costs"] = copy.deepcopy(costs)
    return doc


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    return simulate(parse_scenario(doc, CATALOG))


def _errors(doc: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(ScenarioValidationError) as info:
        parse_scenario(doc, CATALOG)
    return info.value.errors


def _check_arithmetic(entry: dict[str, Any], costs: dict[str, Any], rented: set[str]) -> None:
    """Recompute the TCO of ``entry`` from its own fields and the costs document."""
    t = entry["tco"]
    util = costs.get("utilisation", 1.0)
    owned = [d for d in entry["devices"] if d["device"] not in rented]
    power = sum(d["energy_j"] for d in owned) / entry["span_s"]
    assert t["owned_avg_power_w"] == pytest.approx(power, rel=1e-12)
    kwh = power * costs.get("pue", 1.0) * HOURS_PER_YEAR * util / 1000
    assert t["energy_kwh_per_year"] == pytest.approx(kwh, rel=1e-12)
    assert t["energy_usd_per_year"] == pytest.approx(
        kwh * costs["electricity_usd_per_kwh"], rel=1e-12
    )
    owned_prices = [p for p in entry["prices"] if p["device"] not in rented]
    capex = sum(p["price_usd"] * p["count"] for p in owned_prices)
    assert t["owned_capex_usd"] == pytest.approx(capex, rel=1e-12)
    assert t["capex_share_usd_per_year"] == pytest.approx(
        capex / costs["amortisation_years"], rel=1e-12
    )
    n_owned = sum(p["count"] for p in owned_prices)
    hosting = n_owned * costs.get("hosting_usd_per_device_year", 0.0) + capex * costs.get(
        "hosting_fraction_of_capex", 0.0
    )
    assert t["hosting_usd_per_year"] == pytest.approx(hosting, rel=1e-12)
    cloud = sum(
        costs["cloud_usd_per_device_hour"][p["device"]] * p["count"] * HOURS_PER_YEAR * util
        for p in entry["prices"]
        if p["device"] in rented
    )
    assert t["cloud_usd_per_year"] == pytest.approx(cloud, rel=1e-12)
    total = (
        t["capex_share_usd_per_year"]
        + t["energy_usd_per_year"]
        + t["hosting_usd_per_year"]
        + t["cloud_usd_per_year"]
    )
    assert entry["tco_usd_per_year"] == pytest.approx(total, rel=1e-12)
    tokens = entry["throughput_tok_s"] * SECONDS_PER_YEAR * util
    assert t["tokens_per_year"] == pytest.approx(tokens, rel=1e-12)
    assert entry["usd_per_million_tokens"] == pytest.approx(total / tokens * 1e6, rel=1e-12)


def test_tco_of_each_system_recomputes_from_its_own_fields() -> None:
    result = _run(_doc(COSTS))
    for entry in result["systems"]:
        assert entry["tco"]["unavailable_reason"] is None
        _check_arithmetic(entry, COSTS, rented=set())
        assert entry["tco_usd_per_year"] > entry["tco"]["capex_share_usd_per_year"] > 0


def test_hosting_as_a_fraction_of_capex_and_cloud_rental_recompute() -> None:
    costs = {
        "electricity_usd_per_kwh": 0.1,
        "amortisation_years": 3,
        "hosting_fraction_of_capex": 0.08,
        "cloud_usd_per_device_hour": {"a100-80gb": 2.5},
    }
    result = _run(_doc(costs))
    for entry in result["systems"]:
        _check_arithmetic(entry, costs, rented={"a100-80gb"})
    rented_only = result["systems"][0]
    assert rented_only["tco"]["owned_capex_usd"] == 0
    assert rented_only["tco"]["energy_usd_per_year"] == 0
    assert rented_only["tco_usd_per_year"] == pytest.approx(2.5 * 2 * HOURS_PER_YEAR)


def test_a_device_without_a_price_gives_null_tco_with_a_reason() -> None:
    doc = _doc(COSTS)
    doc["systems"] = [
        {"name": "A10G", "policy": "homogeneous", "devices": [{"device": "a10g", "count": 1}]}
    ]
    entry = _run(doc)["systems"][0]
    assert entry["tco_usd_per_year"] is None
    assert entry["usd_per_million_tokens"] is None
    assert entry["tco"]["devices_without_price"] == ["a10g"]
    assert "a10g" in entry["tco"]["unavailable_reason"]
    # A quote prices it.
    doc["systems"][0]["devices"][0]["price_usd"] = 3500
    entry = _run(doc)["systems"][0]
    _check_arithmetic(entry, COSTS, rented=set())


def test_without_costs_a_result_has_no_tco_keys() -> None:
    entry = _run(_doc())["systems"][0]
    assert not {"tco", "tco_usd_per_year", "usd_per_million_tokens"} & set(entry)


@pytest.mark.parametrize(
    ("costs", "field"),
    [
        ({**COSTS, "electricity_usd_per_kwh": -0.1}, "costs.electricity_usd_per_kwh"),
        ({**COSTS, "electricity_usd_per_kwh": math.nan}, "costs.electricity_usd_per_kwh"),
        ({**COSTS, "electricity_usd_per_kwh": 1e9}, "costs.electricity_usd_per_kwh"),
        ({k: v for k, v in COSTS.items() if k != "amortisation_years"}, "costs.amortisation_years"),
        ({**COSTS, "amortisation_years": 0}, "costs.amortisation_years"),
        ({**COSTS, "pue": 0.9}, "costs.pue"),
        ({**COSTS, "pue": math.inf}, "costs.pue"),
        ({**COSTS, "utilisation": 1.5}, "costs.utilisation"),
        ({**COSTS, "utilisation": 0}, "costs.utilisation"),
        ({**COSTS, "utilisation": True}, "costs.utilisation"),
        ({**COSTS, "hosting_usd_per_device_year": "1000"}, "costs.hosting_usd_per_device_year"),
        ({**COSTS, "hosting_fraction_of_capex": 0.1}, "costs.hosting_fraction_of_capex"),
        (
            {**COSTS, "cloud_usd_per_device_hour": {"nope": 1}},
            "costs.cloud_usd_per_device_hour.nope",
        ),
        (
            {**COSTS, "cloud_usd_per_device_hour": {"a100-80gb": 0}},
            "costs.cloud_usd_per_device_hour.a100-80gb",
        ),
        ({**COSTS, "watts": 1}, "costs.watts"),
        ([], "costs"),
    ],
)
def test_it_refuses_bad_costs_naming_the_field(costs: Any, field: str) -> None:
    assert field in _errors(_doc(costs))


def test_costs_round_trip_through_the_document() -> None:
    spec = parse_scenario(_doc(COSTS), CATALOG)
    again = parse_scenario(scenario_to_document(spec), CATALOG)
    assert again.costs == spec.costs
    assert again.costs is not None and again.costs.hosting_usd_per_device_year == 1200


# --- cloud prices from the catalog -----------------------------------------------------------


def test_every_catalog_cloud_offer_names_a_catalog_device_a_date_and_a_source() -> None:
    assert CATALOG.cloud_offers
    for offer in CATALOG.cloud_offers.values():
        assert offer.device in CATALOG.devices, offer.slug
        assert offer.as_of and offer.source.count("http") >= 1, offer.slug
        assert 0 < offer.usd_per_device_hour_low <= offer.usd_per_device_hour_high


def test_a_cloud_price_may_name_a_catalog_offer_and_the_result_says_where_it_comes_from() -> None:
    offer = CATALOG.cloud_offers["specialty-a100-80gb-2026-05"]
    costs = {
        "electricity_usd_per_kwh": 0.1,
        "amortisation_years": 3,
        "cloud_usd_per_device_hour": {"a100-80gb": "specialty-a100-80gb-2026-05@high"},
    }
    entry = _run(_doc(costs))["systems"][0]
    numeric = {**costs, "cloud_usd_per_device_hour": {"a100-80gb": offer.usd_per_device_hour_high}}
    _check_arithmetic(entry, numeric, rented={"a100-80gb"})
    source = entry["tco"]["cloud_prices"]["a100-80gb"]
    assert source["usd_per_device_hour"] == offer.usd_per_device_hour_high == 1.5
    assert (source["offer"], source["as_of"]) == ("specialty-a100-80gb-2026-05@high", "2026-05")
    assert "mercatus" in source["source"]
    # the low end of the same range costs less
    costs["cloud_usd_per_device_hour"] = {"a100-80gb": "specialty-a100-80gb-2026-05@low"}
    low = _run(_doc(costs))["systems"][0]
    assert low["tco_usd_per_year"] < entry["tco_usd_per_year"]


def test_a_number_given_as_a_cloud_price_is_labelled_as_given() -> None:
    costs = {**COSTS, "cloud_usd_per_device_hour": {"a100-80gb": 2.5}}
    entry = _run(_doc(costs))["systems"][0]
    assert entry["tco"]["cloud_prices"] == {
        "a100-80gb": {"usd_per_device_hour": 2.5, "source": "given in costs"}
    }


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no-such-offer", "unknown cloud offer"),
        ("aws-p4d-24xlarge", "prices a100-40gb, not a100-80gb"),
        ("hyperscaler-a100-80gb-2026-05", "is a range"),
        ("hyperscaler-a100-80gb-2026-05@mid", "give low or high"),
    ],
)
def test_it_refuses_a_cloud_offer_that_does_not_price_the_device(ref: str, message: str) -> None:
    costs = {**COSTS, "cloud_usd_per_device_hour": {"a100-80gb": ref}}
    errors = _errors(_doc(costs))["costs.cloud_usd_per_device_hour.a100-80gb"]
    assert any(message in e for e in errors), errors
    if "range" not in message and "low or high" not in message:
        # a wrong offer's message lists what the device can be rented at
        assert any("specialty-a100-80gb-2026-05" in e for e in errors), errors


def test_a_cloud_offer_reference_round_trips_through_the_document() -> None:
    costs = {**COSTS, "cloud_usd_per_device_hour": {"a100-80gb": "specialty-a100-80gb-2026-05@low"}}
    spec = parse_scenario(_doc(costs), CATALOG)
    doc = scenario_to_document(spec)
    assert doc["costs"]["cloud_usd_per_device_hour"] == {
        "a100-80gb": "specialty-a100-80gb-2026-05@low"
    }
    assert parse_scenario(doc, CATALOG).costs == spec.costs
