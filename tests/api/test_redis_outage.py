"""The API while Redis is down.

Redis holds the throttle counters (the cache) and, in a deployment with ``REDIS_URL``, the
Celery broker. Both are pointed here at a local port where nothing listens: the API keeps
answering (the cache falls back to a per-process cache, with a logged warning), throttling
still counts, and a run, sweep or plan submitted meanwhile is stored queued — never a 500,
never half-stored — and marked unsent, so the reconciler's next pass sends it.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from hetplanner.settings.base import cache_settings
from simulations.choices import ChunkStatus, RunStatus
from simulations.plans import services as plan_services
from simulations.plans.models import Plan
from simulations.runs import services
from simulations.runs.models import SimulationRun
from simulations.sweeps import services as sweep_services
from simulations.sweeps.models import SweepChunk
from tests.core.planner.helpers import small_doc
from tests.helpers import celery_broker

pytestmark = pytest.mark.django_db


def unused_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dead_redis_url() -> str:
    return f"redis://127.0.0.1:{unused_port()}/0"


@pytest.fixture
def cache_down(settings: Any, dead_redis_url: str) -> None:
    """The deployment's cache settings, on a Redis that does not answer."""
    settings.CACHES = cache_settings(dead_redis_url)


@pytest.fixture
def broker_down(dead_redis_url: str) -> Iterator[None]:
    """Point the Celery app at a Redis broker that does not answer."""
    with celery_broker(dead_redis_url):
        yield


@pytest.fixture
def scenario_id(alice: APIClient, catalog: Any, document: dict) -> int:
    return alice.post("/api/scenarios/", {"document": document}, format="json").json()["id"]


@pytest.mark.usefixtures("cache_down")
def test_reads_keep_answering_with_the_cache_down_and_the_outage_is_logged(
    alice: APIClient, catalog: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="hetplanner.cache"):
        for _ in range(3):
            response = alice.get("/api/devices/?kind=gpu")
            assert response.status_code == 200
    assert response.json()["count"] > 0
    warnings = [r for r in caplog.records if r.name == "hetplanner.cache"]
    # One warning for the outage, not one per request.
    assert len(warnings) == 1
    assert "local" in warnings[0].getMessage()


@pytest.mark.usefixtures("cache_down")
def test_throttling_still_counts_in_the_local_cache_while_redis_is_down(
    alice: APIClient, scenario_id: int, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "_enqueue", lambda run_id: None)
    settings.HETPLANNER_API_THROTTLE_RATES = {
        **settings.HETPLANNER_API_THROTTLE_RATES,
        "run_submit": "2/min",
    }
    codes = [
        alice.post("/api/runs/", {"scenario": scenario_id}, format="json").status_code
        for _ in range(3)
    ]
    assert codes == [202, 202, 429]


@pytest.mark.usefixtures("cache_down", "broker_down")
def test_a_run_submitted_while_redis_is_down_is_stored_queued_and_sent_by_the_reconciler(
    alice: APIClient,
    scenario_id: int,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = alice.post("/api/runs/", {"scenario": scenario_id}, format="json")
    assert response.status_code == 202, response.content
    run = SimulationRun.objects.get()
    assert run.pk == response.json()["id"]
    assert run.status == RunStatus.QUEUED
    # The send failed: the run is marked unsent, so the reconciler's next pass sends it
    # (instead of waiting HETPLANNER_QUEUED_STALE_S for a message that never left).
    assert run.enqueued_at is None

    sent: list[int] = []
    monkeypatch.setattr("simulations.runs.tasks.run_simulation.delay", sent.append)
    with django_capture_on_commit_callbacks(execute=True):
        report = services.runs_reconcile()
    assert report.resent == [run.pk] and sent == [run.pk]


@pytest.mark.usefixtures("cache_down", "broker_down")
def test_a_sweep_submitted_while_redis_is_down_is_stored_whole_with_its_chunks_unsent(
    alice: APIClient, catalog: Any, document: dict, django_capture_on_commit_callbacks: Any
) -> None:
    axis = {"name": "gpus", "path": "systems[0].devices[0].count", "values": [1, 2, 4]}
    body = {"name": "sweep", "template": document, "axes": [axis], "chunk_size": 1}
    with django_capture_on_commit_callbacks(execute=True):
        response = alice.post("/api/sweeps/", body, format="json")
    assert response.status_code == 202, response.content
    chunks = SweepChunk.objects.filter(sweep_id=response.json()["id"])
    assert chunks.count() == 3
    assert set(chunks.values_list("status", "enqueued_at")) == {(ChunkStatus.QUEUED, None)}
    report = sweep_services.sweeps_reconcile()
    assert sorted(report.resent) == sorted(chunks.values_list("pk", flat=True))


@pytest.mark.usefixtures("cache_down", "broker_down")
def test_a_plan_submitted_while_redis_is_down_is_stored_queued_and_unsent(
    alice: APIClient, catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = alice.post("/api/plans/", {"document": small_doc()}, format="json")
    assert response.status_code == 202, response.content
    plan = Plan.objects.get()
    assert (plan.status, plan.enqueued_at) == (RunStatus.QUEUED, None)
    report = plan_services.plans_reconcile()
    assert report.stages_resent == [plan.pk]
