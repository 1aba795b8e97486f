"""Every write to the simulations app: catalog, imports, scenarios and the run lifecycle.

Views, the admin, management commands and Celery tasks call these functions instead of
saving models themselves. Inputs are validated before anything is written, so a rejected
input stores nothing. Catalog and import errors are :class:`ValidationError` keyed by field;
scenario errors are :class:`ScenarioValidationError` keyed by JSON path.

Run transitions (queued → running → succeeded / failed / cancelled) are single conditional
UPDATEs (``WHERE status = …``): a final state is never left, and only the attempt that
holds the claim (``status = running AND attempts = n``) can store a result, so a result is
stored exactly once even when workers die or a message is delivered twice. Each transition
that changed the row also writes a :class:`RunEvent` in the same transaction.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from simulations.adapters import (
    catalog_from_db,
    device_values,
    memory_tier_values,
    model_values,
    runtime_values,
    trace_values,
    traces_from_db,
)
from simulations.choices import ACTIVE_STATUSES, RunEventKind, RunStatus
from simulations.core import scenario as scenario_rules
from simulations.core.catalog import (
    device_from_dict,
    iter_records,
    model_from_dict,
    runtime_from_dict,
)
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.hf_config import model_spec_from_hf_config
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile, ScenarioSpec, WorkloadSpec
from simulations.core.traces import parse_azure_trace
from simulations.jobs import mark_unsent, resend_lost, stale_before
from simulations.models import (
    Device,
    LLMModel,
    MemoryTier,
    RunEvent,
    Scenario,
    SimulationRun,
    Trace,
    Workload,
)
from simulations.models import RuntimeProfile as RuntimeProfileRow

logger = logging.getLogger(__name__)

#: Largest scenario document accepted, in bytes of compact JSON.
MAX_DOCUMENT_BYTES = 256 * 1024
#: Largest trace upload, in bytes.
MAX_TRACE_BYTES = 32 * 1024 * 1024
#: Longest error message stored on a run, in characters.
MAX_ERROR_CHARS = 4000


def _validation_error(exc: SpecError, field_name: str | None = None) -> ValidationError:
    """A SpecError as a field-keyed ValidationError (under ``field_name`` if given)."""
    if field_name is not None:
        return ValidationError({field_name: [f"{exc.field}: {exc.message}"]})
    key = exc.field.rsplit(".", 1)[-1] or "__all__"
    return ValidationError({key: [exc.message]})


# --- catalog ---------------------------------------------------------------------------------


def device_save(spec: DeviceSpec, *, notes: str = "") -> Device:
    """Create or update the device ``spec.slug`` (and replace its memory tiers).

    ``spec.parent`` must name a device already stored. Raises ValidationError.
    """
    values = device_values(spec)
    values["notes"] = notes
    parent = None
    if spec.parent is not None:
        parent = Device.objects.filter(slug=spec.parent).first()
        if parent is None:
            raise ValidationError({"parent": [f"unknown device {spec.parent!r}"]})
    values["parent"] = parent
    with transaction.atomic():
        row = Device.objects.filter(slug=spec.slug).first() or Device()
        for key, value in values.items():
            setattr(row, key, value)
        row.full_clean()
        row.save()
        row.memory_tiers.all().delete()
        tiers = [MemoryTier(device=row, **t) for t in memory_tier_values(spec)]
        for tier in tiers:
            tier.full_clean(exclude=["device"])
        MemoryTier.objects.bulk_create(tiers)
    return row


def runtime_save(
    spec: RuntimeProfile, *, default_for_kind: bool = False, notes: str = ""
) -> RuntimeProfileRow:
    """Create or update the runtime profile ``spec.slug``.

    With ``default_for_kind`` it becomes its kind's default (the previous default loses
    the mark). Raises ValidationError.
    """
    values = runtime_values(spec)
    values.update(default_for_kind=default_for_kind, notes=notes)
    with transaction.atomic():
        if default_for_kind:
            RuntimeProfileRow.objects.filter(
                device_kind=values["device_kind"], default_for_kind=True
            ).exclude(slug=spec.slug).update(default_for_kind=False)
        row = RuntimeProfileRow.objects.filter(slug=spec.slug).first() or RuntimeProfileRow()
        for key, value in values.items():
            setattr(row, key, value)
        row.full_clean()
        row.save()
    return row


def model_save(
    spec: ModelSpec, *, notes: str = "", hf_config: Mapping[str, Any] | None = None
) -> LLMModel:
    """Create or update the model ``spec.slug``. Raises ValidationError."""
    values = model_values(spec)
    values["notes"] = notes
    if hf_config is not None:
        values["hf_config"] = dict(hf_config)
    with transaction.atomic():
        row = LLMModel.objects.filter(slug=spec.slug).first() or LLMModel()
        for key, value in values.items():
            setattr(row, key, value)
        row.full_clean()
        row.save()
    return row


@dataclass
class SeedReport:
    """What :func:`catalog_seed` stored, by kind of record."""

    devices: list[str] = field(default_factory=list)
    runtimes: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{len(self.devices)} devices, {len(self.runtimes)} runtime profiles, "
            f"{len(self.models)} models"
        )


def _record_error(kind: str, record: Mapping[str, Any], exc: Exception) -> ValidationError:
    slug = record.get("slug", "?")
    if isinstance(exc, SpecError):
        return ValidationError(f"{kind} {slug!r}: {exc.field}: {exc.message}")
    if isinstance(exc, ValidationError):
        return ValidationError(f"{kind} {slug!r}: {'; '.join(exc.messages)}")
    return ValidationError(f"{kind} {slug!r}: {exc}")


def catalog_seed(
    *,
    devices: Iterable[Mapping[str, Any]] | None = None,
    runtimes: Iterable[Mapping[str, Any]] | None = None,
    models: Iterable[Mapping[str, Any]] | None = None,
) -> SeedReport:
    """Load catalog records (default: the built-in JSON files) into the database.

    Idempotent: records are matched by slug and updated in place; rows not in the records
    are left alone. Each record is validated as a core spec first; one bad record rolls
    the whole seed back (ValidationError naming it). Parents are stored before components.
    """
    dev_records = list(iter_records("devices") if devices is None else devices)
    rt_records = list(iter_records("runtimes") if runtimes is None else runtimes)
    model_records = list(iter_records("models") if models is None else models)
    report = SeedReport()
    with transaction.atomic():
        specs: list[tuple[DeviceSpec, str]] = []
        for rec in dev_records:
            try:
                specs.append((device_from_dict(rec), str(rec.get("notes", ""))))
            except (SpecError, TypeError, ValueError) as exc:
                raise _record_error("device", rec, exc) from exc
        # Parents first, so a component's FK resolves whatever the file order.
        specs.sort(key=lambda s: s[0].parent is not None)
        for spec, notes in specs:
            try:
                device_save(spec, notes=notes)
            except ValidationError as exc:
                raise _record_error("device", {"slug": spec.slug}, exc) from exc
            report.devices.append(spec.slug)
        for rec in rt_records:
            rec = dict(rec)
            is_default = bool(rec.pop("default_for_kind", False))
            notes = str(rec.get("notes", ""))
            try:
                rt = runtime_from_dict(rec)
                runtime_save(rt, default_for_kind=is_default, notes=notes)
            except (SpecError, ValidationError, TypeError, ValueError) as exc:
                raise _record_error("runtime", rec, exc) from exc
            report.runtimes.append(rt.slug)
        for rec in model_records:
            try:
                model = model_from_dict(rec)
                model_save(model, notes=str(rec.get("notes", "")))
            except (SpecError, ValidationError, TypeError, ValueError) as exc:
                raise _record_error("model", rec, exc) from exc
            report.models.append(model.slug)
    return report


def hf_model_import(
    *, config: Any, slug: str, name: str, origin: str = "Hugging Face config.json"
) -> LLMModel:
    """Create or update a model from a Hugging Face ``config.json`` (a dict or JSON text).

    Raises ValidationError (``config`` for a bad file, or the model field at fault).
    """
    if isinstance(config, str | bytes):
        if len(config) > 1024 * 1024:
            raise ValidationError({"config": ["config.json is larger than 1 MiB"]})
        try:
            config = json.loads(config)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError({"config": [f"not valid JSON: {exc}"]}) from exc
    if not isinstance(config, Mapping):
        raise ValidationError({"config": ["must be a JSON object"]})
    try:
        spec = model_spec_from_hf_config(config, slug=slug, name=name, origin=origin)
    except SpecError as exc:
        if exc.field.startswith("config"):
            raise _validation_error(exc, "config") from exc
        raise _validation_error(exc) from exc
    return model_save(spec, hf_config=config)


def trace_parse(*, slug: str, text: str | bytes) -> dict[str, Any]:
    """Parse an Azure-format trace into Trace column values (``request_count``,
    ``duration_s``, ``data``); ValidationError under ``text`` names the line and column."""
    if len(text) > MAX_TRACE_BYTES:
        raise ValidationError({"text": [f"the trace is larger than {MAX_TRACE_BYTES} bytes"]})
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError({"text": [f"not UTF-8 text (byte {exc.start})"]}) from exc
    try:
        data = parse_azure_trace(text, name=slug)
    except SpecError as exc:
        raise _validation_error(exc, "text") from exc
    if len(data.arrival_s) > scenario_rules.MAX_TRACE_ROWS:
        raise ValidationError(
            {"text": [f"at most {scenario_rules.MAX_TRACE_ROWS} rows, got {len(data.arrival_s)}"]}
        )
    return trace_values(data)


def trace_import(
    *,
    slug: str,
    name: str,
    text: str | bytes,
    source: str = "",
    uploaded_by: Any = None,
) -> Trace:
    """Store an Azure-format trace (``TIMESTAMP,ContextTokens,GeneratedTokens``) parsed.

    Raises ValidationError (``text`` names the line and column at fault); nothing is
    stored then.
    """
    values = trace_parse(slug=slug, text=text)
    row = Trace(slug=slug, name=name, source=source, uploaded_by=uploaded_by, **values)
    row.full_clean()
    row.save()
    return row


# --- workloads and scenarios -----------------------------------------------------------------


def _document_size_check(document: Any) -> None:
    try:
        size = len(json.dumps(document, separators=(",", ":"), allow_nan=True))
    except (TypeError, ValueError) as exc:
        raise ScenarioValidationError(
            {scenario_rules.ROOT: [f"is not a JSON document: {exc}"]}
        ) from exc
    if size > MAX_DOCUMENT_BYTES:
        raise ScenarioValidationError(
            {scenario_rules.ROOT: [f"is {size} bytes; at most {MAX_DOCUMENT_BYTES} are allowed"]}
        )


def scenario_validate(document: Any) -> ScenarioSpec:
    """Parse ``document`` against the catalog in the database (ScenarioValidationError)."""
    _document_size_check(document)
    traces = traces_from_db(scenario_rules.trace_names(document))
    return scenario_rules.parse_scenario(document, catalog_from_db(), traces=traces)


def scenario_create(*, owner: Any, document: Any, shared: bool = False) -> Scenario:
    """Validate and store a scenario document owned by ``owner``.

    Raises ScenarioValidationError (every problem, keyed by JSON path); nothing is stored then.
    """
    spec = scenario_validate(document)
    return Scenario.objects.create(owner=owner, name=spec.name, document=document, shared=shared)


def scenario_update(
    *, scenario: Scenario, document: Any = None, shared: bool | None = None
) -> Scenario:
    """Replace the document and/or the sharing flag (validated like :func:`scenario_create`)."""
    fields = ["updated_at"]
    if document is not None:
        spec = scenario_validate(document)
        scenario.document, scenario.name = document, spec.name
        fields += ["document", "name"]
    if shared is not None:
        scenario.shared = shared
        fields.append("shared")
    scenario.save(update_fields=fields)
    return scenario


def workload_validate(workload: Workload) -> WorkloadSpec:
    """Validate a (possibly unsaved) Workload row as a scenario's ``workload`` object."""
    doc = workload.to_document()
    traces = traces_from_db(scenario_rules.workload_trace_names(doc))
    return scenario_rules.parse_workload(doc, traces=traces)


