"""Every write to the run lifecycle: create, claim, progress, outcome, cancel, reconcile.

Run transitions (queued → running → succeeded / failed / cancelled) are single conditional
UPDATEs (``WHERE status = …``): a final state is never left, and only the attempt that
holds the claim (``status = running AND attempts = n``) can store a result, so a result is
stored exactly once even when workers die or a message is delivered twice. Each transition
that changed the row also writes a :class:`RunEvent` in the same transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from simulations.choices import (
    ACTIVE_STATUSES,
    RunEventKind,
    RunStatus,
)
from simulations.core.jsonsafe import finite
from simulations.jobs import (
    MAX_ERROR_CHARS,
    ReconcileReport,
    claim_row,
    mark_unsent,
    quota_check,
    requeue_stale,
    resend_lost,
)
from simulations.runs.models import RunEvent, SimulationRun
from simulations.scenarios.models import Scenario
from simulations.scenarios.services import scenario_validate

logger = logging.getLogger(__name__)

# --- runs ------------------------------------------------------------------------------------


def _enqueue(run_id: int) -> None:
    """Send the run's task message; a broker failure is logged, the reconciler resends."""
    from simulations.runs.tasks import run_simulation

    try:
        run_simulation.delay(run_id)
    except Exception:
        logger.exception("could not queue run %s; the reconciler will retry", run_id)
        mark_unsent(SimulationRun, [run_id], queued={"status": RunStatus.QUEUED})


def _event(run_id: int, kind: RunEventKind, attempt: int, message: str = "") -> None:
    RunEvent.objects.create(run_id=run_id, kind=kind, attempt=attempt, message=message[:2000])


def simulation_run_create(*, scenario: Scenario, owner: Any) -> SimulationRun:
    """Create a queued run of ``scenario`` and queue its Celery task once committed.

    The document is re-validated against today's catalog (it may have changed since the
    scenario was stored); on ScenarioValidationError nothing is stored. ``owner`` must own
    the scenario or the scenario must be shared (PermissionDenied otherwise).
    """
    if scenario.owner_id != owner.pk and not scenario.shared:
        raise PermissionDenied("not your scenario")
    # The scenario's owner chose its traces (and shared the scenario): resolve them as theirs.
    scenario_validate(scenario.document, user=scenario.owner)
    now = timezone.now()
    with transaction.atomic():
        run = SimulationRun.objects.create(
            owner=owner,
            scenario=scenario,
            document=scenario.document,
            status=RunStatus.QUEUED,
            enqueued_at=now,
        )
        _event(run.pk, RunEventKind.CREATED, 0)
        run_id = run.pk
        transaction.on_commit(lambda: _enqueue(run_id))
    return run


def run_submit(*, scenario: Scenario, owner: Any) -> SimulationRun:
    """Queue a run of ``scenario`` for ``owner`` within their quota of active runs
    (``HETPLANNER_MAX_ACTIVE_RUNS_PER_USER``); see :func:`simulation_run_create`.

    Raises :class:`~simulations.jobs.QuotaExceededError` (nothing stored) when ``owner``
    already has that many runs queued or running, as well as what
    :func:`simulation_run_create` raises.
    """
    with transaction.atomic():
        quota_check(
            owner,
            SimulationRun.objects.filter(owner=owner, status__in=ACTIVE_STATUSES),
            what="runs",
            limit=int(settings.HETPLANNER_MAX_ACTIVE_RUNS_PER_USER),
        )
        return simulation_run_create(scenario=scenario, owner=owner)


@dataclass(frozen=True)
class Claim:
    """A worker's hold on a run: only this attempt may store the run's outcome."""

    run_id: int
    attempt: int
    document: Any


def run_claim(
    run_id: int, *, worker: str, resume_attempt: int | None = None, now: datetime | None = None
) -> Claim | None:
    """Claim ``run_id`` for this delivery with one conditional UPDATE
    (:func:`~simulations.jobs.claim_row`), or return None.

    Claimable: queued, or running with a stale heartbeat (its worker died), or — when a
    task retries after a transient error — running under ``resume_attempt``. The update
    also increments ``attempts`` and writes a ``claimed`` event; a run that already used
    ``HETPLANNER_MAX_ATTEMPTS`` deliveries is failed instead. None means another worker
    holds it or it is final.
    """
    now = now or timezone.now()

    def give_up(guard: Any, row: dict[str, Any], attempts: int, lost: str) -> None:
        _finish(
            guard,
            run_id,
            attempts,
            RunStatus.FAILED,
            error=f"gave up after {attempts} attempts: the worker running it was lost{lost}",
            now=now,
        )

    held = claim_row(
        SimulationRun,
        run_id,
        fields=("document",),
        worker=worker,
        now=now,
        give_up=give_up,
        resume_attempt=resume_attempt,
        claimed={"started_at": Coalesce("started_at", Value(now)), "progress": 0},
        on_claimed=lambda row, attempt: _event(run_id, RunEventKind.CLAIMED, attempt, worker),
    )
    if held is None:
        return None
    row, attempt = held
    return Claim(run_id, attempt, row["document"])


