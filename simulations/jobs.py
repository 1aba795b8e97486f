"""Helpers shared by the three job systems' Celery tasks: runs (:mod:`simulations.runs.tasks`),
sweeps (:mod:`simulations.sweeps.tasks`) and plans (:mod:`simulations.plans.tasks`).

Each system keeps its own records (a run's events, a sweep's and a plan's results); what is
the same in all of them lives here once: the lifecycle columns of the job rows
(:class:`ClaimedRow`, :class:`Job`, :class:`ClaimedJob`, :class:`ChunkJob`), the per-user
quota, the claim by one conditional UPDATE (:func:`claim_row`, used by runs, plan stages and
both kinds of chunk, each passing hooks for what it adds), when a heartbeat is stale, how a
reconciler hands back a job whose worker died or re-sends one whose message was lost, how
long a transient error waits before the retry, which time limit a delivery ran under, and
how a chunk task claims, beats, works and handles its errors.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol, TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    models,
    transaction,
)
from django.db import connection as db_connection
from django.db.models import Q, QuerySet
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerOperationalError

from simulations.choices import FINAL_STATUSES, ChunkStatus, RunStatus
from simulations.core.errors import (
    CapacityError,
    ScenarioValidationError,
    SpecError,
    UnknownPolicyError,
)

logger = logging.getLogger(__name__)

#: Errors worth retrying: the database or the broker is (briefly) unreachable.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    BrokerOperationalError,
    ConnectionError,
)
try:  # redis-py's connection errors are not ConnectionError subclasses in every version.
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    TRANSIENT_ERRORS = (*TRANSIENT_ERRORS, RedisConnectionError, RedisTimeoutError)
except ImportError:  # pragma: no cover - redis is a pinned dependency
    pass


#: How often a task retries a transient error before Celery gives the delivery up.
MAX_RETRIES = 5

#: Celery options every job task shares: acknowledged after the work, redelivered
#: when the worker process dies, bounded retries, outcomes kept in the database rather than
#: a result backend.
JOB_TASK_OPTIONS: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "max_retries": MAX_RETRIES,
}
#: The soft < hard time limits of the tasks that simulate (the soft one lets the task record
#: a failure before the hard one kills the process).
TIME_LIMITS: dict[str, Any] = {
    "soft_time_limit": settings.CELERY_TASK_SOFT_TIME_LIMIT,
    "time_limit": settings.CELERY_TASK_TIME_LIMIT,
}


def claim_or_retry(task: Any, claim: Callable[..., Any], job_id: int, worker: str) -> Any:
    """``claim(job_id, worker=worker)``, retrying the delivery on a transient error."""
    try:
        return claim(job_id, worker=worker)
    except TRANSIENT_ERRORS as exc:
        raise task.retry(exc=exc, countdown=backoff(task)) from exc


def backoff(task: Any) -> float:
    """Seconds before the next retry of a bound ``task``: exponential in its retries, with
    full jitter, at most a minute."""
    return get_exponential_backoff_interval(
        factor=2, retries=task.request.retries, maximum=60, full_jitter=True
    )


def soft_time_limit(task: Any) -> float:
    """The soft time limit a bound ``task``'s delivery ran under, in seconds.

    A message may carry its own limits (hard, soft); else the settings' soft limit.
    """
    return (task.request.timelimit or (None, None))[1] or settings.CELERY_TASK_SOFT_TIME_LIMIT


def retry_or_give_up(
    task: Any,
    exc: BaseException,
    *,
    give_up: Callable[[str], Any],
    release: Callable[[], Any],
    what: str,
) -> str:
    """What a bound ``task`` holding a claim does after a transient error ``exc``.

    Past its last retry: ``give_up`` with the error and return ``"failed"``. Else hand the
    claim back with ``release`` (when that fails too, the reconciler will; ``what`` names
    the job in that warning) and raise the retry, with backoff.
    """
    if task.request.retries >= task.max_retries:
        give_up(f"infrastructure error: {exc}")
        return "failed"
    try:
        release()
    except TRANSIENT_ERRORS:
        logger.warning("%s; the reconciler will", what)
    raise task.retry(exc=exc, countdown=backoff(task)) from exc


@contextmanager
def collector_paused_then_settled() -> Iterator[None]:
    """Run a simulating task's body with the cyclic garbage collector paused; afterwards
    collect once and move every surviving object to the collector's permanent generation.

    Why: the simulations allocate millions of short-lived container objects, which keep
    triggering collections, and a worker holds several hundred thousand long-lived objects
    between tasks (modules, parsed plans, screened searches, the device models' cost
    caches) that every full collection rescans. In the capacity-search benchmark (10,912
    configurations, LLaMA2-7B) that was about 45 % of the screen, confirmation and
    sensitivity time of one process. Pausing is safe because reference counting still frees
    everything acyclic at once — the screen and engine runs of homogeneous and GLITCHES
    configurations left no cyclic garbage at all when measured — and the collection at the
    end of the task reclaims whatever cycles a task does leave, so memory stays bounded by
    one task. Frozen objects are still freed by reference counting when a cache drops
    them, and the end of every task thaws the heap before it collects, so a frozen cycle
    that has died since is reclaimed by the next task at the latest.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        # Thaw first, so a cycle frozen by an earlier task that died since is reclaimed now:
        # one full collection per task (cheap next to the collections the pause avoided),
        # and frozen objects never accumulate garbage across tasks.
        gc.unfreeze()
        gc.collect()
        gc.freeze()


