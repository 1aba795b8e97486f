"""Every write to sweeps: create (validate, cap, chunk, queue), claim a chunk, record a
configuration, finalise, cancel and reconcile.

Exactly-once recording: a configuration's row is inserted under the unique constraint
(sweep, index) and the sweep's counter is incremented in the same transaction, only when
the insert happened. However often a chunk is delivered (a worker child killed, a message
redelivered by the broker or re-sent by the reconciler), each configuration is recorded
once and the counters equal the number of rows. The finaliser is a conditional update
(``WHERE status = running AND succeeded + failed = total``), so it runs once.

Chunks are claimed like runs (:func:`simulations.runs.services.run_claim`): a conditional UPDATE
from ``queued``, or from ``running`` with a stale heartbeat, that also counts the attempt; a
chunk delivered ``HETPLANNER_MAX_ATTEMPTS`` times without finishing records its remaining
configurations as failed, so a configuration that kills its worker cannot stall the sweep.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from simulations.adapters import catalog_from_db, traces_from_db
from simulations.choices import ChunkStatus
from simulations.core import json_fields
from simulations.core import scenario as scenario_rules
from simulations.core.errors import ScenarioValidationError
from simulations.core.jsonsafe import finite
from simulations.jobs import (
    MAX_ERROR_CHARS,
    chunk_claim_row,
    chunk_heartbeat_row,
    chunk_release_row,
    mark_unsent,
    quota_check,
    requeue_stale,
    resend_lost,
)
from simulations.scenarios.services import (
    _document_size_check,
    trace_references_set,
    visible_runtimes,
    visible_traces,
)
from simulations.sweeps.expand import (
    Axis,
    SweepValidationError,
    axes_document,
    check_count,
    check_template_paths,
    configuration_document,
    configuration_parameters,
    parse_axes,
)
from simulations.sweeps.models import (
    SWEEP_ACTIVE_STATUSES,
    ConfigurationStatus,
    Sweep,
    SweepChunk,
    SweepResult,
    SweepStatus,
)

logger = logging.getLogger(__name__)

#: Metric keys of a system's result entry kept per configuration (docs/architecture.md).
_SUMMARY_DICTS = ("ttft_ms", "tpot_ms", "e2e_s")


def _max_configs() -> int:
    return int(settings.HETPLANNER_SWEEP_MAX_CONFIGS)


def sweep_axes(sweep: Sweep) -> list[Axis]:
    """The stored axes of ``sweep`` parsed again (they were validated when it was created)."""
    return parse_axes(sweep.axes)


def _index_for(axes: list[Axis], digits: list[int]) -> int:
    index = 0
    for axis, digit in zip(axes, digits, strict=True):
        index = index * len(axis.values) + digit
    return index


def _probes(template: Any, axes: list[Axis]) -> list[tuple[str, dict[str, Any]]]:
    """The documents tried at validation: the template, then each axis value with the other
    axes at their first value (every value of every axis appears in one of them)."""
    probes: list[tuple[str, dict[str, Any]]] = [
        ("template", configuration_document(template, axes, 0))
    ]
    for i, axis in enumerate(axes):
        for j in range(1, len(axis.values)):
            digits = [0] * len(axes)
            digits[i] = j
            probes.append(
                (
                    f"axes[{i}].values[{j}]",
                    configuration_document(template, axes, _index_for(axes, digits)),
                )
            )
    return probes


def sweep_trace_names(template: Any, axes: list[Axis]) -> set[str]:
    """Every trace name the sweep's configurations use (the template's and the axes')."""
    names: set[str] = set()
    for _, doc in _probes(template, axes):
        names |= scenario_rules.trace_names(doc)
    return names


