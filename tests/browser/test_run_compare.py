"""Comparing saved runs in a real browser (Debian Chromium via Playwright): tick two runs
in the run list, compare them, and see the run page's table and charts over both runs'
systems, each labelled with its run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import make_user, screenshot, sign_in
from tests.browser.test_dashboard import COMPARISON_CHARTS, plotted
from tests.frontend.conftest import glitches_document, store_succeeded_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_planner_ticks_two_runs_and_compares_them(
    live_server: Any, seeded_live: Any, browser_page: Any
) -> None:
    alice = make_user("alice")
    first = store_succeeded_run(alice, glitches_document(10))
    smaller = glitches_document(8)
    smaller["name"] = "GLITCHES smaller"
    second = store_succeeded_run(alice, smaller)
    page = browser_page
    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(f"{base}/runs/")
    assert page.locator(f"#run-{first.pk} td.num").count() == 3  # the headline metrics
    page.check(f'#run-{first.pk} input[name="ids"]')
    page.check(f'#run-{second.pk} input[name="ids"]')
    page.click("#compare-runs")
    page.wait_for_url(f"{base}/runs/compare/*")
    header = page.inner_text("#summary thead")
    for run in (first, second):
        assert f"run #{run.pk} · 8xA100" in header
    for chart_id in COMPARISON_CHARTS:
        page.wait_for_function(
            "id => document.getElementById(id)?.classList.contains('js-plotly-plot')", arg=chart_id
        )
    names = {t["name"] for t in plotted(page, "latency-cdf")}
    assert {f"run #{first.pk} · 8xA100", f"run #{second.pk} · 8xA100"} <= names
    assert page.js_errors == []
    screenshot(page, "compare-runs")
