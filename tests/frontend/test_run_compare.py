"""Comparing saved runs: the run list's headline metrics and checkboxes,
and one comparison page for the selected runs, visible only to whoever may see each run."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from frontend.templatetags.frontend_tags import num
from simulations.runs.models import SimulationRun
from tests.frontend.conftest import glitches_document, store_succeeded_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_run(seeded: Any, user: Any) -> SimulationRun:
    """alice's second succeeded GLITCHES run, with fewer requests."""
    doc = glitches_document(requests=20)
    doc["name"] = "GLITCHES smaller"
    return store_succeeded_run(user, doc)


def test_the_run_list_shows_headline_metrics_and_a_checkbox_per_succeeded_run(
    alice_client: Any, glitches_run: SimulationRun, queued_run: SimulationRun
) -> None:
    page = alice_client.get("/runs/").content.decode()
    systems = glitches_run.result["systems"]
    best = max(systems, key=lambda s: s["throughput_tok_s"])
    row = re.search(rf'<tr id="run-{glitches_run.pk}">(.*?)</tr>', page, re.S)
    assert row is not None
    cells = row.group(1)
    assert f'name="ids" value="{glitches_run.pk}"' in cells
    assert num(best["throughput_tok_s"]) in cells
    assert num(best["ttft_ms"]["p90"]) in cells
    assert num(best["tpot_ms"]["p90"]) in cells
    assert html.escape(best["name"]) in cells
    queued = re.search(rf'<tr id="run-{queued_run.pk}">(.*?)</tr>', page, re.S)
    assert queued is not None
    assert 'name="ids"' not in queued.group(1)  # only succeeded runs can be compared
    assert 'action="/runs/compare/"' in page


def test_the_comparison_page_shows_the_systems_of_every_selected_run(
    alice_client: Any, glitches_run: SimulationRun, second_run: SimulationRun
) -> None:
    response = alice_client.get(f"/runs/compare/?ids={glitches_run.pk},{second_run.pk}")
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    for run in (glitches_run, second_run):
        for s in run.result["systems"]:
            assert f"run #{run.pk} · {s['name']}" in page
    summary = re.search(r'<table id="summary".*?</table>', page, re.S)
    assert summary is not None
    assert num(second_run.result["systems"][1]["throughput_tok_s"]) in summary.group(0)


def test_the_checkbox_form_query_compares_the_same_runs(
    alice_client: Any, glitches_run: SimulationRun, second_run: SimulationRun
) -> None:
    response = alice_client.get(f"/runs/compare/?ids={glitches_run.pk}&ids={second_run.pk}")
    assert response.status_code == 200
    assert f"run #{second_run.pk} · 8xA100" in html.unescape(response.content.decode())


def test_the_comparison_charts_label_each_system_with_its_run(
    alice_client: Any, glitches_run: SimulationRun, second_run: SimulationRun
) -> None:
    page = alice_client.get(f"/runs/compare/?ids={glitches_run.pk},{second_run.pk}")
    src = re.search(r'data-charts-src="([^"]+)"', page.content.decode())
    assert src is not None
    charts = alice_client.get(html.unescape(src.group(1))).json()["charts"]
    names = {t["name"] for t in charts["latency-cdf"]["data"]}
    assert any(n.startswith(f"run #{second_run.pk} · ") for n in names)
    assert any(n.startswith(f"run #{glitches_run.pk} · ") for n in names)


def test_another_users_private_run_is_a_404_and_nothing_of_it_is_rendered(
    client: Any,
    other_user: Any,
    glitches_run: SimulationRun,
    second_run: SimulationRun,
    seeded: Any,
) -> None:
    doc = glitches_document(requests=20)
    doc["name"] = "Bob's secret plan"
    bobs = store_succeeded_run(other_user, doc)
    client.force_login(glitches_run.owner)
    # alice's own two runs compare; swapping one for bob's run answers as if it did not exist
    assert client.get(f"/runs/compare/?ids={glitches_run.pk},{second_run.pk}").status_code == 200
    client.force_login(other_user)
    assert client.get(f"/runs/compare/?ids={bobs.pk},{second_run.pk}").status_code == 404
    client.force_login(glitches_run.owner)
    response = client.get(f"/runs/compare/?ids={glitches_run.pk},{bobs.pk}")
    assert response.status_code == 404
    assert b"secret" not in response.content
    charts = client.get(f"/runs/compare/charts.json?ids={glitches_run.pk},{bobs.pk}")
    assert charts.status_code == 404


def test_a_run_that_has_not_succeeded_is_left_out_with_a_message(
    alice_client: Any,
    glitches_run: SimulationRun,
    second_run: SimulationRun,
    queued_run: SimulationRun,
) -> None:
    response = alice_client.get(
        f"/runs/compare/?ids={glitches_run.pk},{second_run.pk},{queued_run.pk}"
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert f"Run {queued_run.pk} is left out" in page
    assert f"run #{queued_run.pk} ·" not in html.unescape(page)


@pytest.mark.parametrize(
    "query",
    ["ids=", "ids=abc", "ids=1", "ids=1,1", "ids=" + ",".join(str(i) for i in range(1, 10))],
)
def test_bad_ids_are_a_400_naming_the_field(
    alice_client: Any, glitches_run: SimulationRun, query: str
) -> None:
    response = alice_client.get(f"/runs/compare/?{query}")
    assert response.status_code == 400
    assert b"ids" in response.content


def test_the_comparison_needs_a_signed_in_user(client: Any, glitches_run: SimulationRun) -> None:
    response = client.get(f"/runs/compare/?ids={glitches_run.pk},{glitches_run.pk + 1}")
    assert response.status_code == 302


def test_the_comparison_reads_the_results_once_per_set_of_result_versions(
    alice_client: Any, glitches_run: SimulationRun, second_run: SimulationRun
) -> None:
    from datetime import timedelta
    from unittest import mock

    from django.core.cache import cache

    from simulations.runs import selectors as run_selectors

    cache.clear()
    ids = f"{glitches_run.pk},{second_run.pk}"
    with mock.patch.object(run_selectors, "run_results", wraps=run_selectors.run_results) as read:
        for path in (f"/runs/compare/?ids={ids}", f"/runs/compare/charts.json?ids={ids}"):
            first = alice_client.get(path)
            second = alice_client.get(path)
            assert first.status_code == second.status_code == 200
        assert read.call_count == 2  # once for the page, once for its charts
        # a new result of one run (a later attempt) is a new version: read again
        SimulationRun.objects.filter(pk=second_run.pk).update(
            finished_at=second_run.finished_at + timedelta(seconds=1)
        )
        assert alice_client.get(f"/runs/compare/?ids={ids}").status_code == 200
        assert read.call_count == 3


def test_a_comparison_of_shared_scenarios_runs_is_a_link_other_signed_in_users_open(
    client: Any,
    other_user: Any,
    glitches_run: SimulationRun,
    second_run: SimulationRun,
    seeded: Any,
) -> None:
    from simulations.scenarios import services as scenario_services

    link = f"/runs/compare/?ids={glitches_run.pk},{second_run.pk}"
    client.force_login(other_user)
    assert client.get(link).status_code == 404  # private until shared
    for run in (glitches_run, second_run):
        scenario_services.scenario_update(scenario=run.scenario, shared=True)
    shown = client.get(link)
    assert shown.status_code == 200
    assert "GLITCHES smaller" in shown.content.decode()
