"""Devices whose vendor publishes no power (``tdp_w`` null) over the API: created, listed and
read back with a null power; a non-finite power is still refused. A scenario placing such a
device needs its ``tdp_w`` quote (a 400 naming the JSON path without one), is stored with
it, and its run uses it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.catalog.models import Device
from simulations.scenarios.models import Scenario
from tests.api.in_process import run_systems

pytestmark = pytest.mark.django_db

SLUG = "a100-unpowered"


def _unpowered_record(carol: APIClient, **over: Any) -> dict[str, Any]:
    """The A100 80GB record as the API shows it, renamed, without a published power."""
    record = carol.get("/api/devices/a100-80gb/").json()
    for key in ("id", "created_at", "updated_at"):
        record.pop(key)
    record.update(slug=SLUG, name="A100 without a published power", tdp_w=None)
    record["sources"] = {**record["sources"], "tdp_w": "not published by the vendor"}
    record.update(over)
    return record


@pytest.fixture
def unpowered(carol: APIClient, catalog: Any) -> Device:
    created = carol.post("/api/devices/", _unpowered_record(carol), format="json")
    assert created.status_code == 201, created.json()
    return Device.objects.get(slug=SLUG)


def test_a_device_with_a_null_power_is_created_and_listed(
    alice: APIClient, unpowered: Device
) -> None:
    assert unpowered.tdp_w is None
    assert alice.get(f"/api/devices/{SLUG}/").json()["tdp_w"] is None
    listed = alice.get("/api/devices/?kind=gpu&page_size=100&ordering=tdp_w").json()["results"]
    assert {d["slug"]: d["tdp_w"] for d in listed}[SLUG] is None


def test_a_device_record_may_omit_its_power(carol: APIClient, catalog: Any) -> None:
    record = _unpowered_record(carol)
    del record["tdp_w"]
    created = carol.post("/api/devices/", record, format="json")
    assert created.status_code == 201, created.json()
    assert Device.objects.get(slug=SLUG).tdp_w is None


def test_a_put_may_clear_a_published_power(carol: APIClient, unpowered: Device) -> None:
    record = _unpowered_record(carol, tdp_w=250.0)
    assert carol.put(f"/api/devices/{SLUG}/", record, format="json").json()["tdp_w"] == 250.0
    record["tdp_w"] = None
    assert carol.put(f"/api/devices/{SLUG}/", record, format="json").json()["tdp_w"] is None


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "0", "-300"])
def test_a_non_finite_or_non_positive_power_is_still_refused(
    carol: APIClient, catalog: Any, literal: str
) -> None:
    body = json.dumps(_unpowered_record(carol)).replace('"tdp_w": null', f'"tdp_w": {literal}')
    refused = carol.post("/api/devices/", body, content_type="application/json")
    assert refused.status_code == 400
    assert not Device.objects.filter(slug=SLUG).exists()


def _scenario(document: dict[str, Any], **entry: Any) -> dict[str, Any]:
    document["systems"][1]["devices"] = [{"device": SLUG, "count": 1, **entry}]
    document["systems"][1]["name"] = "1xA100 quoted"
    return document


def test_a_scenario_without_a_power_quote_is_a_400_naming_the_field(
    alice: APIClient, unpowered: Device, document: dict
) -> None:
    refused = alice.post("/api/scenarios/", {"document": _scenario(document)}, format="json")
    assert refused.status_code == 400
    (message,) = refused.json()["document"]["systems[1].devices[0].tdp_w"]
    assert message.startswith(f"{SLUG} has no published power")
    assert not Scenario.objects.exists()


def test_a_scenario_with_a_power_quote_is_stored_and_its_run_uses_it(
    alice: APIClient, unpowered: Device, document: dict
) -> None:
    doc = _scenario(document, tdp_w=300)
    doc["systems"][0]["devices"] = [{"device": "a100-80gb", "count": 1}]
    doc["systems"][0]["options"] = {}
    created = alice.post("/api/scenarios/", {"document": doc}, format="json")
    assert created.status_code == 201, created.json()
    stored = Scenario.objects.get(pk=created.json()["id"]).document
    assert stored["systems"][1]["devices"][0]["tdp_w"] == 300

    catalog_a100, quoted = run_systems(alice, created.json()["id"])
    assert quoted["devices"][0]["tdp_w"] == 300
    assert quoted["devices"][0]["power_source"] == "scenario"
    assert "power_source" not in catalog_a100["devices"][0]
    # The same board at its catalog power (300 W) and quoted at 300 W: the same energy.
    assert quoted["energy_j"] == pytest.approx(catalog_a100["energy_j"])


@pytest.mark.parametrize("quote", [-5, 0, 1e9, "300"])
def test_a_bad_power_quote_is_a_400_naming_its_path(
    alice: APIClient, unpowered: Device, document: dict, quote: Any
) -> None:
    doc = _scenario(document, tdp_w=quote)
    refused = alice.post("/api/scenarios/", {"document": doc}, format="json")
    assert refused.status_code == 400
    assert "systems[1].devices[0].tdp_w" in refused.json()["document"]
    assert not Scenario.objects.exists()
