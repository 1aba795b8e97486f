"""A scenario device entry's quoted ``price_usd`` over the API: stored and used for the
run's capex; a bad quote is a 400 naming its JSON path, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.scenarios.models import Scenario
from tests.api.in_process import run_systems

pytestmark = pytest.mark.django_db


def _quoted(document: dict[str, Any], price: Any) -> dict[str, Any]:
    document["systems"][1]["devices"] = [{"device": "a10g", "count": 2, "price_usd": price}]
    document["systems"][1]["name"] = "2xA10G"
    return document


def test_a_scenario_with_a_quoted_price_is_accepted_and_its_run_uses_it(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    created = alice.post("/api/scenarios/", {"document": _quoted(document, 3500)}, format="json")
    assert created.status_code == 201, created.json()
    stored = Scenario.objects.get(pk=created.json()["id"]).document
    assert stored["systems"][1]["devices"][0]["price_usd"] == 3500

    systems = run_systems(alice, created.json()["id"])
    a10g = systems[1]
    assert a10g["capex_usd"] == 2 * 3500
    assert a10g["cost_efficiency_tok_s_per_usd"] == pytest.approx(a10g["throughput_tok_s"] / 7000)
    assert a10g["devices"][0]["price_source"] == "scenario"
    assert systems[0]["devices"][0]["price_source"] == "catalog"


@pytest.mark.parametrize(
    ("price", "words"),
    [(-5, "positive"), (0, "positive"), (1e9, "at most"), ("3500", "must be a number")],
)
def test_a_bad_quoted_price_is_a_400_naming_its_path(
    alice: APIClient, catalog: Any, document: dict, price: Any, words: str
) -> None:
    refused = alice.post("/api/scenarios/", {"document": _quoted(document, price)}, format="json")
    assert refused.status_code == 400
    assert words in " ".join(refused.json()["document"]["systems[1].devices[0].price_usd"])
    assert not Scenario.objects.exists()


def test_a_non_finite_quoted_price_is_refused(alice: APIClient, catalog: Any) -> None:
    body = (
        '{"document": {"name": "n", "model": "llama3.2-3b", "workload": {"requests": 1, '
        '"input_tokens": 8, "output_tokens": 8}, "systems": [{"name": "s", "policy": '
        '"homogeneous", "devices": [{"device": "a10g", "count": 1, "price_usd": NaN}]}]}}'
    )
    refused = alice.post("/api/scenarios/", body, content_type="application/json")
    assert refused.status_code == 400
    assert not Scenario.objects.exists()
