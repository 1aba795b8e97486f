"""Every write of the capacity-search job: create, claim, record, advance, cancel, reconcile.

The same rules as runs and sweeps (:mod:`simulations.runs.services`,
:mod:`simulations.sweeps.services`):

* every transition is one conditional UPDATE (``WHERE status/stage/round/attempts = …``),
  so a final state is never left and only the delivery that holds a claim moves the plan;
* a stage task (screen, decide) or a chunk is *claimed* queued → running, counting its
  deliveries in the database (at most ``HETPLANNER_MAX_ATTEMPTS``; then the plan fails, or
  the chunk's unrecorded configurations are recorded with no verdict);
* a configuration is recorded once: its :class:`~simulations.plans.models.PlanResult`
  row is unique on (plan, key), and the round's ``round_done`` counter is incremented in
  the same transaction, only when the row was inserted;
* task messages are sent on commit; :func:`plans_reconcile` re-sends what a lost worker or
  a lost message left behind.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from simulations.adapters import catalog_from_db, traces_from_db
from simulations.choices import ACTIVE_STATUSES, ChunkStatus, RunStatus
from simulations.core.jsonsafe import finite
from simulations.core.planner import PlanSpec, parse_plan, trace_names
from simulations.jobs import (
    MAX_ERROR_CHARS,
    ClaimColumns,
    chunk_claim_row,
    chunk_heartbeat_row,
    chunk_release_row,
    claim_row,
    mark_unsent,
    quota_check,
    requeue_stale,
    resend_lost,
)
from simulations.plans.models import Plan, PlanChunk, PlanResult, PlanStage
from simulations.plans.models import StageStatus as Stage
from simulations.scenarios.services import (
    _document_size_check,
    _storable_check,
    trace_references_set,
    visible_runtimes,
    visible_traces,
)

logger = logging.getLogger(__name__)

#: Where a plan keeps the state of its screen and decide stages (its own status is the
#: plan's lifecycle; its chunks have theirs).
STAGE_COLUMNS = ClaimColumns(
    status="stage_status", queued=Stage.QUEUED, running=Stage.RUNNING, attempts="stage_attempts"
)

#: Configurations one chunk task confirms (a round of ``round_size`` is split into chunks).
DEFAULT_CHUNK_SIZE = 2
#: Plans a user may have queued or running at once (setting
#: ``HETPLANNER_MAX_ACTIVE_PLANS_PER_USER`` overrides it).
DEFAULT_MAX_ACTIVE_PLANS = 3


def chunk_size() -> int:
    """Configurations per confirmation chunk (``HETPLANNER_PLAN_CHUNK_SIZE``)."""
    return max(1, int(getattr(settings, "HETPLANNER_PLAN_CHUNK_SIZE", DEFAULT_CHUNK_SIZE)))


# --- messages ----------------------------------------------------------------------------------


def _enqueue_stage(plan_id: int) -> None:
    """Send the plan's stage task; a broker failure is logged, the reconciler resends."""
    from simulations.plans.tasks import advance_plan

    try:
        advance_plan.delay(plan_id)
    except Exception:
        logger.exception("could not queue plan %s; the reconciler will retry", plan_id)
        mark_unsent(Plan, [plan_id], queued={"stage_status": Stage.QUEUED})


def _enqueue_chunks(chunk_ids: Sequence[int]) -> None:
    """Fan a round's chunks out as one Celery group (one message per chunk)."""
    from celery import group

    from simulations.plans.tasks import run_plan_chunk

    if not chunk_ids:
        return
    try:
        group(run_plan_chunk.si(cid) for cid in chunk_ids).apply_async()
    except Exception:
        logger.exception("could not queue plan chunks %s; the reconciler will retry", chunk_ids)
        mark_unsent(PlanChunk, chunk_ids, queued={"status": ChunkStatus.QUEUED})


# --- create, validate, cancel ------------------------------------------------------------------


