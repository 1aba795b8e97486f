"""A homogeneous system created through the API starts with continuous batching (vLLM's
defaults today); a system that names its batching keeps it, and stored scenarios are not
rewritten."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.scenarios import services
from simulations.scenarios.models import Scenario

pytestmark = pytest.mark.django_db

CONTINUOUS = {
    "max_batch": 256,
    "max_batched_tokens": 2048,
    "chunked_prefill": True,
    "prefix_caching": True,
}


def test_a_new_homogeneous_system_defaults_to_continuous_batching(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    created = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert created.status_code == 201, created.json()
    stored = Scenario.objects.get(pk=created.json()["id"]).document
    # systems[1] named no option: it gets the new-system options, stored with it
    assert stored["systems"][1]["options"] == CONTINUOUS
    assert created.json()["document"]["systems"][1]["options"] == CONTINUOUS
    # systems[0] chose its batching (max_batch 8): left as given
    assert stored["systems"][0]["options"] == {"max_batch": 8}


def test_a_system_that_names_its_batching_keeps_it(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    document["systems"][1]["options"] = {"max_batch": 1}
    created = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert created.status_code == 201, created.json()
    stored = Scenario.objects.get(pk=created.json()["id"]).document
    assert stored["systems"][1]["options"] == {"max_batch": 1}


def test_stored_scenarios_and_updates_keep_their_documents(
    alice: APIClient, user: Any, catalog: Any, document: dict
) -> None:
    # stored before (or by a service caller that is not the API): the declared defaults
    scenario = services.scenario_create(owner=user, document=document)
    assert "options" not in scenario.document["systems"][1]
    document["name"] = "renamed"
    updated = alice.patch(f"/api/scenarios/{scenario.pk}/", {"document": document}, format="json")
    assert updated.status_code == 200, updated.json()
    scenario.refresh_from_db()
    assert "options" not in scenario.document["systems"][1]
