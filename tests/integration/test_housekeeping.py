"""The reconcilers run on their own queue, so a backlog of simulations does not delay the
recovery of a job whose worker died.

Two real worker processes, as a deployment runs them: one consumes only the jobs' queue (one
pool process, no beat), the other only the housekeeping queue, with the beat. The jobs'
queue is filled with a backlog of slow runs (a test double that sleeps, so the test holds
on a loaded machine), then a run is left "running" under a worker that no longer exists (a
stale heartbeat). The housekeeping worker must hand it back while the backlog is still
waiting: before the fix the reconcile messages queued behind the backlog and expired there
unexecuted.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from simulations.choices import FINAL_STATUSES, RunEventKind, RunStatus
from simulations.runs import services
from simulations.runs.models import RunEvent, SimulationRun
from tests.helpers import wait_for
from tests.integration.test_reliability import a100_doc, submit
from tests.integration.tuned_workers import (  # noqa: F401  (the fixture)
    TUNED_ENV,
    tuned_worker_factory_fixture,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: Runs in the backlog, and how long each holds the single pool process.
BACKLOG_RUNS = 40
SPIN_S = 3.0


def spin_doc() -> dict[str, Any]:
    doc = a100_doc(policy="test-double-spin", requests=10)
    doc["systems"][0]["options"] = {"spin_s": SPIN_S}
    return doc


def never_claimed(runs: list[SimulationRun]) -> int:
    """How many of ``runs`` no worker has taken yet."""
    return SimulationRun.objects.filter(
        pk__in=[r.pk for r in runs], status=RunStatus.QUEUED, attempts=0
    ).count()


def test_a_lost_run_is_recovered_by_the_housekeeping_worker_while_a_backlog_waits(
    tuned_worker_factory: Any, user: Any, builtin_catalog_rows: Any, monkeypatch: Any
) -> None:
    jobs_worker = tuned_worker_factory(queues=(settings.CELERY_TASK_DEFAULT_QUEUE,), beat=False)
    backlog = [submit(user, spin_doc()) for _ in range(BACKLOG_RUNS)]
    wait_for(
        lambda: SimulationRun.objects.filter(
            pk__in=[r.pk for r in backlog], status=RunStatus.RUNNING
        ).exists(),
        timeout_s=120,
    )

    # A run whose worker died mid-run: claimed by a worker that is gone, heartbeat long
    # stale, and no message in any queue (the lost worker had taken it).
    with monkeypatch.context() as m:
        m.setattr(services, "_enqueue", lambda run_id: None)
        lost = submit(user, a100_doc())
    assert services.run_claim(lost.pk, worker="lost-host:1") is not None
    stale = timezone.now() - timedelta(seconds=10 * int(TUNED_ENV["HETPLANNER_HEARTBEAT_STALE_S"]))
    SimulationRun.objects.filter(pk=lost.pk).update(heartbeat_at=stale)

    housekeeping = tuned_worker_factory(queues=(settings.HETPLANNER_HOUSEKEEPING_QUEUE,))
    ready = time.monotonic()
    try:
        try:
            wait_for(
                lambda: RunEvent.objects.filter(run=lost, kind=RunEventKind.REQUEUED).exists(),
                timeout_s=90,
            )
        except pytest.fail.Exception:
            print(jobs_worker.log_text()[-3000:], housekeeping.log_text()[-3000:])
            raise
        waiting = never_claimed(backlog)
        print(
            f"recovered {time.monotonic() - ready:.1f} s after the housekeeping worker was "
            f"ready, with {waiting} of {BACKLOG_RUNS} backlog runs still waiting"
        )
        # Recovery did not wait for the backlog: most of it is still queued.
        assert waiting >= BACKLOG_RUNS // 4
        row = SimulationRun.objects.get(pk=lost.pk)
        assert row.status in (RunStatus.QUEUED, RunStatus.RUNNING, *FINAL_STATUSES)
        assert row.worker != "lost-host:1"
    finally:
        # Let the jobs' worker skip the rest of the backlog when it stops.
        SimulationRun.objects.exclude(status__in=FINAL_STATUSES).update(
            status=RunStatus.CANCELLED, finished_at=timezone.now()
        )
