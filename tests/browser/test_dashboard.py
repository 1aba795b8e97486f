"""The dashboard in a real browser (Debian Chromium via Playwright), against a live server
and a real Celery worker process: sign in, build the GLITCHES comparison from the example,
run it, watch the progress bar reach 100 %, see the comparison charts, download the CSV;
an invalid scenario shows field errors and stores nothing; a quoted device price is saved
and shown again; another user gets a 404.
Screenshots of the main pages go to ``.artifacts/screenshots/``.
"""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Any

import pytest

from simulations.runs.models import SimulationRun
from simulations.scenarios.models import Scenario
from tests.browser.conftest import make_user, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: Charts the comparison section draws from the result document.
COMPARISON_CHARTS = ("efficiency", "latency-cdf", "latency-percentiles", "utilisation", "energy")


def plotted(page: Any, element_id: str) -> list[dict[str, Any]]:
    """Traces Plotly holds for the element (``[]`` if it was not drawn)."""
    return page.evaluate(
        """id => {
            const el = document.getElementById(id);
            if (!el || !el.classList.contains('js-plotly-plot') || !el.data) return [];
            return el.data.map(t => ({name: t.name || '', n: (t.y || t.x || []).length,
                                      y: Array.from(t.y || []).slice(0, 50)}));
        }""",
        element_id,
    )


def test_a_planner_builds_runs_and_compares_the_glitches_example(
    live_server: Any, live_worker: Any, seeded_live: Any, browser_page: Any
) -> None:
    page = browser_page
    base = live_server.url
    make_user("alice")
    sign_in(page, base, "alice")
    assert page.locator("#example-glitches-vs-8xa100 h3").inner_text() == (
        "1×A100 + 7×U280 vs 8×A100"
    )
    screenshot(page, "01-dashboard")

    page.click("#example-glitches-vs-8xa100 >> text=Open in builder")
    page.wait_for_selector("#builder")
    assert page.input_value("input[name=sys-0-name]") == "1xA100+7xU280"
    assert page.input_value("input[name=sys-0-dev-1-count]") == "7"
    # the policy's options come from the registry schema: GLITCHES' are shown, others hidden
    assert page.is_visible('.policy-options[data-system="0"][data-policy="glitches"]')
    assert page.is_hidden('.policy-options[data-system="0"][data-policy="homogeneous"]')
    screenshot(page, "02-scenario-builder")

    page.click("#save-and-run")
    page.wait_for_url(f"{base}/runs/*/")
    run = SimulationRun.objects.get()
    assert run.owner.username == "alice"

    # follow the progress bar until it reaches 100 % (the page polls the status endpoint)
    seen: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        value = page.get_attribute("#run-progress", "aria-valuenow")
        if value is not None and (not seen or seen[-1] != value):
            seen.append(value)
        if value == "100" and page.locator("#comparison").count():
            break
        page.wait_for_timeout(100)
    assert seen and seen[-1] == "100", f"progress values seen: {seen}"
    assert all(0 <= int(v) <= 100 for v in seen)
    assert [int(v) for v in seen] == sorted(int(v) for v in seen)
    assert page.inner_text("#run-status-badge") == "Succeeded"
    assert SimulationRun.objects.get().status == "succeeded"

    # the comparison charts are Plotly figures holding the data
    for chart_id in COMPARISON_CHARTS:
        page.wait_for_function(
            "id => document.getElementById(id)?.classList.contains('js-plotly-plot')", arg=chart_id
        )
        traces = plotted(page, chart_id)
        assert traces and all(t["n"] > 0 for t in traces), chart_id
    efficiency = plotted(page, "efficiency")
    assert [t["y"][0] for t in efficiency] == [1, 1, 1]  # normalised to the baseline
    result = SimulationRun.objects.get().result["systems"]
    ratio = result[1]["throughput_tok_s"] / result[0]["throughput_tok_s"]
    assert efficiency[0]["y"][1] == pytest.approx(ratio)
    assert {t["name"] for t in plotted(page, "timeline")} >= {"prefill", "decode", "transfer"}
    page.wait_for_selector("#roofline-plot.js-plotly-plot")
    assert any(t["name"].endswith("operating points") for t in plotted(page, "roofline-plot"))
    assert page.evaluate("window.Plotly.version").startswith("")
    assert not page.js_errors, page.js_errors
    screenshot(page, "03-run-comparison")

    with page.expect_download() as download_info:
        page.click("#export-csv")
    download = download_info.value
    assert download.suggested_filename.endswith("-result.csv")
    text = Path(download.path()).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text.split("\n\n")[0])))
    assert [r["system"] for r in rows] == ["1xA100+7xU280", "8xA100"]
    assert float(rows[0]["throughput_tok_s"]) == pytest.approx(result[0]["throughput_tok_s"])


