"""The plan report's scenario carries the plan's quoted prices, so re-running it with
``simulate`` reports the plan's capex for devices the catalog does not price."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.planner import Search
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from tests.core.planner.helpers import neo_doc, parse, small_doc


@cache
def _report() -> dict[str, Any]:
    return Search(parse(neo_doc())).run()


def test_the_report_scenario_quotes_the_plans_prices() -> None:
    report = _report()
    scenario = report["scenario"]
    assert scenario is not None and "scenario_omits" not in report
    quotes = {"a10g": 3500, "g5-4xlarge-cpu": 1500, "g5-16xlarge-cpu": 6000}
    seen = set()
    for system in scenario["systems"]:
        for d in system["devices"]:
            seen.add(d["device"])
            # The catalog-priced H100 keeps the catalog price; quoted entries carry theirs.
            assert d.get("price_usd") == quotes.get(d["device"])
    assert "a10g" in seen
    rec = report["recommendation"]
    for d in rec["system"]["devices"]:
        assert d.get("price_usd") == quotes.get(d["device"])


def test_simulating_the_report_scenario_gives_the_plans_capex() -> None:
    report = _report()
    capex = {e["key"]: e["capex_usd"] for e in report["evaluated"]}
    rec = report["recommendation"]
    result = simulate(parse_scenario(report["scenario"], builtin_catalog()))
    assert result["systems"][0]["name"] == rec["key"]
    for system in result["systems"]:
        assert system["capex_usd"] is not None
        assert math.isclose(system["capex_usd"], capex[system["name"]])
        assert math.isclose(
            system["cost_efficiency_tok_s_per_usd"],
            system["throughput_tok_s"] / capex[system["name"]],
        )
    first = result["systems"][0]
    assert math.isclose(first["capex_usd"], rec["capex_usd"])
    # The engine run of the scenario is the plan's confirmation run of that configuration.
    assert math.isclose(first["throughput_tok_s"], rec["metrics"]["throughput_tok_s"])
    sources = {p["device"]: p["price_source"] for p in first["prices"]}
    assert sources.get("a10g", "scenario") == "scenario"
    assert set(sources.values()) <= {"scenario", "catalog"}


def test_the_plans_engine_runs_price_devices_as_the_plan_does() -> None:
    report = _report()
    prices = {d["device"]: (d["price_usd"], d["price_source"]) for d in report["per_device_type"]}
    rec = report["recommendation"]
    for d in rec["metrics"]["devices"]:
        price, source = prices[d["device"]]
        assert d["price_usd"] == price
        assert d["price_source"] == ("scenario" if source.startswith("plan") else "catalog")


def test_an_h2m2_board_quoted_in_the_plan_reruns_at_the_plans_capex() -> None:
    doc = small_doc(targets={"tpot_p90_ms": 1000})
    doc["workload"]["requests"] = 12
    doc["space"] = {
        "devices": [{"device": "h2m2", "max_count": 2, "price_usd": 9000}],
        "policies": [{"policy": "h2m2", "options": {"mapping": ["h2m2"], "max_batch": [8]}}],
    }
    report = Search(parse(doc)).run()
    rec = report["recommendation"]
    assert rec is not None and "scenario_omits" not in report
    assert rec["system"]["devices"][0]["price_usd"] == 9000
    result = simulate(parse_scenario(report["scenario"], builtin_catalog()))
    first = result["systems"][0]
    assert first["name"] == rec["key"]
    assert first["capex_usd"] == rec["capex_usd"] == 9000 * rec["system"]["devices"][0]["count"]
    assert first["devices"][0]["price_source"] == "scenario"
