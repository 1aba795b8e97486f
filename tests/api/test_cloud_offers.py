"""``/api/cloud-offers/``: the catalog's published cloud prices with device, provider, date
and source; a scenario's costs may name one, and its run's TCO says where the price came
from."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.core.catalog import builtin_cloud_offers
from simulations.scenarios.models import Scenario

pytestmark = pytest.mark.django_db


def test_it_lists_every_offer_with_its_source_and_date(alice: APIClient) -> None:
    listed = alice.get("/api/cloud-offers/")
    assert listed.status_code == 200
    body = listed.json()
    assert {o["slug"] for o in body} == set(builtin_cloud_offers())
    for offer in body:
        assert offer["as_of"] and offer["source"].count("http")
        assert 0 < offer["usd_per_device_hour_low"] <= offer["usd_per_device_hour_high"]


def test_it_filters_by_device_and_shows_one_offer(alice: APIClient) -> None:
    h100 = alice.get("/api/cloud-offers/", {"device": "h100-sxm"}).json()
    assert h100 and {o["device"] for o in h100} == {"h100-sxm"}
    one = alice.get("/api/cloud-offers/aws-p4d-24xlarge/")
    assert one.status_code == 200 and one.json()["device"] == "a100-40gb"
    assert alice.get("/api/cloud-offers/nope/").status_code == 404


def test_it_refuses_an_unknown_query_parameter_naming_it(alice: APIClient) -> None:
    refused = alice.get("/api/cloud-offers/", {"gpu": "h100-sxm"})
    assert refused.status_code == 400 and "gpu" in refused.json()


def test_a_scenario_naming_an_offer_of_another_device_is_refused_naming_the_field(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    document["costs"] = {
        "electricity_usd_per_kwh": 0.12,
        "amortisation_years": 4,
        "cloud_usd_per_device_hour": {"a100-80gb": "aws-p4d-24xlarge"},
    }
    refused = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert refused.status_code == 400
    errors = refused.json()["document"]["costs.cloud_usd_per_device_hour.a100-80gb"]
    assert any("prices a100-40gb" in e for e in errors)
    assert not Scenario.objects.exists()
    document["costs"]["cloud_usd_per_device_hour"] = {
        "a100-80gb": "specialty-a100-80gb-2026-05@low"
    }
    assert alice.post("/api/scenarios/", {"document": document}, format="json").status_code == 201
