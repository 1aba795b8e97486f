"""Capacity plans over the API: submit (202; errors keyed by JSON path with nothing stored;
the per-user quota), private to the owner (404 for anyone else), cancel, the confirmed
configurations as JSON and CSV (partial while the search runs), the Pareto points, and the
recommendation and report of a finished plan."""

from __future__ import annotations

import csv
import io
from functools import cache
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from simulations.choices import RunStatus
from simulations.plans.models import Plan, PlanResult
from tests.core.planner.helpers import small_doc

pytestmark = pytest.mark.django_db


@cache
def searched() -> dict[str, Any]:
    """The small plan searched in-process (the report a finished job stores)."""
    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan, plan_search

    return plan_search(parse_plan(small_doc(), builtin_catalog()))


def submit(client: APIClient, document: dict[str, Any] | None = None) -> Any:
    return client.post("/api/plans/", {"document": document or small_doc()}, format="json")


def record(plan_id: int, evaluated: list[dict[str, Any]]) -> None:
    """Store the engine's verdicts as the chunk tasks would (one row per configuration)."""
    for e in evaluated:
        PlanResult.objects.create(
            plan_id=plan_id,
            key=e["key"],
            round=1,
            feasible=e["feasible"],
            capex_usd=e["capex_usd"],
            evaluation={
                "key": e["key"],
                "feasible": e["feasible"],
                "metrics": e["metrics"],
                "misses": [e["why"]] if e.get("why") else [],
                "error": "",
                "seconds": 0.0,
                "unknown": False,
            },
        )


def finish(plan_id: int) -> dict[str, Any]:
    result = searched()
    record(plan_id, result["evaluated"])
    Plan.objects.filter(pk=plan_id).update(
        status=RunStatus.SUCCEEDED, result=result, progress=100, finished_at=timezone.now()
    )
    return result


def test_a_plan_is_validated_stored_and_answers_202(
    alice: APIClient, catalog: Any, user: Any
) -> None:
    response = submit(alice)
    assert response.status_code == 202, response.json()
    body = response.json()
    assert (body["name"], body["status"], body["stage"], body["progress"]) == (
        "small",
        "queued",
        "screen",
        0,
    )
    assert response["Location"].endswith(f"/api/plans/{body['id']}/")
    plan = Plan.objects.get()
    assert plan.pk == body["id"] and plan.owner == user and plan.document == small_doc()
    detail = alice.get(f"/api/plans/{plan.pk}/").json()
    assert detail["document"] == small_doc()
    assert detail["recommendation"] is None and detail["report"] is None


def test_a_bad_plan_is_refused_by_json_path_and_stores_nothing(
    alice: APIClient, catalog: Any
) -> None:
    doc = small_doc()
    doc["space"]["devices"][0]["device"] = "no-such-gpu"
    doc["targets"]["ttft_p90_ms"] = -1
    response = submit(alice, doc)
    assert response.status_code == 400
    errors = response.json()["document"]
    assert "no-such-gpu" in " ".join(errors["space.devices[0].device"])
    assert "targets.ttft_p90_ms" in errors
    for bad in ([1, 2], "plan", None):
        refused = alice.post("/api/plans/", {"document": bad}, format="json")
        assert refused.status_code == 400 and "document" in refused.json()
    assert alice.post("/api/plans/", {}, format="json").status_code == 400
    assert not Plan.objects.exists()


def test_a_quoted_device_price_is_accepted_and_a_bad_or_missing_one_named_by_path(
    alice: APIClient, catalog: Any
) -> None:
    doc = small_doc()
    doc["space"]["devices"][1] = {"device": "t4", "max_count": 2, "price_usd": 2500}
    accepted = submit(alice, doc)
    assert accepted.status_code == 202, accepted.json()
    assert Plan.objects.get().document["space"]["devices"][1]["price_usd"] == 2500
    for price, words in (("lots", "number"), (-1, "positive"), (None, "required")):
        doc["space"]["devices"][1]["price_usd"] = price
        refused = submit(alice, doc)
        assert refused.status_code == 400
        assert words in " ".join(refused.json()["document"]["space.devices[1].price_usd"])
    assert Plan.objects.count() == 1


def test_the_quota_of_active_plans_per_user(alice: APIClient, catalog: Any, settings: Any) -> None:
    settings.HETPLANNER_MAX_ACTIVE_PLANS_PER_USER = 1
    assert submit(alice).status_code == 202
    over = submit(alice)
    assert over.status_code == 429 and "active plans per user" in over.json()["detail"]
    assert Plan.objects.count() == 1
    Plan.objects.update(status=RunStatus.CANCELLED, finished_at=timezone.now())
    assert submit(alice).status_code == 202


def test_plans_are_private_to_their_owner(alice: APIClient, bob: APIClient, catalog: Any) -> None:
    plan_id = submit(alice).json()["id"]
    finish(plan_id)
    for suffix in ("", "cancel/", "results/", "results/?format=csv", "pareto/"):
        url = f"/api/plans/{plan_id}/{suffix}"
        method = bob.post if suffix == "cancel/" else bob.get
        assert method(url).status_code == 404, url
    assert bob.get("/api/plans/").json()["results"] == []
    assert [p["id"] for p in alice.get("/api/plans/").json()["results"]] == [plan_id]
    assert Plan.objects.get(pk=plan_id).status == RunStatus.SUCCEEDED


