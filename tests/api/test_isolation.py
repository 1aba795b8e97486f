"""Two users, every endpoint and method: no cross-user leaks.

Alice owns a private scenario, workload, run, sweep, capacity plan and API token, and a
shared scenario and workload. Bob must get 404 (never 403, which would confirm they exist) for every
private object on every method and action, must not see them in any list, may read (not
change) the shared ones, and nothing of Alice's changes whatever he sends.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rest_framework.test import APIClient

from api.models import ApiToken
from simulations.plans.models import Plan
from simulations.runs.models import SimulationRun
from simulations.scenarios.models import Scenario, Workload
from simulations.sweeps.models import Sweep
from tests.core.planner.helpers import small_doc

pytestmark = pytest.mark.django_db

WRITE_BODY = {"document": {"name": "hijacked"}, "shared": True, "name": "hijacked"}


@pytest.fixture
def alices_rows(alice: APIClient, catalog: Any, document: dict) -> dict[str, Any]:
    """Alice's private and shared rows, created through the API."""
    private = alice.post("/api/scenarios/", {"document": document}, format="json").json()
    shared_doc = copy.deepcopy(document)
    shared_doc["name"] = "shared with everyone"
    shared = alice.post(
        "/api/scenarios/", {"document": shared_doc, "shared": True}, format="json"
    ).json()
    workload = {
        "name": "w",
        "requests": 10,
        "input_tokens": 128,
        "output_tokens": 16,
        "arrival_kind": "closed",
    }
    wl_private = alice.post("/api/workloads/", workload, format="json").json()
    wl_shared = alice.post(
        "/api/workloads/", {**workload, "name": "w2", "shared": True}, format="json"
    ).json()
    run = alice.post("/api/runs/", {"scenario": private["id"]}, format="json").json()
    sweep = alice.post(
        "/api/sweeps/",
        {
            "name": "private sweep",
            "template": document,
            "axes": [{"path": "systems[0].devices[0].count", "values": [1, 2]}],
        },
        format="json",
    ).json()
    plan = alice.post("/api/plans/", {"document": small_doc()}, format="json").json()
    token = alice.post("/api/auth/tokens/", {"name": "alice ci"}, format="json").json()
    return {
        "scenario": private["id"],
        "shared_scenario": shared["id"],
        "workload": wl_private["id"],
        "shared_workload": wl_shared["id"],
        "run": run["id"],
        "sweep": sweep["id"],
        "plan": plan["id"],
        "token": token["id"],
    }


def private_urls(rows: dict[str, Any]) -> list[str]:
    return [
        f"/api/scenarios/{rows['scenario']}/",
        f"/api/workloads/{rows['workload']}/",
        f"/api/runs/{rows['run']}/",
        f"/api/runs/{rows['run']}/cancel/",
        f"/api/runs/{rows['run']}/result/",
        f"/api/runs/{rows['run']}/result/?format=csv",
        f"/api/sweeps/{rows['sweep']}/",
        f"/api/sweeps/{rows['sweep']}/cancel/",
        f"/api/sweeps/{rows['sweep']}/results/",
        f"/api/sweeps/{rows['sweep']}/results/?format=csv",
        f"/api/plans/{rows['plan']}/",
        f"/api/plans/{rows['plan']}/cancel/",
        f"/api/plans/{rows['plan']}/results/",
        f"/api/plans/{rows['plan']}/results/?format=csv",
        f"/api/plans/{rows['plan']}/pareto/",
        f"/api/auth/tokens/{rows['token']}/",
    ]


def snapshot() -> list[Any]:
    return [
        list(Scenario.objects.order_by("id").values("id", "name", "shared", "document")),
        list(Workload.objects.order_by("id").values("id", "name", "shared")),
        list(SimulationRun.objects.order_by("id").values("id", "status")),
        list(Sweep.objects.order_by("id").values("id", "status")),
        list(Plan.objects.order_by("id").values("id", "status", "name", "document")),
        list(ApiToken.objects.order_by("id").values("id", "name")),
    ]


