"""Runs over the API: submit (202), status and progress, cancel, result as JSON and CSV,
throttling (429 + Retry-After) and the per-user quota of active runs."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.adapters import catalog_from_db
from simulations.choices import RunStatus
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.runs import services
from simulations.runs.models import SimulationRun
from simulations.scenarios.models import Scenario
from tests.api.in_process import execute_in_process
from tests.factories import ScenarioFactory, SimulationRunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario_id(alice: APIClient, catalog: Any, document: dict) -> int:
    return alice.post("/api/scenarios/", {"document": document}, format="json").json()["id"]


def test_submitting_a_run_answers_202_with_the_queued_run(
    alice: APIClient, scenario_id: int
) -> None:
    response = alice.post("/api/runs/", {"scenario": scenario_id}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["progress"] == 0 and body["attempts"] == 0
    assert response["Location"].endswith(f"/api/runs/{body['id']}/")
    detail = alice.get(f"/api/runs/{body['id']}/").json()
    assert detail["document"]["name"] == "A100 vs H100, small"
    assert [e["kind"] for e in detail["events"]] == ["created"]


def test_status_progress_and_result_as_json_and_csv(alice: APIClient, scenario_id: int) -> None:
    run_id = alice.post("/api/runs/", {"scenario": scenario_id}, format="json").json()["id"]
    pending = alice.get(f"/api/runs/{run_id}/result/")
    assert pending.status_code == 409
    assert "queued" in pending.json()["detail"]

    claim = services.run_claim(run_id, worker="test:0")
    assert claim is not None
    services.run_mark_progress(run_id, claim.attempt, 40)
    running = alice.get(f"/api/runs/{run_id}/").json()
    assert (running["status"], running["progress"], running["attempts"]) == ("running", 40, 1)
    result = simulate(parse_scenario(claim.document, catalog_from_db()))
    services.run_mark_succeeded(run_id, claim.attempt, result)

    done = alice.get(f"/api/runs/{run_id}/").json()
    assert done["status"] == "succeeded" and done["progress"] == 100
    as_json = alice.get(f"/api/runs/{run_id}/result/")
    assert as_json.status_code == 200
    systems = as_json.json()["result"]["systems"]
    assert [s["name"] for s in systems] == ["1xA100", "1xH100"]
    assert systems == SimulationRun.objects.get(pk=run_id).result["systems"]

    as_csv = alice.get(f"/api/runs/{run_id}/result/?format=csv")
    assert as_csv.status_code == 200
    assert as_csv["Content-Type"].startswith("text/csv")
    assert "attachment" in as_csv["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(as_csv.content.decode())))
    assert [r["system"] for r in rows] == ["1xA100", "1xH100"]
    for row, system in zip(rows, systems, strict=True):
        assert float(row["throughput_tok_s"]) == pytest.approx(system["throughput_tok_s"])
        assert float(row["ttft_ms_p90"]) == pytest.approx(system["ttft_ms"]["p90"])
        assert float(row["cost_efficiency_tok_s_per_usd"]) == pytest.approx(
            system["cost_efficiency_tok_s_per_usd"]
        )


def test_cancel_moves_an_active_run_to_cancelled_and_leaves_final_runs_alone(
    alice: APIClient, scenario_id: int
) -> None:
    run_id = alice.post("/api/runs/", {"scenario": scenario_id}, format="json").json()["id"]
    cancelled = alice.post(f"/api/runs/{run_id}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    again = alice.post(f"/api/runs/{run_id}/cancel/")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    assert alice.get(f"/api/runs/{run_id}/result/").status_code == 409


def test_a_bad_submission_stores_nothing(alice: APIClient, scenario_id: int) -> None:
    for body in ({}, {"scenario": "x"}, {"scenario": None}, {"scenario": 10**12}, [1, 2]):
        response = alice.post("/api/runs/", body, format="json")
        assert response.status_code == 400, body
    assert not SimulationRun.objects.exists()
    # A scenario whose document no longer validates (catalog changed) is refused, with paths.
    stale = Scenario.objects.get(pk=scenario_id)
    stale.document["systems"][0]["devices"][0]["device"] = "retired-gpu"
    stale.save()
    refused = alice.post("/api/runs/", {"scenario": scenario_id}, format="json")
    assert refused.status_code == 400
    assert (
        "unknown device 'retired-gpu'"
        in refused.json()["document"]["systems[0].devices[0].device"][0]
    )
    assert not SimulationRun.objects.exists()


def test_run_submissions_are_throttled_per_user_with_retry_after(
    alice: APIClient, bob: APIClient, scenario_id: int, settings: Any
) -> None:
    settings.HETPLANNER_MAX_ACTIVE_RUNS_PER_USER = 1000
    for _ in range(30):
        assert alice.post("/api/runs/", {"scenario": scenario_id}, format="json").status_code == 202
    throttled = alice.post("/api/runs/", {"scenario": scenario_id}, format="json")
    assert throttled.status_code == 429
    assert 0 < int(throttled["Retry-After"]) <= 60
    assert SimulationRun.objects.count() == 30
    # Reads are not submission-throttled, and the limit is per user.
    assert alice.get("/api/runs/").status_code == 200
    Scenario.objects.filter(pk=scenario_id).update(shared=True)
    assert bob.post("/api/runs/", {"scenario": scenario_id}, format="json").status_code == 202


def test_the_quota_of_active_runs_per_user_is_enforced(
    alice: APIClient, scenario_id: int, settings: Any
) -> None:
    settings.HETPLANNER_MAX_ACTIVE_RUNS_PER_USER = 2
    ids = [
        alice.post("/api/runs/", {"scenario": scenario_id}, format="json").json()["id"]
        for _ in range(2)
    ]
    over = alice.post("/api/runs/", {"scenario": scenario_id}, format="json")
    assert over.status_code == 429
    assert "active runs per user" in over.json()["detail"]
    assert SimulationRun.objects.count() == 2
    # A finished run frees its slot.
    execute_in_process(ids[0])
    assert alice.post("/api/runs/", {"scenario": scenario_id}, format="json").status_code == 202


def test_runs_list_filters_orders_and_pages_at_most_100(user: Any, alice: APIClient) -> None:
    scenario = ScenarioFactory(owner=user)
    SimulationRunFactory.create_batch(105, scenario=scenario)
    SimulationRunFactory(
        scenario=scenario, status=RunStatus.CANCELLED, finished_at="2026-01-01T00:00:00Z"
    )
    too_big = alice.get("/api/runs/?page_size=1000")
    assert too_big.status_code == 400 and "page_size" in too_big.json()
    page = alice.get("/api/runs/?page_size=100").json()
    assert page["count"] == 106 and len(page["results"]) == 100 and page["next"]
    assert len(alice.get(page["next"]).json()["results"]) == 6
    for bad in ("page=0", "page=x", "page_size=0", "page_size=2&page_size=3", "ordering=owner"):
        assert alice.get(f"/api/runs/?{bad}").status_code == 400, bad
    cancelled = alice.get("/api/runs/?status=cancelled").json()
    assert [r["status"] for r in cancelled["results"]] == ["cancelled"]
    assert alice.get("/api/runs/?status=bogus").status_code == 400
    ordered = alice.get("/api/runs/?ordering=created_at&page_size=3").json()["results"]
    assert [r["id"] for r in ordered] == sorted(r["id"] for r in ordered)
