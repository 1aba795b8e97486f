"""Celery tasks of the capacity search: the stage task (screen, then decide after each round),
the confirmation chunk task, and the reconciler.

Flow: :func:`advance_plan` claims the screen stage, screens the space and fans the first
round out as a Celery group of :func:`run_plan_chunk` tasks; each chunk records its
configurations (unique per plan and key, the round's counter incremented with each row);
the chunk that completes the round moves the plan to the decide stage, whose
:func:`advance_plan` delivery reads every result, and either fans out the next round or —
when nothing more can change the answer — runs the load sensitivity and stores the result.

Reliability, as for runs (:mod:`simulations.runs.tasks`; the shared helpers are
:mod:`simulations.jobs`): ``acks_late`` and ``reject_on_worker_lost``; soft < hard time
limits; claims by conditional UPDATE that
count deliveries in the database (at most ``HETPLANNER_MAX_ATTEMPTS``); a heartbeat thread
(:class:`simulations.jobs.Heartbeat`); domain errors fail the plan with their message and
are not retried; transient infrastructure errors are retried with backoff; messages are
sent on commit; results are ignored (``task_ignore_result``), state lives in the database.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import close_old_connections

from simulations.core.planner import Evaluation, PlanSpec, Search, evaluate_config
from simulations.core.planner.report import build_report
from simulations.core.planner.sensitivity import load_sensitivity
from simulations.core.planner.space import config_from_dict, config_to_dict
from simulations.jobs import (
    DOMAIN_ERRORS,
    JOB_TASK_OPTIONS,
    TIME_LIMITS,
    TRANSIENT_ERRORS,
    Heartbeat,
    RunAbandonedError,
    claim_or_retry,
    collector_paused_then_settled,
    describe_error,
    retry_or_give_up,
    run_chunk,
    soft_time_limit,
    thaw_heap,
    worker_id,
)
from simulations.plans import services
from simulations.plans.models import Plan

logger = logging.getLogger(__name__)

#: Screened searches kept per worker process (a plan's decide stages reuse its screen).
_CACHE_SIZE = 2
_searches: OrderedDict[tuple[int, str], Search] = OrderedDict()
_specs: OrderedDict[tuple[int, str], PlanSpec] = OrderedDict()


class StageHeartbeat(Heartbeat):
    """The run heartbeat thread, writing a plan stage's progress and heartbeat."""

    def __init__(self, claim: services.StageClaim, interval: float) -> None:
        super().__init__(claim.plan_id, claim.attempt, interval)
        self.name = f"heartbeat-plan-{claim.plan_id}"
        self.claim = claim
        self.fraction = claim.progress / 100

    def progress(self, fraction: float) -> None:
        """Progress callback for the planner; never moves the stored progress back."""
        super().progress(max(self.fraction, fraction))

    def mark(self, percent: int) -> bool:
        return services.stage_heartbeat(self.claim, percent)


class ChunkHeartbeat(Heartbeat):
    """The run heartbeat thread, refreshing a confirmation chunk's heartbeat."""

    def __init__(self, claim: services.ChunkClaim, interval: float) -> None:
        super().__init__(claim.plan_id, claim.attempt, interval)
        self.name = f"heartbeat-plan-chunk-{claim.chunk_id}"
        self.claim = claim

    def mark(self, percent: int) -> bool:
        return services.chunk_heartbeat(self.claim)


def _digest(document: Any) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _CACHE_SIZE:
        # A search may hold reference cycles: let the collector see it again.
        thaw_heap()
        cache.popitem(last=False)


def _plan_spec(plan_id: int, document: Any) -> PlanSpec:
    key = (plan_id, _digest(document))
    spec = _specs.get(key)
    if spec is None:
        spec = services.plan_validate(document)
        _remember(_specs, key, spec)
    return spec


def _search(plan_id: int, document: Any, beat: StageHeartbeat) -> Search:
    """The plan's screened search with every recorded result (screen reused in-process)."""
    key = (plan_id, _digest(document))
    search = _searches.get(key)
    if search is None:
        spec = _plan_spec(plan_id, document)
        search = Search(spec, progress=beat.progress)
        _remember(_searches, key, search)
    search.progress = beat.progress
    search.results = {}
    search.engine_seconds = 0.0
    for raw in services.recorded_evaluations(plan_id):
        ev = Evaluation.from_dict(raw)
        if ev.key not in search.by_key:
            raise services_error(
                f"configuration {ev.key!r} is no longer in the space (the catalog changed "
                "while the plan ran)"
            )
        search.record(ev)
    return search


def services_error(message: str) -> Exception:
    """A domain error for a plan whose stored results no longer match its space."""
    from simulations.core.errors import SpecError

    return SpecError("document", message)


