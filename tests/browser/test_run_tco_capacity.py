"""TCO and capacity on the run page in a real browser (Debian Chromium via Playwright): the
TCO table with each system's cost per year and per million tokens, where a rented device's
price comes from, and the capacity chart drawn with a line per system."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import make_user, screenshot, sign_in
from tests.browser.test_dashboard import plotted
from tests.frontend.conftest import glitches_document, store_succeeded_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_planner_reads_tco_with_price_sources_and_the_capacity_chart(
    live_server: Any, seeded_live: Any, browser_page: Any
) -> None:
    alice = make_user("alice")
    doc = glitches_document(30)
    doc["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": 5.0}
    doc["costs"] = {
        "electricity_usd_per_kwh": 0.12,
        "amortisation_years": 4,
        "cloud_usd_per_device_hour": {"a100-80gb": "specialty-a100-80gb-2026-05@high"},
    }
    doc["capacity"] = {"requests": 30, "steps": 3}
    run = store_succeeded_run(alice, doc)
    page = browser_page
    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(f"{base}/runs/{run.pk}/")
    tco = page.inner_text("#tco")
    for system in run.result["systems"]:
        assert system["name"] in tco
        assert system["tco_usd_per_year"] is not None
    prices = page.inner_text("#cloud-prices")
    assert "specialty-a100-80gb-2026-05@high" in prices and "as of 2026-05" in prices
    page.wait_for_function(
        "() => document.getElementById('capacity-chart')?.classList.contains('js-plotly-plot')"
    )
    names = {t["name"] for t in plotted(page, "capacity-chart")}
    for system in run.result["systems"]:
        assert any(system["name"] in n for n in names), (system["name"], names)
    assert page.js_errors == []
    screenshot(page, "run-tco-capacity")