def sweep_validate(template: Any, axes_raw: Any, *, user: Any = None) -> tuple[list[Axis], int]:
    """Validate a template and axes; return the axes and the configuration count.

    Order matters: the count is checked against ``HETPLANNER_SWEEP_MAX_CONFIGS`` before any
    scenario is parsed, so an oversized sweep is refused cheaply. Then every axis value is
    tried on the template (with the other axes at their first value) against the catalog,
    so a bad device slug or option value is reported as ``axes[i].values[j]`` with the
    scenario path at fault. Raises SweepValidationError (keys ``template…``/``axes…``).
    """
    if not isinstance(template, Mapping):
        raise SweepValidationError({"template": ["must be a scenario document (an object)"]})
    try:
        _document_size_check(template)
    except ScenarioValidationError as exc:
        raise SweepValidationError(
            {
                (f"template.{k}" if k != scenario_rules.ROOT else "template"): v
                for k, v in exc.errors.items()
            }
        ) from exc
    problems = json_fields.storable_problems(axes_raw, "axes")
    if problems:
        raise SweepValidationError(problems)
    axes = parse_axes(axes_raw)
    total = check_count(axes, _max_configs())
    check_template_paths(template, axes)
    catalog = catalog_from_db(visible_runtimes(user))
    probes = _probes(template, axes)
    names: set[str] = set()
    for _, doc in probes:
        names |= scenario_rules.trace_names(doc)
    # With a user, traces resolve among those they may use (another's private one: unknown).
    traces = traces_from_db(names, visible_traces(user))
    errors: dict[str, list[str]] = {}
    for where, doc in probes:
        try:
            scenario_rules.parse_scenario(doc, catalog, traces=traces)
        except ScenarioValidationError as exc:
            for path, messages in exc.errors.items():
                prefix = "template" if where == "template" else where
                key = f"{prefix}.{path}" if where == "template" else where
                text = messages if where == "template" else [f"{path}: {m}" for m in messages]
                errors.setdefault(key, []).extend(text)
        if len(errors) >= 50:
            break
    if errors:
        raise SweepValidationError(errors)
    problems = json_fields.storable_problems(template, "template")
    if problems:  # a value a jsonb column cannot hold where no parser looks (e.g. a NaN)
        raise SweepValidationError(problems)
    return axes, total


def _enqueue_chunk(chunk_id: int) -> bool:
    """Send a chunk's task message; False when the broker failed (logged, the chunk marked
    unsent: the reconciler's next pass sends it)."""
    from simulations.sweeps.tasks import run_sweep_chunk

    try:
        run_sweep_chunk.delay(chunk_id)
    except Exception:
        logger.exception("could not queue sweep chunk %s; the reconciler will retry", chunk_id)
        mark_unsent(SweepChunk, [chunk_id], queued={"status": ChunkStatus.QUEUED})
        return False
    return True


def _enqueue_chunks(chunk_ids: list[int]) -> None:
    for n, chunk_id in enumerate(chunk_ids):
        if not _enqueue_chunk(chunk_id):
            # The broker is down: do not pay its timeout once per chunk; the reconciler
            # sends the rest with the first.
            mark_unsent(SweepChunk, chunk_ids[n + 1 :], queued={"status": ChunkStatus.QUEUED})
            return


def _enqueue_finalise(sweep_id: int) -> None:
    from simulations.sweeps.tasks import finalise_sweep

    try:
        finalise_sweep.delay(sweep_id)
    except Exception:
        logger.exception("could not queue the finaliser of sweep %s; the reconciler will", sweep_id)