def plan_validate(document: Any, *, user: Any = None) -> PlanSpec:
    """Parse a plan document against the catalog in the database.

    Trace names resolve to uploaded traces only (never to server paths) — with ``user``,
    only to the traces that user may use. Raises ScenarioValidationError keyed by JSON path.
    """
    _document_size_check(document)
    traces = traces_from_db(trace_names(document), visible_traces(user))
    spec = parse_plan(document, catalog_from_db(visible_runtimes(user)), traces=traces)
    _storable_check(document)
    return spec


def plan_create(*, spec: Any, owner: Any) -> Plan:
    """Validate and store the plan document ``spec`` owned by ``owner``; queue its search on
    commit.

    Raises ScenarioValidationError (every problem, by JSON path; nothing stored) or
    :class:`~simulations.jobs.QuotaExceededError` when ``owner`` already has
    ``HETPLANNER_MAX_ACTIVE_PLANS_PER_USER``
    plans queued or running.
    """
    parsed = plan_validate(spec, user=owner)
    now = timezone.now()
    limit = int(getattr(settings, "HETPLANNER_MAX_ACTIVE_PLANS_PER_USER", DEFAULT_MAX_ACTIVE_PLANS))
    with transaction.atomic():
        quota_check(
            owner,
            Plan.objects.filter(owner=owner, status__in=ACTIVE_STATUSES),
            what="plans",
            limit=limit,
        )
        plan = Plan.objects.create(
            owner=owner,
            name=parsed.name,
            document=spec,
            status=RunStatus.QUEUED,
            stage=PlanStage.SCREEN,
            stage_status=Stage.QUEUED,
            enqueued_at=now,
        )
        trace_references_set(trace_names(spec), plan=plan)
        plan_id = plan.pk
        transaction.on_commit(lambda: _enqueue_stage(plan_id))
    return plan


def plan_cancel(*, plan: Plan, user: Any) -> bool:
    """Cancel a queued or running plan; False if it was already final.

    Only its owner or staff may cancel (PermissionDenied). Workers notice at their next
    heartbeat or configuration; results recorded so far stay readable.
    """
    if plan.owner_id != user.pk and not user.is_staff:
        raise PermissionDenied("not your plan")
    return bool(
        Plan.objects.filter(pk=plan.pk, status__in=ACTIVE_STATUSES).update(
            status=RunStatus.CANCELLED, finished_at=timezone.now()
        )
    )


# --- the screen and decide stages -------------------------------------------------------------


@dataclass(frozen=True)
class StageClaim:
    """A worker's hold on a plan's screen or decide stage."""

    plan_id: int
    stage: str
    round: int
    attempt: int
    document: Any
    progress: int = 0


def _held(claim: StageClaim) -> Any:
    return Plan.objects.filter(
        pk=claim.plan_id,
        status=RunStatus.RUNNING,
        stage=claim.stage,
        round=claim.round,
        stage_status=Stage.RUNNING,
        stage_attempts=claim.attempt,
    )


def _fail(queryset: Any, error: str, now: datetime | None = None) -> bool:
    return bool(
        queryset.update(
            status=RunStatus.FAILED,
            finished_at=now or timezone.now(),
            error=(error.strip() or "failed")[:MAX_ERROR_CHARS],
        )
    )


def stage_claim(plan_id: int, *, worker: str, now: datetime | None = None) -> StageClaim | None:
    """Claim the plan's current screen/decide stage for this delivery
    (:func:`~simulations.jobs.claim_row` on the stage columns), or return None.

    Claimable: the stage is queued, or running with a stale heartbeat (its worker died).
    A stage that already used ``HETPLANNER_MAX_ATTEMPTS`` deliveries fails the plan.
    """
    now = now or timezone.now()

    def scope(row: dict[str, Any]) -> Q | None:
        if row["status"] not in ACTIVE_STATUSES or row["stage"] == PlanStage.CONFIRM:
            return None
        return Q(status__in=ACTIVE_STATUSES, stage=row["stage"], round=row["round"])

    def give_up(guard: Any, row: dict[str, Any], attempts: int, lost: str) -> None:
        _fail(
            guard,
            f"gave up after {attempts} attempts: the worker running the {row['stage']} "
            f"stage was lost{lost}",
            now,
        )

    held = claim_row(
        Plan,
        plan_id,
        columns=STAGE_COLUMNS,
        fields=("status", "stage", "round", "document", "progress"),
        worker=worker,
        now=now,
        give_up=give_up,
        scope=scope,
        claimed={
            "status": RunStatus.RUNNING,
            "started_at": Coalesce("started_at", Value(now)),
        },
    )
    if held is None:
        return None
    row, attempt = held
    return StageClaim(
        plan_id, row["stage"], row["round"], attempt, row["document"], row["progress"]
    )