def test_another_user_gets_404_for_every_private_object_and_method(
    alices_rows: dict[str, Any], bob: APIClient, alice: APIClient
) -> None:
    before = snapshot()
    for url in private_urls(alices_rows):
        for method in ("get", "post", "put", "patch", "delete"):
            response = getattr(bob, method)(url, WRITE_BODY, format="json")
            # 405 only where the method does not exist for anyone, the owner included (so it
            # reveals nothing); otherwise 404.
            assert response.status_code in (404, 405), (method, url, response.status_code)
            if response.status_code == 405:
                assert getattr(alice, method)(url, {}, format="json").status_code == 405
    assert snapshot() == before


def test_lists_never_show_another_users_private_rows(
    alices_rows: dict[str, Any], bob: APIClient
) -> None:
    ids = {
        "scenarios": {r["id"] for r in bob.get("/api/scenarios/").json()["results"]},
        "workloads": {r["id"] for r in bob.get("/api/workloads/").json()["results"]},
        "runs": {r["id"] for r in bob.get("/api/runs/").json()["results"]},
        "sweeps": {r["id"] for r in bob.get("/api/sweeps/").json()["results"]},
        "plans": {r["id"] for r in bob.get("/api/plans/").json()["results"]},
        "tokens": {r["id"] for r in bob.get("/api/auth/tokens/").json()["results"]},
    }
    assert ids == {
        "scenarios": {alices_rows["shared_scenario"]},
        "workloads": {alices_rows["shared_workload"]},
        "runs": set(),
        "sweeps": set(),
        "plans": set(),
        "tokens": set(),
    }
    for query in ("?mine=false", "?shared=false", "?name=A100"):
        found = {r["id"] for r in bob.get(f"/api/scenarios/{query}").json()["results"]}
        assert alices_rows["scenario"] not in found


def test_shared_rows_are_read_only_for_others(alices_rows: dict[str, Any], bob: APIClient) -> None:
    before = snapshot()
    for url in (
        f"/api/scenarios/{alices_rows['shared_scenario']}/",
        f"/api/workloads/{alices_rows['shared_workload']}/",
    ):
        assert bob.get(url).status_code == 200
        for method in ("put", "patch", "delete"):
            assert getattr(bob, method)(url, WRITE_BODY, format="json").status_code == 403
    assert snapshot() == before
    shared = bob.get(f"/api/scenarios/{alices_rows['shared_scenario']}/").json()
    assert shared["is_owner"] is False and shared["owner"] == "alice"


def test_runs_start_only_from_visible_scenarios_and_belong_to_the_caller(
    alices_rows: dict[str, Any], bob: APIClient, alice: APIClient
) -> None:
    private = bob.post("/api/runs/", {"scenario": alices_rows["scenario"]}, format="json")
    missing = bob.post("/api/runs/", {"scenario": 999_999}, format="json")
    assert private.status_code == missing.status_code == 400
    # Same message for another user's private scenario and a nonexistent one.
    assert private.json()["scenario"][0].replace(
        str(alices_rows["scenario"]), "N"
    ) == missing.json()["scenario"][0].replace("999999", "N")
    ran = bob.post("/api/runs/", {"scenario": alices_rows["shared_scenario"]}, format="json")
    assert ran.status_code == 202
    assert SimulationRun.objects.get(pk=ran.json()["id"]).owner.username == "bob"
    assert alice.get(f"/api/runs/{ran.json()['id']}/").status_code == 404


def test_another_users_token_cannot_be_revoked(alices_rows: dict[str, Any], bob: APIClient) -> None:
    assert bob.delete(f"/api/auth/tokens/{alices_rows['token']}/").status_code == 404
    assert ApiToken.objects.filter(pk=alices_rows["token"]).exists()
