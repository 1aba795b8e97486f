"""Traces have an owner and an explicit visibility (private / shared / public), and a trace
that scenarios, sweeps, plans or workloads use cannot be deleted: 409 naming the referrers,
nothing deleted."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.choices import TraceVisibility
from simulations.scenarios.models import Scenario, Trace, TraceReference
from simulations.sweeps.models import Sweep
from tests.core.planner.helpers import small_doc

from .test_catalog_api import TRACE_CSV

pytestmark = pytest.mark.django_db


def upload(client: APIClient, slug: str, **extra: Any) -> Any:
    return client.post(
        "/api/traces/", {"slug": slug, "name": slug, "text": TRACE_CSV, **extra}, format="json"
    )


def traced(document: dict[str, Any], slug: str) -> dict[str, Any]:
    """``document`` with its arrivals and lengths taken from the trace ``slug``."""
    doc = copy.deepcopy(document)
    doc["workload"] = {
        "requests": 3,
        "input_tokens": {"dist": "trace", "trace": slug},
        "output_tokens": {"dist": "trace", "trace": slug},
        "arrival": {"kind": "trace", "trace": slug},
        "seed": 0,
    }
    return doc


def test_an_upload_is_private_and_owned_by_its_uploader(
    alice: APIClient, bob: APIClient, user: Any, catalog: Any
) -> None:
    created = upload(alice, "mine")
    assert created.status_code == 201, created.json()
    assert (created.json()["owner"], created.json()["visibility"]) == ("alice", "private")
    trace = Trace.objects.get(slug="mine")
    assert (trace.owner, trace.visibility) == (user, TraceVisibility.PRIVATE)
    assert bob.get("/api/traces/mine/").status_code == 404
    assert "mine" not in [t["slug"] for t in bob.get("/api/traces/").json()["results"]]
    assert alice.get("/api/traces/mine/").status_code == 200


def test_a_shared_or_public_trace_is_visible_to_everyone(
    alice: APIClient, bob: APIClient, carol: APIClient, catalog: Any
) -> None:
    assert upload(alice, "ours", visibility="shared").status_code == 201
    assert upload(carol, "everyones", visibility="public").status_code == 201
    listed = {t["slug"]: t["visibility"] for t in bob.get("/api/traces/").json()["results"]}
    assert listed == {"ours": "shared", "everyones": "public"}


def test_only_catalog_editors_publish_a_trace(alice: APIClient, catalog: Any) -> None:
    response = upload(alice, "loud", visibility="public")
    assert response.status_code == 400 and "visibility" in response.json()
    bad = upload(alice, "odd", visibility="everyone")
    assert bad.status_code == 400 and "visibility" in bad.json()
    assert not Trace.objects.filter(slug__in=["loud", "odd"]).exists()


def test_another_users_private_trace_in_a_scenario_is_a_400_naming_the_field(
    alice: APIClient, bob: APIClient, catalog: Any, document: dict[str, Any]
) -> None:
    assert upload(alice, "secret").status_code == 201
    response = bob.post("/api/scenarios/", {"document": traced(document, "secret")}, format="json")
    assert response.status_code == 400
    errors = response.json()["document"]
    assert "workload.input_tokens.trace" in errors, errors  # the first use of the name
    assert "unknown trace" in str(errors)  # no hint that it exists
    assert not Scenario.objects.exists()
    mine = alice.post("/api/scenarios/", {"document": traced(document, "secret")}, format="json")
    assert mine.status_code == 201, mine.json()


def test_deleting_a_trace_another_user_relies_on_answers_409_naming_the_scenario(
    alice: APIClient, bob: APIClient, other_user: Any, catalog: Any, document: dict[str, Any]
) -> None:
    assert upload(alice, "azure-conv", visibility="shared").status_code == 201
    created = bob.post(
        "/api/scenarios/", {"document": traced(document, "azure-conv")}, format="json"
    )
    assert created.status_code == 201, created.json()
    scenario = Scenario.objects.get(pk=created.json()["id"])
    assert list(TraceReference.objects.values_list("trace__slug", "scenario_id")) == [
        ("azure-conv", scenario.pk)
    ]

    response = alice.delete("/api/traces/azure-conv/")

    assert response.status_code == 409
    body = response.json()
    assert "azure-conv" in body["detail"]
    assert body["referrers"] == [
        {"kind": "scenario", "id": scenario.pk, "owner": "bob", "name": None}
    ]  # bob's private scenario: its owner is named, its name is not shown to alice
    assert Trace.objects.filter(slug="azure-conv").exists()
    assert bob.post("/api/runs/", {"scenario": scenario.pk}, format="json").status_code == 202


def test_a_trace_is_free_to_delete_once_no_scenario_uses_it(
    alice: APIClient, catalog: Any, document: dict[str, Any]
) -> None:
    assert upload(alice, "t1").status_code == 201
    created = alice.post("/api/scenarios/", {"document": traced(document, "t1")}, format="json")
    scenario_id = created.json()["id"]
    refused = alice.delete("/api/traces/t1/")
    assert refused.status_code == 409
    assert refused.json()["referrers"][0]["name"] == "A100 vs H100, small"  # alice's own
    changed = alice.patch(f"/api/scenarios/{scenario_id}/", {"document": document}, format="json")
    assert changed.status_code == 200, changed.json()
    assert not TraceReference.objects.exists()
    assert alice.delete("/api/traces/t1/").status_code == 204
    assert not Trace.objects.filter(slug="t1").exists()


def test_a_sweep_and_a_plan_protect_the_traces_they_embed(
    alice: APIClient, bob: APIClient, catalog: Any, document: dict[str, Any]
) -> None:
    assert upload(alice, "shared-trace", visibility="shared").status_code == 201
    sweep = bob.post(
        "/api/sweeps/",
        {
            "name": "traced",
            "template": traced(document, "shared-trace"),
            "axes": [{"name": "n", "path": "systems[0].devices[0].count", "values": [1, 2]}],
        },
        format="json",
    )
    assert sweep.status_code == 202, sweep.json()
    plan_doc = small_doc(workload=traced(document, "shared-trace")["workload"])
    plan = bob.post("/api/plans/", {"document": plan_doc}, format="json")
    assert plan.status_code == 202, plan.json()

    response = alice.delete("/api/traces/shared-trace/")

    assert response.status_code == 409
    kinds = sorted((r["kind"], r["id"]) for r in response.json()["referrers"])
    assert kinds == [("plan", plan.json()["id"]), ("sweep", sweep.json()["id"])]
    assert Trace.objects.filter(slug="shared-trace").exists()
    assert Sweep.objects.filter(pk=sweep.json()["id"]).exists()


def test_a_workload_protects_its_trace(alice: APIClient, catalog: Any) -> None:
    assert upload(alice, "wl-trace").status_code == 201
    workload = alice.post(
        "/api/workloads/",
        {
            "name": "replay",
            "requests": 3,
            "input_tokens": {"dist": "trace"},
            "output_tokens": {"dist": "trace"},
            "arrival_kind": "trace",
            "trace": "wl-trace",
        },
        format="json",
    )
    assert workload.status_code == 201, workload.json()
    response = alice.delete("/api/traces/wl-trace/")
    assert response.status_code == 409
    assert response.json()["referrers"] == [
        {"kind": "workload", "id": workload.json()["id"], "owner": "alice", "name": "replay"}
    ]


def test_a_workload_cannot_use_another_users_private_trace(
    alice: APIClient, bob: APIClient, catalog: Any
) -> None:
    assert upload(alice, "hidden").status_code == 201
    response = bob.post(
        "/api/workloads/",
        {
            "name": "replay",
            "requests": 3,
            "input_tokens": 10,
            "output_tokens": 10,
            "arrival_kind": "trace",
            "trace": "hidden",
        },
        format="json",
    )
    assert response.status_code == 400 and "trace" in response.json()


def test_only_the_owner_or_staff_delete_a_trace(
    alice: APIClient, bob: APIClient, carol: APIClient, catalog: Any
) -> None:
    assert upload(alice, "a-shared", visibility="shared").status_code == 201
    assert bob.delete("/api/traces/a-shared/").status_code == 403
    assert carol.delete("/api/traces/a-shared/").status_code == 204