def run_mark_progress(run_id: int, attempt: int, percent: int) -> bool:
    """Record progress (0–99) and a heartbeat; False if this attempt no longer holds the run
    (it was cancelled, or the reconciler gave it to another attempt)."""
    percent = max(0, min(99, int(percent)))
    return bool(
        SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, attempts=attempt).update(
            progress=percent, heartbeat_at=timezone.now()
        )
    )


def _finish(
    queryset: Any,
    run_id: int,
    attempt: int,
    status: RunStatus,
    *,
    now: datetime | None = None,
    error: str = "",
    result: Any = None,
) -> bool:
    """Move the rows of ``queryset`` (one run) to a final ``status``; True if it changed."""
    now = now or timezone.now()
    values: dict[str, Any] = {"status": status, "finished_at": now}
    if status == RunStatus.SUCCEEDED:
        values.update(result=result, progress=100, heartbeat_at=now, error="")
    elif status == RunStatus.FAILED:
        values["error"] = (error or "failed").strip()[:MAX_ERROR_CHARS] or "failed"
    kind = {
        RunStatus.SUCCEEDED: RunEventKind.SUCCEEDED,
        RunStatus.FAILED: RunEventKind.FAILED,
        RunStatus.CANCELLED: RunEventKind.CANCELLED,
    }[status]
    with transaction.atomic():
        changed = queryset.update(**values)
        if changed:
            _event(run_id, kind, attempt, values.get("error", ""))
    return bool(changed)


def run_mark_succeeded(run_id: int, attempt: int, result: Mapping[str, Any]) -> bool:
    """Store the result document, if ``attempt`` still holds the run (else False)."""
    qs = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, attempts=attempt)
    return _finish(qs, run_id, attempt, RunStatus.SUCCEEDED, result=finite(result))


def run_mark_failed(run_id: int, attempt: int, error: str) -> bool:
    """Fail the run with ``error``, if ``attempt`` still holds it (else False)."""
    qs = SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, attempts=attempt)
    return _finish(qs, run_id, attempt, RunStatus.FAILED, error=error)


def run_cancel(*, run: SimulationRun, user: Any) -> bool:
    """Cancel a queued or running run; False if it was already final.

    Only its owner or staff may cancel (PermissionDenied). A running worker notices at its
    next heartbeat and stops; its result, if any, is discarded.
    """
    if run.owner_id != user.pk and not user.is_staff:
        raise PermissionDenied("not your run")
    qs = SimulationRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES)
    current = SimulationRun.objects.filter(pk=run.pk).values_list("attempts", flat=True).first()
    return _finish(qs, run.pk, current or 0, RunStatus.CANCELLED)


def runs_reconcile(*, now: datetime | None = None, limit: int = 500) -> ReconcileReport:
    """Re-queue runs whose worker died and re-send runs whose message may be lost.

    * running with a heartbeat older than ``HETPLANNER_HEARTBEAT_STALE_S``: back to queued
      and re-sent (or failed when its attempts are used up);
    * queued and last sent more than ``HETPLANNER_QUEUED_STALE_S`` ago (e.g. the broker
      lost its data): re-sent. A duplicate message is harmless: claims are conditional.
    """
    now = now or timezone.now()
    report = ReconcileReport()

    def give_up(guard: Any, run_id: int, attempts: int, worker: str) -> None:
        if _finish(
            guard,
            run_id,
            attempts,
            RunStatus.FAILED,
            now=now,
            error=f"gave up after {attempts} attempts: the worker running it was lost "
            f"(last worker: {worker or 'unknown'})",
        ):
            report.failed.append(run_id)

    report.requeued = requeue_stale(
        SimulationRun,
        Q(),
        now=now,
        limit=limit,
        enqueue=lambda run_id: _enqueue(run_id),
        requeued_values={"progress": 0},
        on_requeued=lambda run_id, attempts, worker: _event(
            run_id, RunEventKind.REQUEUED, attempts, f"no heartbeat from {worker}"
        ),
        give_up=give_up,
    )
    report.resent = resend_lost(
        SimulationRun,
        Q(),
        queued={"status": RunStatus.QUEUED},
        now=now,
        limit=limit,
        enqueue=lambda run_id: _enqueue(run_id),
    )
    return report
