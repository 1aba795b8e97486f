"""The claim and the stale-heartbeat requeue written once in simulations.jobs (runs, plan
stages and chunks call them with their own columns and hooks), exercised on run rows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.db.models import Q
from django.utils import timezone

from simulations.choices import ChunkStatus, RunStatus
from simulations.jobs import STATUS_COLUMNS, claim_row, requeue_stale
from simulations.plans.services import STAGE_COLUMNS
from simulations.runs import services as run_services
from simulations.runs.models import SimulationRun
from simulations.scenarios import services as scenario_services
from tests.simulations.test_services import scenario_doc

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(fixture_catalog_rows: Any, user: Any) -> list[SimulationRun]:
    scenario = scenario_services.scenario_create(owner=user, document=scenario_doc())
    return [run_services.simulation_run_create(scenario=scenario, owner=user) for _ in range(2)]


def test_runs_and_chunks_share_the_queued_and_running_values_a_plan_stage_names_its_own() -> None:
    for status in (RunStatus, ChunkStatus):
        assert (STATUS_COLUMNS.queued, STATUS_COLUMNS.running) == (
            status.QUEUED.value,
            status.RUNNING.value,
        )
    assert (STAGE_COLUMNS.status, STAGE_COLUMNS.attempts) == ("stage_status", "stage_attempts")


def _never(*args: Any) -> None:
    raise AssertionError(f"give_up called with {args}")


def test_of_two_deliveries_that_read_the_same_attempt_only_the_first_to_update_claims(
    runs: list[SimulationRun],
) -> None:
    run = runs[0]
    now = timezone.now()
    started = {"started_at": now}  # a running run has a start time (its CHECK)
    inner: list[Any] = []

    def race(row: dict[str, Any]) -> Q:
        # Between this delivery's read and its UPDATE, another delivery claims the row.
        if not inner:
            # Its heartbeat is already stale by this delivery's clock, so the state alone
            # would let this delivery take the row too: only the attempt guard stops it.
            earlier = now - timedelta(hours=1)
            inner.append(
                claim_row(
                    SimulationRun,
                    run.pk,
                    worker="w:2",
                    now=earlier,
                    give_up=_never,
                    claimed=started,
                )
            )
        return Q()

    outer = claim_row(
        SimulationRun, run.pk, worker="w:1", now=now, give_up=_never, scope=race, claimed=started
    )
    assert outer is None
    assert inner[0] is not None and inner[0][1] == 1
    row = SimulationRun.objects.values("status", "attempts", "worker").get(pk=run.pk)
    assert row == {"status": RunStatus.RUNNING, "attempts": 1, "worker": "w:2"}


def test_a_row_that_used_its_attempts_goes_to_give_up_unclaimed(
    runs: list[SimulationRun], settings: Any
) -> None:
    settings.HETPLANNER_MAX_ATTEMPTS = 2
    run = runs[0]
    SimulationRun.objects.filter(pk=run.pk).update(attempts=2, worker="gone:7")
    seen: list[tuple[int, int, str]] = []

    def give_up(guard: Any, row: dict[str, Any], attempts: int, lost: str) -> None:
        seen.append((guard.count(), attempts, lost))

    held = claim_row(SimulationRun, run.pk, worker="w:1", now=timezone.now(), give_up=give_up)
    assert held is None
    assert seen == [(1, 2, " (last worker: gone:7)")]
    assert SimulationRun.objects.values_list("status", "attempts").get(pk=run.pk) == (
        RunStatus.QUEUED,
        2,
    )


def test_requeue_stale_requeues_with_the_hook_and_hands_exhausted_rows_to_give_up(
    runs: list[SimulationRun], settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.HETPLANNER_MAX_ATTEMPTS = 2
    lost, exhausted = runs
    t0 = timezone.now()
    run_services.run_claim(lost.pk, worker="dead:1", now=t0)
    run_services.run_mark_progress(lost.pk, 1, 40)
    SimulationRun.objects.filter(pk=exhausted.pk).update(
        status=RunStatus.RUNNING, attempts=2, started_at=t0, heartbeat_at=t0, worker="dead:2"
    )
    SimulationRun.objects.filter(pk=lost.pk).update(heartbeat_at=t0)
    requeued_seen: list[tuple[int, int, str]] = []
    given_up: list[tuple[int, int, str]] = []
    enqueue = mock.Mock()
    with django_capture_on_commit_callbacks(execute=True):
        ids = requeue_stale(
            SimulationRun,
            Q(),
            now=t0 + timedelta(hours=1),
            limit=10,
            enqueue=enqueue,
            requeued_values={"progress": 0},
            on_requeued=lambda pk, attempts, worker: requeued_seen.append((pk, attempts, worker)),
            give_up=lambda guard, pk, attempts, worker: given_up.append((pk, attempts, worker)),
        )
    assert ids == [lost.pk]
    assert requeued_seen == [(lost.pk, 1, "dead:1")]
    assert given_up == [(exhausted.pk, 2, "dead:2")]
    enqueue.assert_called_once_with(lost.pk)
    assert SimulationRun.objects.values("status", "worker", "progress", "attempts").get(
        pk=lost.pk
    ) == {"status": RunStatus.QUEUED, "worker": "", "progress": 0, "attempts": 1}
    assert SimulationRun.objects.values_list("status", flat=True).get(pk=exhausted.pk) == (
        RunStatus.RUNNING
    )