def open_example_builder(page: Any, base: str) -> Any:
    """Alice, signed in, at the builder holding the GLITCHES example."""
    make_user("alice")
    sign_in(page, base, "alice")
    page.goto(f"{base}/scenarios/new/?example=glitches-vs-8xa100")
    return page


def test_an_invalid_scenario_shows_field_errors_and_stores_nothing(
    live_server: Any, seeded_live: Any, browser_page: Any
) -> None:
    page = open_example_builder(browser_page, live_server.url)
    page.fill("input[name=sys-0-dev-1-count]", "0")
    page.fill("input[name=wl-requests]", "-5")
    page.fill("#f-sys-0-opt-glitches-prefetch_ratio", "1000")
    page.fill("input[name=sys-1-name]", "")
    # the role choices follow the chosen policy (from the registry's schema)
    page.select_option("#f-sys-1-policy", "glitches")
    roles = page.eval_on_selector_all(
        "#system-1 [data-role-select] option", "els => els.map(e => e.value)"
    )
    assert roles == ["prefill", "decode"]
    assert page.is_visible('.policy-options[data-system="1"][data-policy="glitches"]')
    page.select_option("#f-sys-1-policy", "homogeneous")
    page.click("#save-and-run")
    page.wait_for_selector("#builder-errors")
    assert "nothing was saved" in page.inner_text("#builder-errors")
    count_cell = page.locator("#system-0-device-1 td").nth(1)
    assert "must be at least 1" in count_cell.inner_text()
    assert "must be at least 1" in page.inner_text("#f-wl-requests-errors")
    option = page.locator('.policy-options[data-policy="glitches"][data-system="0"]')
    assert "must be at most 64" in option.inner_text()
    assert "must not be empty" in page.locator("#system-1").inner_text()
    # what the user typed is still there to correct
    assert page.input_value("input[name=sys-0-dev-1-count]") == "0"
    screenshot(page, "04-builder-field-errors")
    assert Scenario.objects.count() == 0
    assert SimulationRun.objects.count() == 0


def test_a_quoted_price_is_typed_saved_and_shown_again_in_the_builder(
    live_server: Any, seeded_live: Any, browser_page: Any
) -> None:
    base = live_server.url
    page = open_example_builder(browser_page, base)
    price = "input[name=sys-0-dev-1-price_usd]"
    # empty: the row's catalog price, which the hint follows as the device changes
    assert page.input_value(price) == ""
    assert page.get_attribute(price, "placeholder") == "catalog: 8000"
    page.select_option("select[name=sys-0-dev-1-device]", "a10g")
    assert page.get_attribute(price, "placeholder") == "no catalog price"
    page.select_option("select[name=sys-0-dev-1-device]", "u280")
    page.fill(price, "6500")
    page.click("button[name=action][value=save]")
    page.wait_for_url(f"{base}/scenarios/*/")
    scenario = Scenario.objects.get()
    devices = scenario.document["systems"][0]["devices"]
    assert devices[1]["price_usd"] == 6500
    assert "price_usd" not in devices[0]
    page.goto(f"{base}/scenarios/{scenario.pk}/edit/")
    assert page.input_value(price) == "6500"
    assert page.input_value("input[name=sys-0-dev-0-price_usd]") == ""
    assert not page.js_errors, page.js_errors


def test_another_user_cannot_open_the_first_users_run(
    live_server: Any, seeded_live: Any, browser_page: Any
) -> None:
    from simulations.runs import services as run_services
    from simulations.scenarios import services as scenario_services
    from tests.frontend.conftest import glitches_document

    alice = make_user("alice")
    make_user("bob")
    scenario = scenario_services.scenario_create(owner=alice, document=glitches_document(10))
    run = run_services.simulation_run_create(scenario=scenario, owner=alice)
    page = browser_page
    base = live_server.url
    sign_in(page, base, "bob")
    for path in (f"/runs/{run.pk}/", f"/runs/{run.pk}/result.csv", f"/scenarios/{scenario.pk}/"):
        response = page.goto(f"{base}{path}")
        assert response is not None and response.status == 404, path
    assert "Run " not in page.inner_text("body")
    # the catalog pages bob can see, for the reviewer
    page.goto(f"{base}/catalog/devices/u280/")
    page.wait_for_selector("#roofline.js-plotly-plot")
    screenshot(page, "05-device-u280")
    page.goto(f"{base}/catalog/models/llama2-7b/")
    screenshot(page, "06-model-llama2-7b")
    page.goto(f"{base}/workloads/new/")
    screenshot(page, "07-workload-editor")
    from frontend.validation import compute

    compute("heterollm")
    page.goto(f"{base}/validation/")
    page.wait_for_selector("#validation-heterollm.js-plotly-plot")
    assert page.locator("#paper-heterollm tr.check").count() > 0
    screenshot(page, "08-validation")