def stage_heartbeat(claim: StageClaim, percent: int) -> bool:
    """Record progress (0–99) and a heartbeat; False once this delivery no longer holds the
    stage (the plan was cancelled, or the reconciler handed the stage to another)."""
    percent = max(claim.progress, min(99, int(percent)))
    return bool(_held(claim).update(progress=percent, heartbeat_at=timezone.now()))


def stage_start_round(
    claim: StageClaim,
    configs: Sequence[Mapping[str, Any]],
    *,
    progress: int,
    progress_end: int,
    counts: Mapping[str, int],
    size: int | None = None,
) -> bool:
    """Start the next confirmation round: store its chunks and fan them out on commit.

    ``configs`` are planner configuration dicts (``config_to_dict``); ``counts`` updates
    ``admitted``/``survivors``/``confirmed``. False if this delivery no longer holds the
    stage (nothing is stored then).
    """
    size = size or chunk_size()
    now = timezone.now()
    new_round = claim.round + 1
    with transaction.atomic():
        changed = _held(claim).update(
            stage=PlanStage.CONFIRM,
            stage_status=Stage.QUEUED,
            stage_attempts=0,
            round=new_round,
            round_total=len(configs),
            round_done=0,
            progress=max(0, min(99, progress)),
            round_progress_end=max(0, min(99, progress_end)),
            heartbeat_at=now,
            worker="",
            **{k: int(v) for k, v in counts.items()},
        )
        if not changed:
            return False
        PlanChunk.objects.bulk_create(
            PlanChunk(
                plan_id=claim.plan_id,
                round=new_round,
                number=n,
                configs=finite(list(configs[start : start + size])),
                enqueued_at=now,
            )
            for n, start in enumerate(range(0, len(configs), size))
        )
        ids = list(
            PlanChunk.objects.filter(plan_id=claim.plan_id, round=new_round)
            .order_by("number")
            .values_list("pk", flat=True)
        )
        transaction.on_commit(lambda: _enqueue_chunks(ids))
    return True


def stage_finish(claim: StageClaim, result: Mapping[str, Any], counts: Mapping[str, int]) -> bool:
    """Store the plan's result document and mark it succeeded (only this delivery can)."""
    now = timezone.now()
    return bool(
        _held(claim).update(
            status=RunStatus.SUCCEEDED,
            result=finite(result),
            progress=100,
            finished_at=now,
            heartbeat_at=now,
            error="",
            **{k: int(v) for k, v in counts.items()},
        )
    )


def stage_fail(claim: StageClaim, error: str) -> bool:
    """Fail the plan with ``error`` if this delivery still holds its stage."""
    return _fail(_held(claim), error)


def stage_release(claim: StageClaim) -> bool:
    """Hand the stage back (queued, this attempt not counted) for a retry of the delivery."""
    return bool(_held(claim).update(stage_status=Stage.QUEUED, stage_attempts=claim.attempt - 1))


def recorded_evaluations(plan_id: int) -> list[dict[str, Any]]:
    """Every configuration result of the plan so far (the planner's evaluation dicts)."""
    return list(
        PlanResult.objects.filter(plan_id=plan_id)
        .order_by("capex_usd", "key")
        .values_list("evaluation", flat=True)
    )


# --- confirmation chunks -----------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkClaim:
    """A worker's hold on a chunk: which configurations, and under which attempt."""

    chunk_id: int
    plan_id: int
    round: int
    attempt: int
    configs: list[dict[str, Any]]