def _advance(claim: services.StageClaim, beat: StageHeartbeat) -> str:
    search = _search(claim.plan_id, claim.document, beat)
    search.rounds = claim.round
    counts = {
        "admitted": search.admitted,
        "survivors": len(search.candidates),
        "confirmed": len(search.results),
    }
    batch = search.next_round()
    if batch:
        done = len(search.results)
        pending = len(search.pending())
        start = 10 + 75 * done // max(1, done + pending)
        end = 10 + 75 * (done + len(batch)) // max(1, done + pending)
        stored = services.stage_start_round(
            claim,
            [config_to_dict(c) for c in batch],
            progress=start,
            progress_end=end,
            counts=counts,
        )
        return "round" if stored else "abandoned"
    beat.progress(0.85)
    sens = None
    if search.plan.search.sensitivity:

        def sub(frac: float) -> None:
            beat.progress(0.85 + 0.14 * min(max(frac, 0.0), 1.0))

        sens = load_sensitivity(search, progress=sub)
    report = build_report(search, sens)
    return "succeeded" if services.stage_finish(claim, report, counts) else "abandoned"


@shared_task(name="simulations.advance_plan", **JOB_TASK_OPTIONS, **TIME_LIMITS)
def advance_plan(self: Any, plan_id: int) -> str:
    """Claim the plan's screen or decide stage and move the search on (see the module)."""
    close_old_connections()
    claim = claim_or_retry(self, services.stage_claim, plan_id, worker_id())
    if claim is None:
        return "not claimed"
    beat = StageHeartbeat(claim, settings.HETPLANNER_HEARTBEAT_INTERVAL_S)
    beat.start()
    try:
        with collector_paused_then_settled():
            return _advance(claim, beat)
    except RunAbandonedError:
        logger.info("plan %s: stage %s attempt %s stopped", plan_id, claim.stage, claim.attempt)
        return "abandoned"
    except DOMAIN_ERRORS as exc:
        services.stage_fail(claim, describe_error(exc))
        return "failed"
    except SoftTimeLimitExceeded:
        limit = soft_time_limit(self)
        services.stage_fail(claim, f"the {claim.stage} stage exceeded the time limit of {limit} s")
        return "failed"
    except TRANSIENT_ERRORS as exc:
        return retry_or_give_up(
            self,
            exc,
            give_up=lambda error: services.stage_fail(claim, error),
            release=lambda: services.stage_release(claim),
            what=f"plan {plan_id}: could not release the stage",
        )
    except Exception as exc:
        # A bug, not bad input: retrying a deterministic search would fail the same way.
        logger.exception("plan %s: internal error", plan_id)
        services.stage_fail(claim, f"internal error: {type(exc).__name__}: {exc}")
        return "failed"
    finally:
        beat.stop()


def _confirm(claim: services.ChunkClaim, beat: ChunkHeartbeat) -> str:
    document = Plan.objects.filter(pk=claim.plan_id).values_list("document", flat=True).first()
    if document is None:
        return "abandoned"
    spec = _plan_spec(claim.plan_id, document)
    done = services.recorded_keys(claim.plan_id, [c["key"] for c in claim.configs])
    worker = worker_id()
    for raw in claim.configs:
        if beat.lost.is_set():
            return "abandoned"
        if raw["key"] in done:
            continue
        config = config_from_dict(raw, spec)
        try:
            ev = evaluate_config(spec, config)
        except (SoftTimeLimitExceeded, *TRANSIENT_ERRORS):
            raise
        except Exception as exc:
            # A bug in one configuration's simulation: recorded with no verdict, and the
            # plan goes on (its result then says it is not exhaustive).
            logger.exception("plan %s configuration %s: internal error", claim.plan_id, raw["key"])
            ev = Evaluation(
                config.key,
                False,
                error=f"no verdict: internal error: {type(exc).__name__}: {exc}",
                unknown=True,
            )
        services.result_record(claim, ev.as_dict(), capex_usd=config.capex_usd, worker=worker)
    services.chunk_done(claim)
    return "done"


@shared_task(name="simulations.run_plan_chunk", **JOB_TASK_OPTIONS, **TIME_LIMITS)
def run_plan_chunk(self: Any, chunk_id: int) -> str:
    """Claim a confirmation chunk, simulate its configurations and record each once."""
    return run_chunk(
        self,
        chunk_id,
        worker=worker_id(),
        claim=services.chunk_claim,
        heartbeat=ChunkHeartbeat,
        work=_confirm,
        give_up=services.chunk_give_up,
        release=services.chunk_release,
        what=f"plan chunk {chunk_id}: could not release",
        # The chunk parses the plan's document again (_plan_spec, config_from_dict); when
        # that fails, retrying would fail the same way, so the chunk gives up at once.
        domain_errors=DOMAIN_ERRORS,
        describe=describe_error,
        # Confirmation is one of the simulating phases the pause was measured on (see
        # collector_paused_then_settled).
        pause_collector=True,
    )


@shared_task(name="simulations.reconcile_plans", ignore_result=True)
def reconcile_plans() -> dict[str, list[int]]:
    """Re-send stage and chunk tasks that lost workers or messages left behind."""
    close_old_connections()
    report = services.plans_reconcile()
    out = {
        "stages_requeued": report.stages_requeued,
        "stages_resent": report.stages_resent,
        "chunks_requeued": report.chunks_requeued,
        "chunks_resent": report.chunks_resent,
        "rounds_completed": report.rounds_completed,
    }
    if any(out.values()):
        logger.info("reconcile plans: %s", out)
    return out