def sweep_create(
    *, owner: Any, name: str, template: Any, axes: Any, chunk_size: int | None = None
) -> Sweep:
    """Validate, cap and store a sweep, then queue its chunks once committed.

    Raises SweepValidationError (nothing stored) or
    :class:`~simulations.jobs.QuotaExceededError` when ``owner``
    already has ``HETPLANNER_MAX_ACTIVE_SWEEPS_PER_USER`` sweeps queued or running.
    """
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise SweepValidationError(
            {"name": ["must be a non-empty string of at most 200 characters"]}
        )
    parsed, total = sweep_validate(template, axes, user=owner)
    size = int(chunk_size or settings.HETPLANNER_SWEEP_CHUNK_SIZE)
    size = max(1, min(size, total))
    now = timezone.now()
    with transaction.atomic():
        quota_check(
            owner,
            Sweep.objects.filter(owner=owner, status__in=SWEEP_ACTIVE_STATUSES),
            what="sweeps",
            limit=int(settings.HETPLANNER_MAX_ACTIVE_SWEEPS_PER_USER),
        )
        sweep = Sweep.objects.create(
            owner=owner,
            name=name.strip(),
            template=template,
            axes=axes_document(parsed),
            total=total,
            chunk_size=size,
        )
        trace_references_set(sweep_trace_names(template, parsed), sweep=sweep)
        SweepChunk.objects.bulk_create(
            SweepChunk(
                sweep=sweep,
                number=n,
                start=start,
                stop=min(start + size, total),
                enqueued_at=now,
            )
            for n, start in enumerate(range(0, total, size))
        )
        chunk_ids = list(
            SweepChunk.objects.filter(sweep=sweep).order_by("number").values_list("pk", flat=True)
        )
        transaction.on_commit(lambda: _enqueue_chunks(chunk_ids))
    return sweep


@dataclass(frozen=True)
class ChunkClaim:
    """A worker's hold on a chunk: what it must compute, and under which attempt."""

    chunk_id: int
    sweep_id: int
    attempt: int
    start: int
    stop: int


def chunk_claim(chunk_id: int, *, worker: str, now: datetime | None = None) -> ChunkClaim | None:
    """Claim a chunk for this delivery with one conditional UPDATE, or return None.

    Claimable: queued, or running with a stale heartbeat. A chunk that already used its
    ``HETPLANNER_MAX_ATTEMPTS`` deliveries has its unrecorded configurations recorded as
    failed instead (and None is returned). None also when the sweep is final.
    """
    now = now or timezone.now()

    def give_up(row: dict[str, Any], attempts: int, lost: str) -> None:
        chunk_give_up(
            ChunkClaim(chunk_id, row["sweep_id"], attempts, row["start"], row["stop"]),
            f"gave up after {attempts} attempts: the worker running this chunk was lost{lost}",
        )

    held = chunk_claim_row(
        SweepChunk,
        chunk_id,
        parent="sweep",
        active=SWEEP_ACTIVE_STATUSES,
        fields=("sweep_id", "start", "stop"),
        worker=worker,
        now=now,
        give_up=give_up,
    )
    if held is None:
        return None
    row, attempt = held
    Sweep.objects.filter(pk=row["sweep_id"], status=SweepStatus.QUEUED).update(
        status=SweepStatus.RUNNING, started_at=now
    )
    return ChunkClaim(chunk_id, row["sweep_id"], attempt, row["start"], row["stop"])


def chunk_release(claim: ChunkClaim) -> bool:
    """Hand the chunk back (queued, this attempt not counted) for a retry of the delivery."""
    return chunk_release_row(SweepChunk, claim.chunk_id, claim.attempt)


def chunk_heartbeat(claim: ChunkClaim) -> bool:
    """Refresh the chunk's heartbeat; False once this attempt no longer holds it or the
    sweep was cancelled."""
    active = Sweep.objects.filter(pk=claim.sweep_id, status__in=SWEEP_ACTIVE_STATUSES).exists()
    return chunk_heartbeat_row(SweepChunk, claim.chunk_id, claim.attempt, job_active=active)


def recorded_indexes(sweep_id: int, start: int, stop: int) -> set[int]:
    """Indexes in [start, stop) that already have a result row."""
    return set(
        SweepResult.objects.filter(sweep_id=sweep_id, index__gte=start, index__lt=stop).values_list(
            "index", flat=True
        )
    )