def chunk_claim(chunk_id: int, *, worker: str, now: datetime | None = None) -> ChunkClaim | None:
    """Claim a chunk for this delivery with one conditional UPDATE, or return None.

    Claimable: queued, or running with a stale heartbeat. A chunk that already used its
    ``HETPLANNER_MAX_ATTEMPTS`` deliveries has its unrecorded configurations recorded with no
    verdict instead (and None is returned). None also when the plan is final.
    """

    def give_up(row: dict[str, Any], attempts: int, lost: str) -> None:
        chunk_give_up(
            ChunkClaim(chunk_id, row["plan_id"], row["round"], attempts, list(row["configs"])),
            f"gave up after {attempts} attempts: the worker confirming it was lost{lost}",
        )

    held = chunk_claim_row(
        PlanChunk,
        chunk_id,
        parent="plan",
        active=ACTIVE_STATUSES,
        fields=("plan_id", "round", "configs"),
        worker=worker,
        now=now or timezone.now(),
        give_up=give_up,
    )
    if held is None:
        return None
    row, attempt = held
    return ChunkClaim(chunk_id, row["plan_id"], row["round"], attempt, list(row["configs"]))


def chunk_release(claim: ChunkClaim) -> bool:
    """Hand the chunk back (queued, this attempt not counted) for a retry of the delivery."""
    return chunk_release_row(PlanChunk, claim.chunk_id, claim.attempt)


def chunk_heartbeat(claim: ChunkClaim) -> bool:
    """Refresh the chunk's heartbeat; False once this attempt no longer holds it or the plan
    is final."""
    active = Plan.objects.filter(pk=claim.plan_id, status__in=ACTIVE_STATUSES).exists()
    return chunk_heartbeat_row(PlanChunk, claim.chunk_id, claim.attempt, job_active=active)


