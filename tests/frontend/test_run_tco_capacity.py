"""The run page's total cost of ownership and capacity tables."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from frontend.templatetags.frontend_tags import num
from simulations.runs.models import SimulationRun
from tests.frontend.conftest import glitches_document, store_succeeded_run
from tests.frontend.test_run_pages import run_figures

pytestmark = pytest.mark.django_db

COSTS = {
    "electricity_usd_per_kwh": 0.12,
    "pue": 1.3,
    "amortisation_years": 4,
    "utilisation": 0.6,
    "hosting_fraction_of_capex": 0.1,
}


def _run(user: Any, **extra: Any) -> SimulationRun:
    doc = glitches_document()
    doc["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": 5.0}
    doc.update(extra)
    return store_succeeded_run(user, doc)


def _row(page: str, table: str, system: str) -> str:
    body = re.search(rf'<table id="{table}".*?</table>', page, re.S)
    assert body is not None, f"no {table} table"
    row = re.search(rf'<tr data-system="{re.escape(system)}".*?</tr>', body.group(0), re.S)
    assert row is not None, f"no row for {system}"
    return row.group(0)


def test_the_run_page_shows_each_systems_tco_and_max_load(
    seeded: Any, user: Any, alice_client: Any
) -> None:
    run = _run(user, costs=COSTS, capacity={"requests": 30, "steps": 3})
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    for s in run.result["systems"]:
        tco = _row(page, "tco", s["name"])
        for value in (
            s["tco_usd_per_year"],
            s["usd_per_million_tokens"],
            s["tco"]["capex_share_usd_per_year"],
            s["tco"]["energy_usd_per_year"],
        ):
            assert f">{html.escape(num(value))}<" in tco
        assert "n/a" not in tco
        assert f">{html.escape(num(s['max_load_rps_at_slo']))}<" in _row(
            page, "capacity", s["name"]
        )
        cap = _row(page, "capacity", s["name"])
        assert ("Overloaded" in cap) is bool(s["overloaded"])
    # The capacity chart: one line per system and panel, through the bisection runs.
    charts = run_figures(alice_client, f"/runs/{run.pk}/")
    lines = charts["capacity-chart"]["data"]
    assert len(lines) == 3 * len(run.result["systems"])
    first = run.result["systems"][0]["capacity"]["runs"]
    assert sorted(lines[0]["x"]) == sorted(r["rate_rps"] for r in first)
    # 5 requests/s is far beyond either system: both flagged.
    assert all(s["overloaded"] for s in run.result["systems"])


def test_an_unpriced_device_says_why_it_has_no_tco(
    seeded: Any, user: Any, alice_client: Any
) -> None:
    doc = glitches_document()
    doc["systems"] = [
        {"name": "A10G", "policy": "homogeneous", "devices": [{"device": "a10g", "count": 1}]}
    ]
    doc["costs"] = COSTS
    run = store_succeeded_run(user, doc)
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "n/a: no price for a10g" in _row(page, "tco", "A10G")


def test_a_run_without_costs_or_capacity_shows_neither_table(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    page = alice_client.get(f"/runs/{glitches_run.pk}/").content.decode()
    assert 'id="tco"' not in page and 'id="capacity"' not in page
    assert "capacity-chart" not in run_figures(alice_client, f"/runs/{glitches_run.pk}/")
