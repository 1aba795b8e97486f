"""The run page of the GLITCHES example in a real browser (Debian Chromium via Playwright):
from navigation to every comparison chart drawn, under 1.5 s on this machine.

The run is the shipped example ``examples/glitches-vs-8xa100.json`` simulated in this process
and stored through the services (its real result document). What is timed is what a planner
waits for: ``page.goto`` of the run page, then until each comparison chart's element has been
drawn by Plotly (the chart data are loaded lazily after the page). A first visit warms the
server's per-result-version caches, as on any running server; each round then uses a fresh
browser page. Skipped when Playwright or Chromium is missing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "glitches-vs-8xa100.json"
TARGET_S = 1.5
PASSWORD = "correct horse battery staple"


def test_bench_glitches_run_page_in_chromium(
    benchmark: Any, live_server: Any, tmp_path: Path
) -> None:
    from tests.browser.conftest import CHROMIUM_ARGS, _chromium
    from tests.browser.test_dashboard import COMPARISON_CHARTS
    from tests.factories import UserFactory
    from tests.frontend.conftest import store_succeeded_run

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed")
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium (apt-get install chromium)")
    from simulations.catalog.services import catalog_seed

    catalog_seed()
    user = UserFactory(username="bench")
    run = store_succeeded_run(user, json.loads(EXAMPLE.read_text()))
    url = f"{live_server.url}/runs/{run.pk}/"
    drawn = " && ".join(
        f"document.getElementById('{c}')?.classList.contains('js-plotly-plot')"
        for c in COMPARISON_CHARTS
    )
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1360, "height": 900},
        )
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "bench")
        page.fill("input[name=password]", PASSWORD)
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        page.goto(url)
        page.wait_for_function(f"() => {drawn}", timeout=60_000)  # warm the server caches

        def load() -> float:
            fresh = context.new_page()
            t0 = time.perf_counter()
            fresh.goto(url)
            fresh.wait_for_function(f"() => {drawn}", timeout=60_000)
            elapsed = time.perf_counter() - t0
            fresh.close()
            return elapsed

        benchmark.pedantic(load, rounds=5, iterations=1)
        context.close()
    benchmark.extra_info.update(
        name="browser: GLITCHES example run page, navigation to every chart drawn",
        unit="s",
        target=TARGET_S,
    )