def recorded_keys(plan_id: int, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` already have a result row."""
    return set(
        PlanResult.objects.filter(plan_id=plan_id, key__in=list(keys)).values_list("key", flat=True)
    )


def result_record(
    claim: ChunkClaim,
    evaluation: Mapping[str, Any],
    *,
    capex_usd: float,
    worker: str = "",
) -> bool:
    """Record one configuration's evaluation once; True if this call recorded it.

    The row insert and the round counter share a transaction; a duplicate (another
    delivery got there first) changes nothing.
    """
    with transaction.atomic():
        try:
            with transaction.atomic():
                PlanResult.objects.create(
                    plan_id=claim.plan_id,
                    key=str(evaluation["key"]),
                    round=claim.round,
                    feasible=bool(evaluation.get("feasible")),
                    capex_usd=float(capex_usd),
                    evaluation=finite(dict(evaluation)),
                    attempt=claim.attempt,
                    worker=worker[:200],
                )
        except IntegrityError:
            return False
        Plan.objects.filter(pk=claim.plan_id, round=claim.round).update(
            round_done=F("round_done") + 1, confirmed=F("confirmed") + 1
        )
    return True


def chunk_done(claim: ChunkClaim) -> bool:
    """Mark the chunk done; when its round is fully recorded, move the plan to the decide
    stage (once) and queue the decide task on commit. True if this call did that."""
    now = timezone.now()
    with transaction.atomic():
        PlanChunk.objects.filter(pk=claim.chunk_id).exclude(status=ChunkStatus.DONE).update(
            status=ChunkStatus.DONE, heartbeat_at=now
        )
        return _round_complete(claim.plan_id, claim.round, now)


def _round_complete(plan_id: int, round_: int, now: datetime) -> bool:
    changed = Plan.objects.filter(
        pk=plan_id,
        status__in=ACTIVE_STATUSES,
        stage=PlanStage.CONFIRM,
        round=round_,
        round_done__gte=F("round_total"),
    ).update(
        stage=PlanStage.DECIDE,
        stage_status=Stage.QUEUED,
        stage_attempts=0,
        progress=F("round_progress_end"),
        enqueued_at=now,
        heartbeat_at=now,
    )
    if changed:
        transaction.on_commit(lambda: _enqueue_stage(plan_id))
    return bool(changed)


def chunk_give_up(claim: ChunkClaim, error: str) -> int:
    """Record every unrecorded configuration of the chunk with no verdict (``error``)."""
    keys = [str(c["key"]) for c in claim.configs]
    done = recorded_keys(claim.plan_id, keys)
    count = 0
    for cfg in claim.configs:
        if cfg["key"] in done:
            continue
        evaluation = {
            "key": cfg["key"],
            "feasible": False,
            "metrics": {},
            "misses": [],
            "error": f"no verdict: {error}",
            "seconds": 0.0,
            "unknown": True,
        }
        count += result_record(claim, evaluation, capex_usd=float(cfg["capex_usd"]))
    chunk_done(claim)
    return count


# --- reconciliation ----------------------------------------------------------------------------


@dataclass
class PlanReconcileReport:
    """What :func:`plans_reconcile` did, by plan or chunk id."""

    stages_requeued: list[int] = field(default_factory=list)
    stages_resent: list[int] = field(default_factory=list)
    chunks_requeued: list[int] = field(default_factory=list)
    chunks_resent: list[int] = field(default_factory=list)
    rounds_completed: list[int] = field(default_factory=list)


def plans_reconcile(*, now: datetime | None = None, limit: int = 500) -> PlanReconcileReport:
    """Re-send what lost workers or lost messages left behind.

    * a screen/decide stage running with a stale heartbeat: back to queued and re-sent
      (its next claim counts the attempt, and fails the plan past the limit);
    * a stage or a chunk queued and last sent more than ``HETPLANNER_QUEUED_STALE_S`` ago:
      re-sent (duplicates are harmless: claims are conditional, results unique);
    * a running chunk with a stale heartbeat: back to queued and re-sent;
    * a round fully recorded whose decide stage was never queued: queued now.
    """
    now = now or timezone.now()
    report = PlanReconcileReport()
    active = Q(status__in=ACTIVE_STATUSES)
    single = active & ~Q(stage=PlanStage.CONFIRM)
    report.stages_requeued = requeue_stale(
        Plan,
        single,
        columns=STAGE_COLUMNS,
        now=now,
        limit=limit,
        enqueue=lambda plan_id: _enqueue_stage(plan_id),
        guard=single,
    )
    report.stages_resent = resend_lost(
        Plan,
        single,
        queued={"stage_status": Stage.QUEUED},
        now=now,
        limit=limit,
        enqueue=lambda plan_id: _enqueue_stage(plan_id),
    )
    chunk_active = Q(plan__status__in=ACTIVE_STATUSES, plan__stage=PlanStage.CONFIRM)
    report.chunks_requeued = requeue_stale(
        PlanChunk,
        chunk_active,
        now=now,
        limit=limit,
        enqueue=lambda chunk_id: _enqueue_chunks([chunk_id]),
    )
    report.chunks_resent = resend_lost(
        PlanChunk,
        chunk_active,
        queued={"status": ChunkStatus.QUEUED},
        now=now,
        limit=limit,
        enqueue=lambda chunk_id: _enqueue_chunks([chunk_id]),
    )
    for plan_id, round_ in Plan.objects.filter(
        active, stage=PlanStage.CONFIRM, round_done__gte=F("round_total")
    ).values_list("pk", "round")[:limit]:
        with transaction.atomic():
            if _round_complete(plan_id, round_, now):
                report.rounds_completed.append(plan_id)
    return report


__all__ = [
    "ChunkClaim",
    "PlanReconcileReport",
    "StageClaim",
    "chunk_claim",
    "chunk_done",
    "chunk_give_up",
    "chunk_heartbeat",
    "chunk_release",
    "plan_cancel",
    "plan_create",
    "plan_validate",
    "plans_reconcile",
    "recorded_evaluations",
    "recorded_keys",
    "result_record",
    "stage_claim",
    "stage_fail",
    "stage_finish",
    "stage_heartbeat",
    "stage_release",
    "stage_start_round",
]
