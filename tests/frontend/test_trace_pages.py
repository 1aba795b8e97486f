"""Trace pages: visibility (private / shared / public) and a delete that refuses, with 409
naming the referrers, while scenarios use the trace."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.files.uploadedfile import SimpleUploadedFile

from simulations.choices import TraceVisibility
from simulations.scenarios import services
from simulations.scenarios.models import Scenario, Trace, TraceReference
from tests.factories import ScenarioFactory, TraceFactory
from tests.simulations.test_services import MINI_TRACE

from .conftest import glitches_document

pytestmark = pytest.mark.django_db


def traced_document(slug: str) -> dict[str, Any]:
    doc = glitches_document()
    doc["workload"] = {
        "requests": 3,
        "input_tokens": {"dist": "trace", "trace": slug},
        "output_tokens": {"dist": "trace", "trace": slug},
        "arrival": {"kind": "trace", "trace": slug},
        "seed": 0,
    }
    return doc


def test_deleting_a_used_trace_from_its_page_answers_409_naming_the_scenario(
    client: Any, user: Any, other_user: Any, seeded: Any
) -> None:
    trace = services.trace_import(
        slug="conv", name="conv", text=MINI_TRACE, owner=user, visibility=TraceVisibility.SHARED
    )
    scenario = services.scenario_create(owner=other_user, document=traced_document("conv"))
    client.force_login(user)

    response = client.post("/traces/conv/delete/")

    assert response.status_code == 409
    html = response.content.decode()
    assert f"scenario #{scenario.pk}" in html and "bob" in html
    assert Trace.objects.filter(pk=trace.pk).exists()

    Scenario.objects.filter(pk=scenario.pk).delete()
    response = client.post("/traces/conv/delete/")
    assert response.status_code == 302
    assert not Trace.objects.filter(pk=trace.pk).exists()


def test_only_its_owner_or_staff_delete_a_trace_from_its_page(
    client: Any, user: Any, other_user: Any
) -> None:
    services.trace_import(
        slug="conv", name="conv", text=MINI_TRACE, owner=user, visibility=TraceVisibility.SHARED
    )
    client.force_login(other_user)
    assert client.post("/traces/conv/delete/").status_code == 403
    assert Trace.objects.filter(slug="conv").exists()


def test_another_users_private_trace_has_no_page_and_is_not_listed(
    client: Any, user: Any, other_user: Any
) -> None:
    services.trace_import(slug="mine", name="my trace", text=MINI_TRACE, owner=user)
    client.force_login(other_user)
    assert client.get("/traces/mine/").status_code == 404
    assert "my trace" not in client.get("/workloads/").content.decode()
    assert client.post("/traces/mine/delete/").status_code == 404
    client.force_login(user)
    assert client.get("/traces/mine/").status_code == 200
    assert "my trace" in client.get("/workloads/").content.decode()


def test_the_upload_page_stores_the_chosen_visibility(client: Any, user: Any) -> None:
    client.force_login(user)
    upload = SimpleUploadedFile("t.csv", MINI_TRACE.encode(), content_type="text/csv")
    response = client.post(
        "/traces/upload/", {"slug": "tiny", "name": "tiny", "file": upload, "visibility": "shared"}
    )
    assert response.status_code == 302
    trace = Trace.objects.get(slug="tiny")
    assert (trace.owner, trace.visibility) == (user, TraceVisibility.SHARED)


def test_the_migration_keeps_existing_traces_usable_and_records_their_references(
    user: Any, other_user: Any
) -> None:
    uploaded = TraceFactory(slug="uploaded", owner=user, visibility=TraceVisibility.PRIVATE)
    builtin = TraceFactory(slug="builtin", owner=None, visibility=TraceVisibility.PRIVATE)
    scenario = ScenarioFactory(owner=other_user, document=traced_document("uploaded"))
    ScenarioFactory(owner=other_user, document=traced_document("gone"))  # unknown slug
    migration = importlib.import_module("simulations.migrations.0006_trace_owner_visibility")

    migration.existing_traces_stay_usable(django_apps, None)
    migration.record_trace_references(django_apps, None)

    uploaded.refresh_from_db()
    builtin.refresh_from_db()
    assert uploaded.visibility == TraceVisibility.SHARED
    assert builtin.visibility == TraceVisibility.PUBLIC
    assert list(TraceReference.objects.values_list("trace__slug", "scenario_id")) == [
        ("uploaded", scenario.pk)
    ]