class ChunkBeat(Protocol):
    """What :func:`run_chunk` needs of a chunk's heartbeat thread."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


ClaimT = TypeVar("ClaimT")
BeatT = TypeVar("BeatT", bound=ChunkBeat)


def run_chunk(
    task: Any,
    chunk_id: int,
    *,
    worker: str,
    claim: Callable[..., ClaimT | None],
    heartbeat: Callable[[ClaimT, float], BeatT],
    work: Callable[[ClaimT, BeatT], str],
    give_up: Callable[[ClaimT, str], Any],
    release: Callable[[ClaimT], Any],
    what: str,
    domain_errors: tuple[type[BaseException], ...] = (),
    describe: Callable[[BaseException], str] = str,
    pause_collector: bool = False,
) -> str:
    """The body of a sweep's or a plan's chunk task (bound ``task``, delivery of ``chunk_id``).

    ``claim(chunk_id, worker=worker)`` the chunk (a transient error retries the delivery;
    ``"not claimed"`` when another delivery holds it or there is nothing to do), start
    ``heartbeat(claim, interval)``, and return ``work(claim, beat)``; the heartbeat is
    stopped however the work ends. On an error the work let through:

    - one of ``domain_errors``: ``give_up(claim, describe(exc))``, ``"failed"`` (bad input
      fails the same way on every delivery, so it is not retried);
    - the soft time limit: ``give_up`` with the limit, ``"timed out"``;
    - a transient error: :func:`retry_or_give_up` — hand the chunk back with
      ``release(claim)`` and retry, or past the last retry give up (``what`` is the
      warning when the release fails too).

    ``pause_collector`` runs the work under :func:`collector_paused_then_settled` (for work
    that allocates enough short-lived objects for the collector's pauses to matter).
    """
    close_old_connections()
    held = claim_or_retry(task, claim, chunk_id, worker)
    if held is None:
        return "not claimed"
    beat = heartbeat(held, settings.HETPLANNER_HEARTBEAT_INTERVAL_S)
    beat.start()
    try:
        paused: AbstractContextManager[Any] = (
            collector_paused_then_settled() if pause_collector else nullcontext()
        )
        with paused:
            return work(held, beat)
    except domain_errors as exc:
        give_up(held, describe(exc))
        return "failed"
    except SoftTimeLimitExceeded:
        limit = soft_time_limit(task)
        give_up(held, f"the chunk exceeded the time limit of {limit} s")
        return "timed out"
    except TRANSIENT_ERRORS as exc:
        return retry_or_give_up(
            task,
            exc,
            give_up=lambda error: give_up(held, error),
            release=lambda: release(held),
            what=what,
        )
    finally:
        beat.stop()


class ClaimedRow(models.Model):
    """The columns of a row a worker claims — a run, a plan (its current screen or decide
    stage) or a chunk of a sweep or a plan: which worker holds it, when its task message was
    last sent and when its worker last beat. :func:`claim_row`, :func:`requeue_stale`,
    :func:`resend_lost` and :func:`mark_unsent` work on these columns."""

    worker = models.CharField(
        max_length=200, blank=True, help_text="Host and process id of the claiming worker."
    )
    enqueued_at = models.DateTimeField(
        null=True, blank=True, help_text="When a task message was last sent for it."
    )
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life from the claiming worker."
    )

    class Meta:
        abstract = True


class Job(models.Model):
    """The columns every parent job row (a run, a sweep, a plan) has: when it was submitted
    and when it reached a final state."""

    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was submitted.")
    finished_at = models.DateTimeField(
        null=True, blank=True, help_text="When it reached a final state."
    )

    class Meta:
        abstract = True


class ClaimedJob(Job, ClaimedRow):
    """A parent job whose own row a worker claims — a run, or a plan for its screen and
    decide stages (its confirmation chunks are :class:`ChunkJob` rows): the run lifecycle
    (:class:`RunStatus`, queued → running → succeeded / failed / cancelled), why it failed,
    and when a worker first claimed it. A sweep is only a :class:`Job`: its chunks are
    claimed, never the sweep itself, and its statuses are its own."""

    status = models.CharField(
        max_length=16,
        choices=RunStatus.choices,
        default=RunStatus.QUEUED,
        help_text="Lifecycle state.",
    )
    error = models.TextField(blank=True, help_text="Why it failed (empty otherwise).")
    started_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker first claimed it."
    )

    class Meta:
        abstract = True

    @property
    def is_final(self) -> bool:
        """Whether the job reached a state it never leaves."""
        return self.status in FINAL_STATUSES

    @staticmethod
    def status_constraint() -> models.CheckConstraint:
        """The CHECK that keeps ``status`` one of :class:`RunStatus` (each concrete job lists
        it among its own constraints)."""
        return models.CheckConstraint(
            condition=Q(status__in=RunStatus.values),
            name="%(app_label)s_%(class)s_status_valid",
        )


class ChunkJob(ClaimedRow):
    """The lifecycle columns of a chunk of a sweep or a plan, one Celery task's share of the
    job: its state and how often a worker claimed it, beside the :class:`ClaimedRow`
    columns. :func:`chunk_claim_row`, :func:`chunk_heartbeat_row`, :func:`chunk_release_row`,
    :func:`requeue_stale` and :func:`resend_lost` work on these columns for either kind of
    chunk."""

    status = models.CharField(
        max_length=16,
        choices=ChunkStatus.choices,
        default=ChunkStatus.QUEUED,
        help_text="Lifecycle state.",
    )
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Times a worker claimed the chunk (count)."
    )

    class Meta:
        abstract = True
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    @staticmethod
    def status_constraint() -> models.CheckConstraint:
        """The CHECK that keeps ``status`` one of :class:`ChunkStatus` (each concrete chunk
        lists it among its own constraints)."""
        return models.CheckConstraint(
            condition=Q(status__in=ChunkStatus.values),
            name="%(app_label)s_%(class)s_status_valid",
        )


class QuotaExceededError(Exception):
    """A per-user quota of active jobs (runs, sweeps, plans) is used up; the message names
    it, ``active`` and ``limit`` count the jobs."""

    def __init__(self, message: str, *, active: int, limit: int) -> None:
        super().__init__(message)
        self.active = active
        self.limit = limit


def quota_check(owner: Any, active: QuerySet[Any], *, what: str, limit: int) -> None:
    """Raise QuotaExceededError when ``active`` — ``owner``'s queued or running jobs of one
    kind — already holds ``limit`` of them; ``what`` names the kind in the message.

    Call it inside the transaction that creates the job: it locks ``owner``'s user row
    first (a row lock on PostgreSQL; SQLite serialises writes), so two concurrent
    submissions of one user are counted one after the other and cannot both pass.
    """
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    count = active.count()
    if count >= limit:
        raise QuotaExceededError(
            f"active {what} per user: you have {count} queued or running; at most {limit}",
            active=count,
            limit=limit,
        )


def thaw_heap() -> None:
    """Hand the frozen objects back to the collector (before dropping a cached object that
    may be part of a reference cycle, so the next collection can reclaim it)."""
    gc.unfreeze()


def stale_before(now: datetime) -> datetime:
    """Heartbeats older than this are stale: the worker holding the job is taken for lost."""
    return now - timedelta(seconds=settings.HETPLANNER_HEARTBEAT_STALE_S)


@dataclass(frozen=True)
class ClaimColumns:
    """Where a claimed row keeps its state: the ``status`` column with its ``queued`` and
    ``running`` values, and the ``attempts`` column counting deliveries. A run and a chunk
    use ``status`` and ``attempts``; a plan's screen and decide stages ``stage_status`` and
    ``stage_attempts``."""

    status: str = "status"
    queued: str = RunStatus.QUEUED.value
    running: str = RunStatus.RUNNING.value
    attempts: str = "attempts"

    def is_queued(self) -> Q:
        """The row waits for a worker."""
        return Q(**{self.status: self.queued})

    def is_running(self, **more: Any) -> Q:
        """The row is held by a worker (and matches ``more``)."""
        return Q(**{self.status: self.running}, **more)


#: The columns of a run and of a chunk (a chunk's ``ChunkStatus`` uses the run's values for
#: queued and running; a plan's stages name their own columns).
STATUS_COLUMNS = ClaimColumns()


def claim_row(
    model: type[models.Model],
    pk: int,
    *,
    columns: ClaimColumns = STATUS_COLUMNS,
    fields: Sequence[str] = (),
    worker: str,
    now: datetime,
    give_up: Callable[[QuerySet[Any], dict[str, Any], int, str], Any],
    scope: Callable[[dict[str, Any]], Q | None] | None = None,
    resume_attempt: int | None = None,
    claimed: Mapping[str, Any] | None = None,
    on_claimed: Callable[[dict[str, Any], int], Any] | None = None,
) -> tuple[dict[str, Any], int] | None:
    """Claim row ``pk`` of ``model`` (a run, a plan's stage, a chunk) for this delivery with
    one conditional UPDATE; return the row's ``fields`` (with its attempt count and
    ``worker``) and the attempt now held, or None.

    Claimable: queued, or running with a stale heartbeat (its worker died), or — when a
    retried delivery resumes its claim — running under ``resume_attempt``. The UPDATE is
    guarded by the attempt count read, so of two deliveries only one wins; it sets the row
    running, counts the attempt, beats, names ``worker`` and writes ``claimed`` (further
    columns). ``on_claimed(row, attempt)`` runs in the same transaction when it changed the
    row (a run writes its event there).

    ``scope(row)``, when given, is the further condition the claim needs (e.g. the plan's
    stage and round as read), or None when the row is not to be claimed at all. A row that
    already used ``HETPLANNER_MAX_ATTEMPTS`` deliveries is not claimed:
    ``give_up(guard, row, attempts, lost)`` gets the guarded queryset (to fail it or
    record what it left, by a conditional UPDATE of its own) with ``lost`` naming the last
    worker.
    """
    manager = model._default_manager
    row = manager.filter(pk=pk).values(columns.attempts, "worker", *fields).first()
    if row is None:
        return None
    extra = scope(row) if scope is not None else Q()
    if extra is None:
        return None
    attempts = row[columns.attempts]
    claimable = columns.is_queued() | columns.is_running(heartbeat_at__lt=stale_before(now))
    if resume_attempt is not None:
        claimable |= columns.is_running(**{columns.attempts: resume_attempt})
    guard = manager.filter(claimable, extra, pk=pk, **{columns.attempts: attempts})
    if attempts >= settings.HETPLANNER_MAX_ATTEMPTS:
        give_up(guard, row, attempts, f" (last worker: {row['worker']})" if row["worker"] else "")
        return None
    with transaction.atomic():
        changed = guard.update(
            **{columns.status: columns.running, columns.attempts: attempts + 1},
            heartbeat_at=now,
            worker=worker[:200],
            **(claimed or {}),
        )
        if changed and on_claimed is not None:
            on_claimed(row, attempts + 1)
    return (row, attempts + 1) if changed else None


def chunk_claim_row(
    chunks: type[models.Model],
    chunk_id: int,
    *,
    parent: str,
    active: Collection[str],
    fields: Sequence[str],
    worker: str,
    now: datetime,
    give_up: Callable[[dict[str, Any], int, str], None],
) -> tuple[dict[str, Any], int] | None:
    """Claim a sweep's or a plan's chunk row for this delivery (:func:`claim_row`); return
    its ``fields`` (with ``attempts`` and ``worker``) and the attempt now held, or None.

    A chunk of a final job (``parent``'s status not in ``active``) is closed instead. A
    chunk that already used its ``HETPLANNER_MAX_ATTEMPTS`` deliveries is taken once more
    only to ``give_up(row, attempts, lost)`` — record what it left unrecorded as failed,
    ``lost`` naming the last worker — and None is returned.
    """
    manager = chunks._default_manager

    def scope(row: dict[str, Any]) -> Q | None:
        if row[f"{parent}__status"] in active:
            return Q()
        manager.filter(pk=chunk_id).exclude(status=ChunkStatus.DONE).update(status=ChunkStatus.DONE)
        return None

    def exhausted(guard: QuerySet[Any], row: dict[str, Any], attempts: int, lost: str) -> None:
        if guard.update(status=ChunkStatus.RUNNING, heartbeat_at=now):
            give_up(row, attempts, lost)

    return claim_row(
        chunks,
        chunk_id,
        fields=(f"{parent}__status", *fields),
        worker=worker,
        now=now,
        give_up=exhausted,
        scope=scope,
    )


def chunk_release_row(chunks: type[models.Model], chunk_id: int, attempt: int) -> bool:
    """Hand a chunk held under ``attempt`` back (queued, the delivery not counted) so the
    retry of the delivery can claim it again."""
    return bool(
        chunks._default_manager.filter(
            pk=chunk_id, status=ChunkStatus.RUNNING, attempts=attempt
        ).update(status=ChunkStatus.QUEUED, attempts=attempt - 1)
    )


def chunk_heartbeat_row(
    chunks: type[models.Model], chunk_id: int, attempt: int, *, job_active: bool
) -> bool:
    """Refresh the heartbeat of a chunk held under ``attempt``; False once the job is final
    (``job_active`` False) or this attempt no longer holds the chunk."""
    if not job_active:
        return False
    return bool(
        chunks._default_manager.filter(
            pk=chunk_id, status=ChunkStatus.RUNNING, attempts=attempt
        ).update(heartbeat_at=timezone.now())
    )


def requeue_stale(
    model: type[models.Model],
    scope: Q,
    *,
    columns: ClaimColumns = STATUS_COLUMNS,
    now: datetime,
    limit: int,
    enqueue: Callable[[int], Any],
    guard: Q | None = None,
    requeued_values: Mapping[str, Any] | None = None,
    on_requeued: Callable[[int, int, str], Any] | None = None,
    give_up: Callable[[QuerySet[Any], int, int, str], Any] | None = None,
) -> list[int]:
    """Hand back to queued, and re-send, the rows of ``model`` in ``scope`` that are running
    with a stale heartbeat; return their ids.

    Each row is moved by a conditional UPDATE (still running under the same attempt count,
    still stale, and within ``guard`` when given), so a worker that beats or finishes in
    between keeps its job; the attempt count is kept (the next claim counts the delivery).
    The UPDATE also writes ``requeued_values``, and ``on_requeued(pk, attempts, worker)``
    runs in its transaction when it changed the row (a run writes its event there).

    With ``give_up``, a row that already used ``HETPLANNER_MAX_ATTEMPTS`` deliveries is not
    re-sent: ``give_up(guarded, pk, attempts, worker)`` gets the same guarded queryset (a
    run fails there); without it the next claim decides (chunks and plan stages).
    """
    stale = stale_before(now)
    requeued: list[int] = []
    manager = model._default_manager
    rows = manager.filter(scope, columns.is_running(heartbeat_at__lt=stale)).values_list(
        "pk", columns.attempts, "worker"
    )[:limit]
    for pk, attempts, worker in rows:
        guarded = manager.filter(
            guard if guard is not None else Q(),
            columns.is_running(heartbeat_at__lt=stale),
            pk=pk,
            **{columns.attempts: attempts},
        )
        if give_up is not None and attempts >= settings.HETPLANNER_MAX_ATTEMPTS:
            give_up(guarded, pk, attempts, worker)
            continue
        with transaction.atomic():
            if guarded.update(
                enqueued_at=now,
                worker="",
                **{columns.status: columns.queued},
                **(requeued_values or {}),
            ):
                if on_requeued is not None:
                    on_requeued(pk, attempts, worker)
                transaction.on_commit(partial(enqueue, pk))
                requeued.append(pk)
    return requeued


def resend_lost(
    model: type[models.Model],
    scope: Q,
    *,
    queued: Mapping[str, Any],
    now: datetime,
    limit: int,
    enqueue: Callable[[int], Any],
) -> list[int]:
    """Re-send the rows of ``model`` in ``scope`` that are ``queued`` and were last sent more
    than ``HETPLANNER_QUEUED_STALE_S`` ago (or never); return their ids.

    Each row's send time is moved by a conditional UPDATE so two reconcilers do not both
    re-send it; a duplicate message is harmless anyway, claims being conditional.
    """
    resend_before = now - timedelta(seconds=settings.HETPLANNER_QUEUED_STALE_S)
    resent: list[int] = []
    rows = (
        model._default_manager.filter(scope, **queued)
        .filter(Q(enqueued_at__lt=resend_before) | Q(enqueued_at__isnull=True))
        .values_list("pk", "enqueued_at")[:limit]
    )
    for pk, enqueued_at in rows:
        with transaction.atomic():
            if model._default_manager.filter(pk=pk, enqueued_at=enqueued_at, **queued).update(
                enqueued_at=now
            ):
                transaction.on_commit(partial(enqueue, pk))
                resent.append(pk)
    return resent


def mark_unsent(
    model: type[models.Model], ids: Collection[int], *, queued: Mapping[str, Any]
) -> None:
    """Record that the messages of the rows ``ids`` of ``model`` (still ``queued``) could not
    be sent: their send time is cleared, so the reconciler's next pass sends them (rather
    than waiting ``HETPLANNER_QUEUED_STALE_S`` for a message that never left).

    Called after a broker failure; a database failure here is logged and left to the
    reconciler's stale-message rule.
    """
    try:
        model._default_manager.filter(pk__in=list(ids), **queued).update(enqueued_at=None)
    except TRANSIENT_ERRORS:
        logger.warning("could not mark %s %s unsent", model.__name__, list(ids), exc_info=True)


#: Longest error message stored on a run, in characters.
MAX_ERROR_CHARS = 4000


@dataclass
class ReconcileReport:
    """What a reconciler did, by job id (runs, traces)."""

    requeued: list[int] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


#: Errors that describe the scenario, not the infrastructure: fail the run, never retry.
DOMAIN_ERRORS = (SpecError, CapacityError, UnknownPolicyError, ScenarioValidationError)


class RunAbandonedError(Exception):
    """This attempt no longer holds the run (it was cancelled or handed to another attempt)."""


def worker_id() -> str:
    """``host:pid`` of this worker process (stored on the run while it holds it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Heartbeat(threading.Thread, ABC):
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

    @abstractmethod
    def mark(self, percent: int) -> bool:
        """Write the progress and the heartbeat; False once the job is no longer this
        attempt's. Each job's heartbeat says how (runs, sweep chunks, plan stages and chunks)."""

    def stop(self) -> None:
        """Stop beating and wait for the thread to end."""
        self._stop_event.set()
        self.join(timeout=max(5.0, 2 * self.interval))

    def progress(self, fraction: float) -> None:
        """Progress callback for the core; raises RunAbandonedError once the run is not ours."""
        if self.lost.is_set():
            raise RunAbandonedError
        self.fraction = min(max(float(fraction), 0.0), 1.0)


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, ScenarioValidationError):
        return f"invalid scenario: {exc}"
    if isinstance(exc, UnknownPolicyError):
        return str(exc)
    if isinstance(exc, CapacityError):
        return f"does not fit: {exc}"
    return str(exc) or type(exc).__name__
