"""Celery tasks of sweeps: one task per chunk of configurations, the finaliser, the reconciler.

The same reliability rules as runs (:mod:`simulations.runs.tasks`): ``acks_late`` and
``reject_on_worker_lost`` (a message whose worker died is delivered again), a claim by
conditional UPDATE that counts attempts in the database (at most
``HETPLANNER_MAX_ATTEMPTS``), a heartbeat thread, domain errors recorded on the
configuration and never retried, and only transient infrastructure errors retried with
backoff. A redelivered chunk skips the configurations already recorded, and recording is
unique per (sweep, index), so each configuration is recorded exactly once.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import close_old_connections

from simulations.adapters import catalog_from_db, traces_from_db
from simulations.core import scenario as scenario_rules
from simulations.jobs import (
    DOMAIN_ERRORS,
    JOB_TASK_OPTIONS,
    TIME_LIMITS,
    TRANSIENT_ERRORS,
    Heartbeat,
    backoff,
    describe_error,
    run_chunk,
    worker_id,
)
from simulations.sweeps import services
from simulations.sweeps.expand import configuration_document, configuration_parameters
from simulations.sweeps.models import Sweep

logger = logging.getLogger(__name__)


class ChunkHeartbeat(Heartbeat):
    """The run heartbeat thread, refreshing a sweep chunk's heartbeat; sets :attr:`lost`
    once the chunk is no longer this attempt's or the sweep was cancelled."""

    def __init__(self, claim: services.ChunkClaim, interval: float) -> None:
        super().__init__(claim.sweep_id, claim.attempt, interval)
        self.name = f"heartbeat-chunk-{claim.chunk_id}"
        self.label = f"chunk {claim.chunk_id}"
        self.claim = claim

    def mark(self, percent: int) -> bool:
        return services.chunk_heartbeat(self.claim)


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
                claim, index, parameters, error=describe_error(exc), worker=worker
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


@shared_task(name="simulations.run_sweep_chunk", **JOB_TASK_OPTIONS, **TIME_LIMITS)
def run_sweep_chunk(self: Any, chunk_id: int) -> str:
    """Claim a chunk of a sweep, simulate its configurations and record each exactly once."""
    # No domain_errors: _compute_chunk records a configuration's domain error on that
    # configuration and goes on with the others.
    return run_chunk(
        self,
        chunk_id,
        worker=worker_id(),
        claim=services.chunk_claim,
        heartbeat=ChunkHeartbeat,
        work=_compute_chunk,
        give_up=services.chunk_give_up,
        release=services.chunk_release,
        what=f"chunk {chunk_id}: could not release",
    )


@shared_task(name="simulations.finalise_sweep", **JOB_TASK_OPTIONS)
def finalise_sweep(self: Any, sweep_id: int) -> bool:
    """Write the summary of a fully recorded sweep and mark it finished (once)."""
    close_old_connections()
    try:
        return services.sweep_finalise(sweep_id)
    except TRANSIENT_ERRORS as exc:
        raise self.retry(exc=exc, countdown=backoff(self)) from exc


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
