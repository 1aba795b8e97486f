"""Celery tasks: run a simulation for a stored run, and reconcile runs whose worker died.

Reliability rules:

* Tasks take a run id only. ``acks_late`` + ``reject_on_worker_lost``: a message is
  acknowledged after the task returns, and re-queued if the worker process dies.
* The task claims the run with one conditional UPDATE (:func:`run_services.run_claim`); if no
  row changed (another worker holds it, or it is final) it returns. Every claim counts an
  attempt in the database; a run is delivered at most ``HETPLANNER_MAX_ATTEMPTS`` times.
* A heartbeat thread writes the progress (throttled to one write per
  ``HETPLANNER_HEARTBEAT_INTERVAL_S``) and the heartbeat; when the write finds the run is
  no longer this attempt's (cancelled, or re-queued by the reconciler) the simulation is
  stopped at its next progress report.
* The outcome is stored by a conditional update from ``running`` under the claimed attempt,
  so it is recorded exactly once.
* Domain errors (bad spec, unknown policy, model does not fit, invalid scenario) and the
  soft time limit fail the run with their message and are not retried. Only transient
  infrastructure errors (database or broker unreachable) are retried, with exponential
  backoff; the retry resumes the same claim.
* :func:`reconcile_runs` (periodic, via celery beat) re-queues runs whose heartbeat went
  stale and re-sends queued runs whose message may be lost.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections

from simulations.jobs import (
    DOMAIN_ERRORS,
    JOB_TASK_OPTIONS,
    TIME_LIMITS,
    TRANSIENT_ERRORS,
    Heartbeat,
    RunAbandonedError,
    backoff,
    describe_error,
    soft_time_limit,
    worker_id,
)
from simulations.runs import services as run_services
from simulations.scenarios import services as scenario_services

logger = logging.getLogger(__name__)


class RunHeartbeat(Heartbeat):
    """The heartbeat of a run: writes its progress (:func:`run_services.run_mark_progress`)."""

    def mark(self, percent: int) -> bool:
        return run_services.run_mark_progress(self.run_id, self.attempt, percent)


def _simulate(claim: run_services.Claim) -> dict[str, Any]:
    """Parse the run's document against today's catalog and simulate it."""
    from simulations.core.simulate import simulate

    spec = scenario_services.scenario_validate(claim.document)
    beat = RunHeartbeat(claim.run_id, claim.attempt, settings.HETPLANNER_HEARTBEAT_INTERVAL_S)
    beat.start()
    try:
        return simulate(spec, progress=beat.progress)
    finally:
        beat.stop()


@shared_task(name="simulations.run_simulation", **JOB_TASK_OPTIONS, **TIME_LIMITS)
def run_simulation(self: Any, run_id: int, resume_attempt: int | None = None) -> str:
    """Claim run ``run_id``, simulate it and store the outcome exactly once."""

    def retry(exc: BaseException, attempt: int | None) -> Any:
        countdown = backoff(self)
        logger.warning("run %s: transient error, retrying in %ss: %s", run_id, countdown, exc)
        return self.retry(
            exc=exc,
            countdown=countdown,
            args=(),
            kwargs={"run_id": run_id, "resume_attempt": attempt},
        )

    close_old_connections()
    try:
        claim = run_services.run_claim(run_id, worker=worker_id(), resume_attempt=resume_attempt)
    except TRANSIENT_ERRORS as exc:
        raise retry(exc, resume_attempt) from exc
    if claim is None:
        return "not claimed"
    try:
        result = _simulate(claim)
    except RunAbandonedError:
        logger.info("run %s: attempt %s stopped (cancelled or re-queued)", run_id, claim.attempt)
        return "abandoned"
    except DOMAIN_ERRORS as exc:
        run_services.run_mark_failed(run_id, claim.attempt, describe_error(exc))
        return "failed"
    except SoftTimeLimitExceeded:
        limit = soft_time_limit(self)
        run_services.run_mark_failed(run_id, claim.attempt, f"exceeded the time limit of {limit} s")
        return "failed"
    except TRANSIENT_ERRORS as exc:
        if self.request.retries >= self.max_retries:
            run_services.run_mark_failed(run_id, claim.attempt, f"infrastructure error: {exc}")
            return "failed"
        raise retry(exc, claim.attempt) from exc
    except Exception as exc:
        # A bug, not bad input: retrying a deterministic simulation would fail the same way.
        logger.exception("run %s: internal error", run_id)
        run_services.run_mark_failed(
            run_id, claim.attempt, f"internal error: {type(exc).__name__}: {exc}"
        )
        return "failed"
    try:
        stored = run_services.run_mark_succeeded(run_id, claim.attempt, result)
    except TRANSIENT_ERRORS as exc:
        raise retry(exc, claim.attempt) from exc
    return "succeeded" if stored else "discarded"


@shared_task(name="simulations.reconcile_runs")
def reconcile_runs() -> dict[str, list[int]]:
    """Re-queue runs stuck with a stale heartbeat; re-send queued runs whose message is lost."""
    close_old_connections()
    report = run_services.runs_reconcile()
    if report.requeued or report.resent or report.failed:
        logger.info(
            "reconcile: requeued %s, resent %s, failed %s",
            report.requeued,
            report.resent,
            report.failed,
        )
    return {"requeued": report.requeued, "resent": report.resent, "failed": report.failed}
