"""A run taken through the API with the worker's part done in this process."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from simulations.adapters import catalog_from_db
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.runs import services


def execute_in_process(run_id: int) -> None:
    """What a worker does, in this process: claim, simulate, store."""
    claim = services.run_claim(run_id, worker="test:0")
    assert claim is not None
    result = simulate(parse_scenario(claim.document, catalog_from_db()))
    assert services.run_mark_succeeded(run_id, claim.attempt, result)


def run_systems(client: APIClient, scenario_id: int) -> list[dict[str, Any]]:
    """Submit a run of a stored scenario over the API, execute it, and return the result's
    systems as the API serves them."""
    run_id = client.post("/api/runs/", {"scenario": scenario_id}, format="json").json()["id"]
    execute_in_process(run_id)
    systems: list[dict[str, Any]] = client.get(f"/api/runs/{run_id}/result/").json()["result"][
        "systems"
    ]
    return systems
