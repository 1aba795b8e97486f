"""A scenario's ``costs`` and ``capacity`` over the API: stored as given; a bad value is a
400 naming its JSON path, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.scenarios.models import Scenario

pytestmark = pytest.mark.django_db

COSTS = {"electricity_usd_per_kwh": 0.12, "pue": 1.3, "amortisation_years": 4}


def test_a_scenario_with_costs_and_capacity_is_accepted(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    document["costs"] = COSTS
    document["slo"] = {"ttft_p90_ms": 1000}
    document["capacity"] = {"requests": 50, "steps": 4}
    created = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert created.status_code == 201, created.json()
    stored = Scenario.objects.get(pk=created.json()["id"]).document
    assert stored["costs"] == COSTS and stored["capacity"] == {"requests": 50, "steps": 4}


@pytest.mark.parametrize(
    ("over", "path"),
    [
        ({"costs": {**COSTS, "pue": 0.5}}, "costs.pue"),
        ({"costs": {**COSTS, "utilisation": 2}}, "costs.utilisation"),
        ({"costs": {"pue": 1.2, "amortisation_years": 3}}, "costs.electricity_usd_per_kwh"),
        (
            {"costs": {**COSTS, "cloud_usd_per_device_hour": {"a100-80gb": -1}}},
            "costs.cloud_usd_per_device_hour.a100-80gb",
        ),
        ({"capacity": {"steps": 99}, "slo": {"ttft_p90_ms": 1000}}, "capacity.steps"),
        ({"capacity": True, "slo": None}, "capacity"),
    ],
)
def test_bad_costs_or_capacity_are_a_400_naming_the_path(
    alice: APIClient, catalog: Any, document: dict, over: dict[str, Any], path: str
) -> None:
    document.update(over)
    if document.get("slo") is None:
        document.pop("slo", None)
    refused = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert refused.status_code == 400
    assert path in refused.json()["document"], refused.json()
    assert not Scenario.objects.exists()