def workload_create(*, owner: Any, name: str, shared: bool = False, **fields: Any) -> Workload:
    """Validate and store a workload (fields as on :class:`Workload`).

    Raises ValidationError (column rules) or ScenarioValidationError (the workload object,
    keyed ``workload.…``); nothing is stored then.
    """
    row = Workload(owner=owner, name=name, shared=shared, **fields)
    row.full_clean()
    workload_validate(row)
    row.save()
    return row


# --- runs ------------------------------------------------------------------------------------


def _enqueue(run_id: int) -> None:
    """Send the run's task message; a broker failure is logged, the reconciler resends."""
    from simulations.tasks import run_simulation

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
    scenario_validate(scenario.document)
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


@dataclass(frozen=True)
class Claim:
    """A worker's hold on a run: only this attempt may store the run's outcome."""

    run_id: int
    attempt: int
    document: Any


def run_claim(
    run_id: int, *, worker: str, resume_attempt: int | None = None, now: datetime | None = None
) -> Claim | None:
    """Claim ``run_id`` for this delivery with one conditional UPDATE, or return None.

    Claimable: queued, or running with a stale heartbeat (its worker died), or — when a
    task retries after a transient error — running under ``resume_attempt``. The update
    also increments ``attempts``; a run that already used ``HETPLANNER_MAX_ATTEMPTS``
    deliveries is failed instead. None means another worker holds it or it is final.
    """
    now = now or timezone.now()
    row = SimulationRun.objects.filter(pk=run_id).values("attempts", "document", "worker").first()
    if row is None:
        return None
    attempts = row["attempts"]
    claimable = Q(status=RunStatus.QUEUED) | Q(
        status=RunStatus.RUNNING, heartbeat_at__lt=stale_before(now)
    )
    if resume_attempt is not None:
        claimable |= Q(status=RunStatus.RUNNING, attempts=resume_attempt)
    if attempts >= settings.HETPLANNER_MAX_ATTEMPTS:
        lost = f" (last worker: {row['worker']})" if row["worker"] else ""
        _finish(
            SimulationRun.objects.filter(claimable, pk=run_id, attempts=attempts),
            run_id,
            attempts,
            RunStatus.FAILED,
            error=f"gave up after {attempts} attempts: the worker running it was lost{lost}",
            now=now,
        )
        return None
    with transaction.atomic():
        changed = SimulationRun.objects.filter(claimable, pk=run_id, attempts=attempts).update(
            status=RunStatus.RUNNING,
            attempts=attempts + 1,
            started_at=Coalesce("started_at", Value(now)),
            heartbeat_at=now,
            progress=0,
            worker=worker[:200],
        )
        if changed:
            _event(run_id, RunEventKind.CLAIMED, attempts + 1, worker)
    return Claim(run_id, attempts + 1, row["document"]) if changed else None