def test_the_list_is_paginated_and_ordered(alice: APIClient, catalog: Any, settings: Any) -> None:
    settings.HETPLANNER_MAX_ACTIVE_PLANS_PER_USER = 10
    ids = []
    for name in ("b", "a", "c"):
        doc = small_doc()
        doc["name"] = name
        ids.append(submit(alice, doc).json()["id"])
    newest_first = alice.get("/api/plans/").json()
    assert [p["id"] for p in newest_first["results"]] == ids[::-1]
    assert "document" not in newest_first["results"][0]
    by_name = alice.get("/api/plans/?ordering=name&page_size=2").json()
    assert by_name["count"] == 3 and [p["name"] for p in by_name["results"]] == ["a", "b"]
    assert alice.get("/api/plans/?ordering=document").status_code == 400
    assert alice.get("/api/plans/?status=queued").json()["count"] == 3
    assert alice.get("/api/plans/?status=succeeded").json()["count"] == 0


def test_cancel_stops_a_plan_once_and_keeps_its_results(alice: APIClient, catalog: Any) -> None:
    plan_id = submit(alice).json()["id"]
    record(plan_id, searched()["evaluated"][:2])
    cancelled = alice.post(f"/api/plans/{plan_id}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    finished_at = Plan.objects.get(pk=plan_id).finished_at
    again = alice.post(f"/api/plans/{plan_id}/cancel/")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    assert Plan.objects.get(pk=plan_id).finished_at == finished_at
    assert alice.get(f"/api/plans/{plan_id}/results/").json()["count"] == 2


def test_results_are_partial_while_running_cheapest_first_as_json_and_csv(
    alice: APIClient, catalog: Any
) -> None:
    plan_id = submit(alice).json()["id"]
    Plan.objects.filter(pk=plan_id).update(status=RunStatus.RUNNING, started_at=timezone.now())
    evaluated = searched()["evaluated"]
    some = evaluated[:5]
    record(plan_id, some)
    page = alice.get(f"/api/plans/{plan_id}/results/?page_size=2").json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]
    everything = alice.get(f"/api/plans/{plan_id}/results/").json()["results"]
    cheapest = sorted(some, key=lambda e: (e["capex_usd"], e["key"]))
    assert [r["key"] for r in everything] == [e["key"] for e in cheapest]
    assert everything[0]["evaluation"]["metrics"] == cheapest[0]["metrics"]
    feasible = alice.get(f"/api/plans/{plan_id}/results/?feasible=true").json()
    assert feasible["count"] == sum(1 for e in some if e["feasible"])
    assert alice.get(f"/api/plans/{plan_id}/results/?feasible=maybe").status_code == 400

    response = alice.get(f"/api/plans/{plan_id}/results/?format=csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert f'filename="plan-{plan_id}.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["key"] for r in rows] == [e["key"] for e in cheapest]
    assert float(rows[0]["capex_usd"]) == pytest.approx(cheapest[0]["capex_usd"])
    assert float(rows[0]["throughput_tok_s"]) == pytest.approx(
        cheapest[0]["metrics"]["throughput_tok_s"]
    )
    assert rows[0]["feasible"] in ("True", "False")


def test_a_finished_plan_gives_its_recommendation_report_and_pareto_points(
    alice: APIClient, catalog: Any
) -> None:
    plan_id = submit(alice).json()["id"]
    result = finish(plan_id)
    detail = alice.get(f"/api/plans/{plan_id}/").json()
    assert (detail["status"], detail["progress"]) == ("succeeded", 100)
    assert detail["recommendation"] == result["recommendation"]
    assert detail["recommendation"]["key"] == result["recommendation"]["key"]
    assert detail["report"]["pareto"] == result["pareto"]

    pareto = alice.get(f"/api/plans/{plan_id}/pareto/").json()
    assert pareto["plan"] == plan_id and pareto["final"] is True
    points = {p["key"]: p for p in pareto["points"]}
    assert set(points) == {e["key"] for e in result["evaluated"]}
    fronts = {p["key"] for p in result["pareto"]["capex_vs_throughput"]} | {
        p["key"] for p in result["pareto"]["capex_vs_energy_per_token"]
    }
    assert fronts and {k for k, p in points.items() if p["on_front"]} == fronts
    for e in result["evaluated"]:
        point = points[e["key"]]
        assert point["capex_usd"] == pytest.approx(e["capex_usd"])
        assert point["throughput_tok_s"] == pytest.approx(e["metrics"]["throughput_tok_s"])
        assert point["feasible"] == e["feasible"]


def test_pareto_points_are_partial_and_off_front_while_running(
    alice: APIClient, catalog: Any
) -> None:
    plan_id = submit(alice).json()["id"]
    record(plan_id, searched()["evaluated"][:3])
    pareto = alice.get(f"/api/plans/{plan_id}/pareto/").json()
    assert pareto["final"] is False and len(pareto["points"]) == 3
    assert not any(p["on_front"] for p in pareto["points"])
