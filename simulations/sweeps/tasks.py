"""Celery tasks of sweeps: one task per chunk of configurations, the finaliser, the reconciler.

The same reliability rules as runs (:mod:`simulations.tasks`): ``acks_late`` and
``reject_on_worker_lost`` (a message whose worker died is delivered again), a claim by
conditional UPDATE that counts attempts in the database (at most
``HETPLANNER_MAX_ATTEMPTS``), a heartbeat thread, domain errors recorded on the
configuration and never retried, and only transient infrastructure errors retried with
backoff. A redelivered chunk skips the configurations already recorded, and recording is
unique per (sweep, index), so each configuration is recorded exactly once.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.db import connection as db_connection

from simulations.adapters import catalog_from_db, traces_from_db
from simulations.core import scenario as scenario_rules
from simulations.sweeps import services
from simulations.sweeps.expand import configuration_document, configuration_parameters
from simulations.sweeps.models import ChunkStatus, Sweep, SweepChunk
from simulations.tasks import DOMAIN_ERRORS, MAX_RETRIES, TRANSIENT_ERRORS, _describe, worker_id

logger = logging.getLogger(__name__)


class ChunkHeartbeat(threading.Thread):
    """Refreshes a chunk's heartbeat every ``interval`` seconds on its own DB connection;
    sets :attr:`lost` once the chunk is no longer this attempt's or the sweep was cancelled."""

    def __init__(self, claim: services.ChunkClaim, interval: float) -> None:
        super().__init__(name=f"heartbeat-chunk-{claim.chunk_id}", daemon=True)
        self.claim = claim
        self.interval = interval
        self.lost = threading.Event()
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop_event.wait(self.interval):
                try:
                    owned = services.chunk_heartbeat(self.claim)
                except DatabaseError:
                    logger.warning("chunk %s: heartbeat failed", self.claim.chunk_id, exc_info=True)
                    continue
                if not owned:
                    self.lost.set()
                    return
        finally:
            db_connection.close()

    def stop(self) -> None:
        """Stop beating and wait for the thread to end."""
        self._stop_event.set()
        self.join(timeout=max(5.0, 2 * self.interval))


def _backoff(task: Any) -> float:
    return get_exponential_backoff_interval(
        factor=2, retries=task.request.retries, maximum=60, full_jitter=True
    )


def _release(claim: services.ChunkClaim) -> None:
    """Hand the chunk back (queued) so the retry of this delivery can claim it again."""
    SweepChunk.objects.filter(
        pk=claim.chunk_id, status=ChunkStatus.RUNNING, attempts=claim.attempt
    ).update(status=ChunkStatus.QUEUED, attempts=claim.attempt - 1)


def _compute_chunk(claim: services.ChunkClaim, beat: ChunkHeartbeat) -> str:
    """Simulate and record every configuration of the chunk not recorded yet."""
    from simulations.core.simulate import simulate

    sweep = Sweep.objects.only("template", "axes").get(pk=claim.sweep_id)
    axes = services.sweep_axes(sweep)
    catalog = catalog_from_db()
    traces: dict[str, Any] = {}
    done = services.recorded_indexes(claim.sweep_id, claim.start, claim.stop)
    worker = worker_id()
    for index in range(claim.start, claim.stop):
        if beat.lost.is_set():
            return "abandoned"
        if index in done:
            continue
        document = configuration_document(sweep.template, axes, index)
        parameters = configuration_parameters(axes, index)
        missing = scenario_rules.trace_names(document) - set(traces)
        if missing:
            traces.update(traces_from_db(missing))
        try:
            spec = scenario_rules.parse_scenario(document, catalog, traces=traces)
            result = simulate(spec)
        except DOMAIN_ERRORS as exc:
            services.configuration_record(
                claim, index, parameters, error=_describe(exc), worker=worker
            )
        except (SoftTimeLimitExceeded, *TRANSIENT_ERRORS):
            raise
        except Exception as exc:
            # A bug, not bad input: recorded on the configuration, the sweep goes on.
            logger.exception("sweep %s configuration %s: internal error", claim.sweep_id, index)
            services.configuration_record(
                claim,
                index,
                parameters,
                error=f"internal error: {type(exc).__name__}: {exc}",
                worker=worker,
            )
        else:
            services.configuration_record(claim, index, parameters, result=result, worker=worker)
    services.chunk_done(claim)
    return "done"


@shared_task(
    bind=True,
    name="simulations.run_sweep_chunk",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    max_retries=MAX_RETRIES,
)
def run_sweep_chunk(self: Any, chunk_id: int) -> str:
    """Claim a chunk of a sweep, simulate its configurations and record each exactly once."""
    close_old_connections()
    try:
        claim = services.chunk_claim(chunk_id, worker=worker_id())
    except TRANSIENT_ERRORS as exc:
        raise self.retry(exc=exc, countdown=_backoff(self)) from exc
    if claim is None:
        return "not claimed"
    beat = ChunkHeartbeat(claim, settings.HETPLANNER_HEARTBEAT_INTERVAL_S)
    beat.start()
    try:
        return _compute_chunk(claim, beat)
    except SoftTimeLimitExceeded:
        limit = (self.request.timelimit or (None, None))[1] or settings.CELERY_TASK_SOFT_TIME_LIMIT
        services.chunk_give_up(claim, f"the chunk exceeded the time limit of {limit} s")
        return "timed out"
    except TRANSIENT_ERRORS as exc:
        if self.request.retries >= self.max_retries:
            services.chunk_give_up(claim, f"infrastructure error: {exc}")
            return "failed"
        try:
            _release(claim)
        except TRANSIENT_ERRORS:
            logger.warning("chunk %s: could not release; the reconciler will", chunk_id)
        raise self.retry(exc=exc, countdown=_backoff(self)) from exc
    finally:
        beat.stop()


@shared_task(
    bind=True,
    name="simulations.finalise_sweep",
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=MAX_RETRIES,
)
def finalise_sweep(self: Any, sweep_id: int) -> bool:
    """Write the summary of a fully recorded sweep and mark it finished (once)."""
    close_old_connections()
    try:
        return services.sweep_finalise(sweep_id)
    except TRANSIENT_ERRORS as exc:
        raise self.retry(exc=exc, countdown=_backoff(self)) from exc


@shared_task(name="simulations.reconcile_sweeps")
def reconcile_sweeps() -> dict[str, list[int]]:
    """Re-queue chunks whose worker died, re-send lost messages, finalise complete sweeps."""
    close_old_connections()
    report = services.sweeps_reconcile()
    if report.requeued or report.resent or report.finalised:
        logger.info(
            "reconcile sweeps: requeued chunks %s, resent chunks %s, finalised sweeps %s",
            report.requeued,
            report.resent,
            report.finalised,
        )
    return {"requeued": report.requeued, "resent": report.resent, "finalised": report.finalised}