def summarise_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """The per-system metrics of a result document kept for one configuration.

    Scalars (throughput, cost and energy efficiency, SLO attainment, …), the latency
    percentile objects and the per-device busy fractions and energy; scheduler internals
    are dropped so 10,000 configurations stay small.
    """
    systems = []
    for system in result.get("systems", ()):
        entry: dict[str, Any] = {}
        for key, value in system.items():
            if value is None or isinstance(value, bool | int | float | str):
                entry[key] = value
            elif key in _SUMMARY_DICTS and isinstance(value, Mapping):
                entry[key] = dict(value)
        devices = system.get("devices")
        if isinstance(devices, list):
            entry["devices"] = [
                {
                    k: d.get(k)
                    for k in ("device", "count", "role", "busy_fraction", "energy_j")
                    if k in d
                }
                for d in devices
                if isinstance(d, Mapping)
            ]
        systems.append(entry)
    return finite({"systems": systems})


def configuration_record(
    claim: ChunkClaim,
    index: int,
    parameters: Mapping[str, Any],
    *,
    result: Mapping[str, Any] | None = None,
    error: str = "",
    worker: str = "",
) -> bool:
    """Record configuration ``index`` once; True if this call recorded it.

    The row insert and the counter increment share a transaction; a duplicate insert
    (another delivery got there first) changes nothing.
    """
    status = ConfigurationStatus.SUCCEEDED if result is not None else ConfigurationStatus.FAILED
    counter = "succeeded_count" if result is not None else "failed_count"
    with transaction.atomic():
        try:
            with transaction.atomic():
                SweepResult.objects.create(
                    sweep_id=claim.sweep_id,
                    index=index,
                    parameters=finite(dict(parameters)),
                    status=status,
                    result=summarise_result(result) if result is not None else None,
                    error="" if result is not None else (error or "failed")[:MAX_ERROR_CHARS],
                    attempt=claim.attempt,
                    worker=worker[:200],
                )
        except IntegrityError:
            return False
        Sweep.objects.filter(pk=claim.sweep_id).update(**{counter: F(counter) + 1})
    return True


def chunk_done(claim: ChunkClaim) -> bool:
    """Mark the chunk done and queue the finaliser if every configuration is recorded."""
    with transaction.atomic():
        SweepChunk.objects.filter(pk=claim.chunk_id).exclude(status=ChunkStatus.DONE).update(
            status=ChunkStatus.DONE, heartbeat_at=timezone.now()
        )
        complete = Sweep.objects.filter(
            pk=claim.sweep_id,
            status__in=SWEEP_ACTIVE_STATUSES,
            total=F("succeeded_count") + F("failed_count"),
        ).exists()
        if complete:
            sweep_id = claim.sweep_id
            transaction.on_commit(lambda: _enqueue_finalise(sweep_id))
    return complete


def chunk_give_up(claim: ChunkClaim, error: str) -> int:
    """Record every unrecorded configuration of the chunk as failed with ``error``."""
    sweep = Sweep.objects.filter(pk=claim.sweep_id).only("axes").first()
    if sweep is None:
        return 0
    axes = sweep_axes(sweep)
    done = recorded_indexes(claim.sweep_id, claim.start, claim.stop)
    count = 0
    for index in range(claim.start, claim.stop):
        if index not in done:
            count += configuration_record(
                claim, index, configuration_parameters(axes, index), error=error
            )
    chunk_done(claim)
    return count


def _best(rows: list[tuple[int, dict[str, Any], dict[str, Any]]], key: str, *, lowest: bool) -> Any:
    """The configuration whose best system has the best ``key`` (None if no value)."""
    best: tuple[float, int, dict[str, Any], str] | None = None
    for index, parameters, result in rows:
        for system in result.get("systems", ()):
            value = system.get(key)
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            if not math.isfinite(value):
                continue
            score = value if lowest else -value
            if best is None or score < best[0]:
                best = (score, index, parameters, str(system.get("name", "")))
    if best is None:
        return None
    value = best[0] if lowest else -best[0]
    return {"index": best[1], "parameters": best[2], "system": best[3], "value": value}