def run_mark_progress(run_id: int, attempt: int, percent: int) -> bool:
    """Record progress (0–99) and a heartbeat; False if this attempt no longer holds the run
    (it was cancelled, or the reconciler gave it to another attempt)."""
    percent = max(0, min(99, int(percent)))
    return bool(
        SimulationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, attempts=attempt).update(
            progress=percent, heartbeat_at=timezone.now()
        )
    )


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON: numpy scalars unwrapped, tuples as lists, NaN/±Inf as null."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, str | bytes):
        with contextlib.suppress(TypeError, ValueError):
            value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "tolist"):
        return _json_safe(value.tolist())
    return str(value)


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
    return _finish(qs, run_id, attempt, RunStatus.SUCCEEDED, result=_json_safe(result))


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


@dataclass
class ReconcileReport:
    """What :func:`runs_reconcile` did, by run id."""

    requeued: list[int] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def runs_reconcile(*, now: datetime | None = None, limit: int = 500) -> ReconcileReport:
    """Re-queue runs whose worker died and re-send runs whose message may be lost.

    * running with a heartbeat older than ``HETPLANNER_HEARTBEAT_STALE_S``: back to queued
      and re-sent (or failed when its attempts are used up);
    * queued and last sent more than ``HETPLANNER_QUEUED_STALE_S`` ago (e.g. the broker
      lost its data): re-sent. A duplicate message is harmless: claims are conditional.
    """
    now = now or timezone.now()
    report = ReconcileReport()
    stale = SimulationRun.objects.filter(
        status=RunStatus.RUNNING, heartbeat_at__lt=stale_before(now)
    ).values_list("pk", "attempts", "worker")[:limit]
    for run_id, attempts, worker in stale:
        guard = SimulationRun.objects.filter(
            pk=run_id,
            status=RunStatus.RUNNING,
            attempts=attempts,
            heartbeat_at__lt=stale_before(now),
        )
        if attempts >= settings.HETPLANNER_MAX_ATTEMPTS:
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
            continue
        with transaction.atomic():
            if guard.update(status=RunStatus.QUEUED, enqueued_at=now, progress=0, worker=""):
                _event(run_id, RunEventKind.REQUEUED, attempts, f"no heartbeat from {worker}")
                transaction.on_commit(lambda run_id=run_id: _enqueue(run_id))
                report.requeued.append(run_id)
    report.resent = resend_lost(
        SimulationRun,
        Q(),
        queued={"status": RunStatus.QUEUED},
        now=now,
        limit=limit,
        enqueue=lambda run_id: _enqueue(run_id),
    )
    return report
