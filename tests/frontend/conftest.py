"""Fixtures of the dashboard tests: a seeded catalog, signed-in clients, and runs whose
result documents come from the real simulation core (no hand-made numbers)."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from simulations.runs import services as run_services
from simulations.runs.models import SimulationRun
from simulations.scenarios import services as scenario_services
from simulations.scenarios.models import Scenario

REPO = Path(__file__).resolve().parent.parent.parent
GLITCHES_EXAMPLE = REPO / "examples" / "glitches-vs-8xa100.json"


def glitches_document(requests: int = 40) -> dict[str, Any]:
    """The GLITCHES comparison (1×A100 + 7×U280 against 8×A100), fewer requests."""
    doc = json.loads(GLITCHES_EXAMPLE.read_text())
    doc["workload"]["requests"] = requests
    return doc


@cache
def _simulated(document_json: str) -> dict[str, Any]:
    from simulations.core.catalog import builtin_catalog
    from simulations.core.scenario import parse_scenario
    from simulations.core.simulate import simulate

    spec = parse_scenario(json.loads(document_json), builtin_catalog())
    return simulate(spec)


def simulated(document: dict[str, Any]) -> dict[str, Any]:
    """The core's result document of ``document`` (built-in catalog; memoised per session)."""
    return copy.deepcopy(_simulated(json.dumps(document, sort_keys=True)))


def store_succeeded_run(owner: Any, document: dict[str, Any]) -> SimulationRun:
    """A run of ``document`` taken through the services to ``succeeded`` with the core's
    result (the worker's part done in-process)."""
    scenario = scenario_services.scenario_create(owner=owner, document=document)
    # No task message: in a live-server test the run is committed at once, and a real worker
    # started earlier in the session would claim it before this test does.
    with mock.patch.object(run_services, "_enqueue", lambda run_id: None):
        run = run_services.simulation_run_create(scenario=scenario, owner=owner)
    claim = run_services.run_claim(run.pk, worker="test:1")
    assert claim is not None
    assert run_services.run_mark_succeeded(run.pk, claim.attempt, simulated(document))
    return SimulationRun.objects.get(pk=run.pk)


@pytest.fixture
def seeded(builtin_catalog_rows: Any) -> Any:
    """The built-in catalog in the database."""
    return builtin_catalog_rows


@pytest.fixture
def alice_client(client: Any, user: Any) -> Any:
    """A test client signed in as alice."""
    client.force_login(user)
    return client


@pytest.fixture
def glitches_run(seeded: Any, user: Any) -> SimulationRun:
    """alice's succeeded run of the GLITCHES comparison (40 requests)."""
    return store_succeeded_run(user, glitches_document())


@pytest.fixture
def queued_run(seeded: Any, user: Any) -> SimulationRun:
    """alice's run that no worker has claimed yet."""
    scenario = scenario_services.scenario_create(owner=user, document=glitches_document())
    return run_services.simulation_run_create(scenario=scenario, owner=user)


def scenario_count() -> int:
    """Scenarios stored."""
    return Scenario.objects.count()
