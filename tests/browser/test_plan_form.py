"""The plan form in a real browser (Debian Chromium via Playwright): a planner fills in the
model, workload, targets, device types and budget, submits, and lands on the queued plan;
a missing range end is shown beside its field and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import make_user, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_planner_fills_in_the_plan_form_and_lands_on_the_queued_plan(
    live_server: Any, seeded_live: Any, browser_page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simulations.plans import services as plan_services
    from simulations.plans.models import Plan

    # no worker in this test: the plan stays queued (the worker path has its own tests)
    monkeypatch.setattr(plan_services, "_enqueue_stage", lambda *args: None)
    make_user("alice")
    page = browser_page
    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(f"{base}/plans/")
    page.fill("#id_name", "browser plan")
    page.select_option("#id_model", "llama2-7b")
    page.select_option("#id_lengths", "uniform")
    page.fill("#id_in_low", "64")
    page.fill("#id_rate_per_s", "2")
    page.fill("#id_tpot_p90_ms", "40")
    page.fill("#id_max_capex_usd", "120000")
    page.check('input[name="devices"][value="h100-sxm"]')
    # the upper end of the prompt range is missing: refused beside the field
    page.fill("#id_in_high", "")
    page.fill("#id_out_low", "8")
    page.fill("#id_out_high", "200")
    page.click("#plan-form button[type=submit]")
    page.wait_for_selector("#plan-form .errorlist")
    assert "give both ends of the range" in page.inner_text("#plan-form")
    assert not Plan.objects.exists()
    page.fill("#id_in_high", "1024")
    page.click("#plan-form button[type=submit]")
    page.wait_for_url(f"{base}/plans/*/")
    plan = Plan.objects.get()
    assert plan.document["constraints"]["max_capex_usd"] == 120000
    assert {d["device"] for d in plan.document["space"]["devices"]} == {
        "a100-80gb",
        "u280",
        "h100-sxm",
    }
    assert plan.document["targets"]["tpot_p90_ms"] == 40
    assert "Queued" in page.inner_text("#run-status-badge")
    assert page.js_errors == []
    screenshot(page, "plan-form")