def sweep_finalise(sweep_id: int) -> bool:
    """Move a fully recorded sweep to ``finished`` with its summary (exactly once)."""
    sweep = Sweep.objects.filter(pk=sweep_id).first()
    if sweep is None or sweep.is_final or sweep.recorded < sweep.total:
        return False
    rows: list[tuple[int, dict[str, Any], dict[str, Any]]] = [
        (index, parameters, result or {})  # a succeeded configuration always has its result
        for index, parameters, result in SweepResult.objects.filter(
            sweep_id=sweep_id, status=ConfigurationStatus.SUCCEEDED
        )
        .order_by("index")
        .values_list("index", "parameters", "result")
        .iterator(chunk_size=2000)
    ]
    slo_met = sum(
        1
        for _, _, result in rows
        if any(s.get("slo_met") is True for s in result.get("systems", ()))
    )
    summary = {
        "configurations": sweep.total,
        "succeeded": sweep.succeeded_count,
        "failed": sweep.failed_count,
        "slo_met": slo_met,
        "best": {
            "throughput_tok_s": _best(rows, "throughput_tok_s", lowest=False),
            "cost_efficiency_tok_s_per_usd": _best(
                rows, "cost_efficiency_tok_s_per_usd", lowest=False
            ),
            "energy_j_per_token": _best(rows, "energy_j_per_token", lowest=True),
        },
    }
    now = timezone.now()
    changed = Sweep.objects.filter(
        pk=sweep_id,
        status__in=SWEEP_ACTIVE_STATUSES,
        total=F("succeeded_count") + F("failed_count"),
    ).update(status=SweepStatus.FINISHED, finished_at=now, summary=finite(summary))
    return bool(changed)


def sweep_cancel(*, sweep: Sweep, user: Any) -> bool:
    """Cancel a queued or running sweep; False if it was already final.

    Chunks in flight stop at their next configuration; recorded results stay readable.
    """
    if sweep.owner_id != user.pk and not user.is_staff:
        raise PermissionDenied("not your sweep")
    return bool(
        Sweep.objects.filter(pk=sweep.pk, status__in=SWEEP_ACTIVE_STATUSES).update(
            status=SweepStatus.CANCELLED, finished_at=timezone.now()
        )
    )


@dataclass
class SweepReconcileReport:
    """What :func:`sweeps_reconcile` did, by chunk or sweep id."""

    requeued: list[int] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)
    finalised: list[int] = field(default_factory=list)


def sweeps_reconcile(*, now: datetime | None = None, limit: int = 500) -> SweepReconcileReport:
    """Re-queue chunks whose worker died, re-send lost chunk messages, finalise stragglers.

    * running chunks of active sweeps with a heartbeat older than
      ``HETPLANNER_HEARTBEAT_STALE_S``: back to queued (attempts kept) and re-sent;
    * queued chunks last sent more than ``HETPLANNER_QUEUED_STALE_S`` ago: re-sent;
    * active sweeps whose every configuration is recorded: finalised.

    Duplicate messages are harmless: claims are conditional and results unique.
    """
    now = now or timezone.now()
    report = SweepReconcileReport()
    active = Q(sweep__status__in=SWEEP_ACTIVE_STATUSES)
    report.requeued = requeue_stale(
        SweepChunk,
        active,
        now=now,
        limit=limit,
        enqueue=lambda chunk_id: _enqueue_chunk(chunk_id),
    )
    report.resent = resend_lost(
        SweepChunk,
        active,
        queued={"status": ChunkStatus.QUEUED},
        now=now,
        limit=limit,
        enqueue=lambda chunk_id: _enqueue_chunk(chunk_id),
    )
    complete = Sweep.objects.filter(
        status__in=SWEEP_ACTIVE_STATUSES, total=F("succeeded_count") + F("failed_count")
    ).values_list("pk", flat=True)[:limit]
    for sweep_id in complete:
        if sweep_finalise(sweep_id):
            report.finalised.append(sweep_id)
    return report
