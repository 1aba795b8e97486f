"""Celery tasks: run a simulation for a stored run, and reconcile runs whose worker died.

Reliability rules (issue 2 and 8):

* Tasks take a run id only. ``acks_late`` + ``reject_on_worker_lost``: a message is
  acknowledged after the task returns, and re-queued if the worker process dies.
* The task claims the run with one conditional UPDATE (:func:`services.run_claim`); if no
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
import os
import socket
import threading
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.db import connection as db_connection

from simulations import services
from simulations.core.errors import (
    CapacityError,
    ScenarioValidationError,
    SpecError,
    UnknownPolicyError,
)
from simulations.jobs import (
    JOB_TASK_OPTIONS,
    TIME_LIMITS,
    TRANSIENT_ERRORS,
    backoff,
    soft_time_limit,
)

logger = logging.getLogger(__name__)

#: Errors that describe the scenario, not the infrastructure: fail the run, never retry.
DOMAIN_ERRORS = (SpecError, CapacityError, UnknownPolicyError, ScenarioValidationError)


class RunAbandonedError(Exception):
    """This attempt no longer holds the run (it was cancelled or handed to another attempt)."""


def worker_id() -> str:
    """``host:pid`` of this worker process (stored on the run while it holds it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Heartbeat(threading.Thread):
    """Writes the latest progress and a heartbeat every ``interval`` seconds.

    Runs beside the simulation so the heartbeat does not depend on how often the core
    reports progress. Uses its own database connection (Django's are per thread).
    """

    def __init__(self, run_id: int, attempt: int, interval: float) -> None:
        super().__init__(name=f"heartbeat-run-{run_id}", daemon=True)
        self.run_id = run_id
        self.attempt = attempt
        self.interval = interval
        self.fraction = 0.0
        #: What the log calls the job when a heartbeat write fails.
        self.label = f"run {run_id}"
        self.lost = threading.Event()
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop_event.wait(self.interval):
                try:
                    owned = self.mark(int(self.fraction * 100))
                except DatabaseError:
                    logger.warning("%s: heartbeat write failed", self.label, exc_info=True)
                    continue
                if not owned:
                    self.lost.set()
                    return
        finally:
            db_connection.close()

    def mark(self, percent: int) -> bool:
        """Write the progress and the heartbeat; False once the job is no longer this
        attempt's. (Other jobs — plans — reuse the thread by overriding this.)"""
        return services.run_mark_progress(self.run_id, self.attempt, percent)

    def stop(self) -> None:
        """Stop beating and wait for the thread to end."""
        self._stop_event.set()
        self.join(timeout=max(5.0, 2 * self.interval))

    def progress(self, fraction: float) -> None:
        """Progress callback for the core; raises RunAbandonedError once the run is not ours."""
        if self.lost.is_set():
            raise RunAbandonedError
        self.fraction = min(max(float(fraction), 0.0), 1.0)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ScenarioValidationError):
        return f"invalid scenario: {exc}"
    if isinstance(exc, UnknownPolicyError):
        return str(exc)
    if isinstance(exc, CapacityError):
        return f"does not fit: {exc}"
    return str(exc) or type(exc).__name__


def _simulate(claim: services.Claim) -> dict[str, Any]:
    """Parse the run's document against today's catalog and simulate it."""
    from simulations.core.simulate import simulate

    spec = services.scenario_validate(claim.document)
    beat = Heartbeat(claim.run_id, claim.attempt, settings.HETPLANNER_HEARTBEAT_INTERVAL_S)
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
        claim = services.run_claim(run_id, worker=worker_id(), resume_attempt=resume_attempt)
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
        services.run_mark_failed(run_id, claim.attempt, _describe(exc))
        return "failed"
    except SoftTimeLimitExceeded:
        limit = soft_time_limit(self)
        services.run_mark_failed(run_id, claim.attempt, f"exceeded the time limit of {limit} s")
        return "failed"
    except TRANSIENT_ERRORS as exc:
        if self.request.retries >= self.max_retries:
            services.run_mark_failed(run_id, claim.attempt, f"infrastructure error: {exc}")
            return "failed"
        raise retry(exc, claim.attempt) from exc
    except Exception as exc:
        # A bug, not bad input: retrying a deterministic simulation would fail the same way.
        logger.exception("run %s: internal error", run_id)
        services.run_mark_failed(
            run_id, claim.attempt, f"internal error: {type(exc).__name__}: {exc}"
        )
        return "failed"
    try:
        stored = services.run_mark_succeeded(run_id, claim.attempt, result)
    except TRANSIENT_ERRORS as exc:
        raise retry(exc, claim.attempt) from exc
    return "succeeded" if stored else "discarded"


@shared_task(name="simulations.parse_trace", **JOB_TASK_OPTIONS, **TIME_LIMITS)
def parse_trace(self: Any, trace_id: int, resume_attempt: int | None = None) -> str:
    """Claim the parse of an uploaded trace (one conditional update) and store its columns
    or the error naming the line, once (issue 16: large uploads leave the web request)."""
    close_old_connections()
    attempt = resume_attempt
    try:
        attempt = services.trace_parse_claim(trace_id, resume_attempt=resume_attempt)
        if attempt is None:
            return "skipped"
        return services.trace_parse_run(trace_id, attempt)
    except TRANSIENT_ERRORS as exc:
        countdown = backoff(self)
        logger.warning("trace %s: transient error, retrying in %ss: %s", trace_id, countdown, exc)
        raise self.retry(
            exc=exc,
            countdown=countdown,
            args=(),
            kwargs={"trace_id": trace_id, "resume_attempt": attempt},
        ) from exc


@shared_task(name="simulations.reconcile_runs")
def reconcile_runs() -> dict[str, list[int]]:
    """Re-queue runs stuck with a stale heartbeat; re-send queued runs whose message is lost."""
    close_old_connections()
    report = services.runs_reconcile()
    if report.requeued or report.resent or report.failed:
        logger.info(
            "reconcile: requeued %s, resent %s, failed %s",
            report.requeued,
            report.resent,
            report.failed,
        )
    return {"requeued": report.requeued, "resent": report.resent, "failed": report.failed}


@shared_task(name="simulations.reconcile_traces")
def reconcile_traces() -> dict[str, list[int]]:
    """Re-send the parse of uploaded traces whose message was refused or lost."""
    close_old_connections()
    report = services.traces_reconcile()
    if report.resent:
        logger.info("reconcile traces: resent %s", report.resent)
    return {"resent": report.resent}
