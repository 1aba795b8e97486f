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

import json
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import ProtectedError, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from simulations import selectors
from simulations.adapters import (
    catalog_from_db,
    device_values,
    memory_tier_values,
    model_values,
    runtime_values,
    trace_values,
    traces_from_db,
)
from simulations.choices import (
    ACTIVE_STATUSES,
    RunEventKind,
    RunStatus,
    TraceParseStatus,
    TraceVisibility,
)
from simulations.core import json_fields
from simulations.core import scenario as scenario_rules
from simulations.core.catalog import (
    device_from_dict,
    iter_records,
    model_from_dict,
    runtime_from_dict,
)
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.hf_config import model_spec_from_hf_config
from simulations.core.jsonsafe import finite
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile, ScenarioSpec, WorkloadSpec
from simulations.core.traces import check_azure_header, count_rows_upto, parse_azure_trace
from simulations.jobs import mark_unsent, resend_lost, stale_before
from simulations.measurements.selectors import runtimes_visible_to
from simulations.models import (
    Device,
    LLMModel,
    MemoryTier,
    RunEvent,
    Scenario,
    SimulationRun,
    Trace,
    TraceReference,
    Workload,
)
from simulations.models import RuntimeProfile as RuntimeProfileRow
from simulations.permissions import can_delete_trace, can_edit_catalog

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


def _json_normal(value: Any) -> Any:
    """``value`` as a JSON column gives it back (tuples as lists, str enums as strings)."""
    return json.loads(json.dumps(value))


def device_seed_values(spec: DeviceSpec, *, notes: str = "") -> dict[str, Any]:
    """What seeding ``spec`` writes to its Device row, as a snapshot: the columns, plus
    ``parent`` (a slug) and ``memory_tiers`` (the MemoryTier rows' values, in order)."""
    values = device_values(spec)
    values.update(notes=notes, parent=spec.parent, memory_tiers=memory_tier_values(spec))
    return dict(_json_normal(values))


def runtime_seed_values(
    spec: RuntimeProfile, *, default_for_kind: bool = False, notes: str = ""
) -> dict[str, Any]:
    """What seeding ``spec`` writes to its RuntimeProfile row, as a snapshot."""
    values = runtime_values(spec)
    values.update(default_for_kind=default_for_kind, notes=notes)
    return dict(_json_normal(values))


def model_seed_values(spec: ModelSpec, *, notes: str = "") -> dict[str, Any]:
    """What seeding ``spec`` writes to its LLMModel row, as a snapshot."""
    values = model_values(spec)
    values["notes"] = notes
    return dict(_json_normal(values))


def current_seed_values(row: Any, keys: Iterable[str]) -> dict[str, Any]:
    """The row's current values under the snapshot keys ``keys`` (the shape of
    :func:`device_seed_values` and its siblings), JSON-normalised for comparison."""
    out: dict[str, Any] = {}
    for key in keys:
        if key == "parent":
            out[key] = row.parent.slug if row.parent_id is not None else None
        elif key == "memory_tiers":
            out[key] = [
                {
                    "order": t.order,
                    "kind": t.kind,
                    "capacity_gb": t.capacity_gb,
                    "bw_gbps": t.bw_gbps,
                }
                for t in row.memory_tiers.order_by("order")
            ]
        else:
            out[key] = getattr(row, key)
    return dict(_json_normal(out))


def seed_owned(row: Any, new: Mapping[str, Any]) -> bool:
    """Whether the seed still owns ``row``: it has a snapshot and its current values equal
    the snapshot on every key the snapshot and the new seed values ``new`` share (a key new
    to the seed, or one it no longer writes, is not an edit). A row without a snapshot was
    not written by the seed (staff created it): never owned."""
    snapshot = row.seed_values or {}
    if not isinstance(snapshot, dict) or not snapshot:
        return False
    keys = [k for k in new if k in snapshot]
    current = current_seed_values(row, keys)
    return all(current[k] == snapshot[k] for k in keys)


@dataclass
class SeedReport:
    """What :func:`catalog_seed` did: the slugs of every record, by kind of record, and the
    rows it created, updated, forced back (``reset``) or left alone because staff edited
    them (``kept``), each as ``"<kind> <slug>"``."""

    devices: list[str] = field(default_factory=list)
    runtimes: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = (
            f"{len(self.devices)} devices, {len(self.runtimes)} runtime profiles, "
            f"{len(self.models)} models ({len(self.created)} created, "
            f"{len(self.updated)} updated)"
        )
        if self.reset:
            text += f"; reset {', '.join(self.reset)}"
        if self.kept:
            rows = "row" if len(self.kept) == 1 else "rows"
            text += (
                f"; kept {len(self.kept)} edited {rows}: {', '.join(self.kept)} "
                "(staff changed them; `seed_catalog --reset SLUG` restores one)"
            )
        return text


def _record_error(kind: str, record: Mapping[str, Any], exc: Exception) -> ValidationError:
    slug = record.get("slug", "?")
    if isinstance(exc, SpecError):
        return ValidationError(f"{kind} {slug!r}: {exc.field}: {exc.message}")
    if isinstance(exc, ValidationError):
        return ValidationError(f"{kind} {slug!r}: {'; '.join(exc.messages)}")
    return ValidationError(f"{kind} {slug!r}: {exc}")


def _seed_row(
    report: SeedReport,
    kind: str,
    model: Any,
    slug: str,
    new: dict[str, Any],
    reset: Collection[str],
    save: Any,
) -> None:
    """Create, update or keep the ``model`` row ``slug`` (see :func:`catalog_seed`);
    ``save()`` writes the seed's values, then the snapshot is stored beside them."""
    row = model.objects.filter(slug=slug).first()
    label = f"{kind} {slug}"
    if row is not None and slug not in reset and not seed_owned(row, new):
        report.kept.append(label)
        return
    if (
        row is not None
        and slug not in reset
        and row.seed_values == new
        and current_seed_values(row, new) == new
    ):
        return  # already the seed's values: no write (updated_at, memory tier ids) at all
    saved = save()
    model.objects.filter(pk=saved.pk).update(seed_values=new)
    if row is None:
        report.created.append(label)
    else:
        (report.reset if slug in reset else report.updated).append(label)


def catalog_seed(
    *,
    devices: Iterable[Mapping[str, Any]] | None = None,
    runtimes: Iterable[Mapping[str, Any]] | None = None,
    models: Iterable[Mapping[str, Any]] | None = None,
    reset: Collection[str] = (),
) -> SeedReport:
    """Load catalog records (default: the built-in JSON files) into the database.

    Records are matched by slug. A missing row is created; an existing row is updated only
    while the seed still owns it — its values equal the snapshot of what the seed last
    wrote (``seed_values``) — so a row staff edited (admin, API, page) is left alone and
    reported in ``kept``. ``reset`` names slugs forced back to the seed all the same
    (ValidationError if one is not in the records). Rows not in the records are left
    alone. Each record is validated as a core spec first; one bad record rolls the whole
    seed back (ValidationError naming it). Parents are stored before components.
    """
    dev_records = list(iter_records("devices") if devices is None else devices)
    rt_records = list(iter_records("runtimes") if runtimes is None else runtimes)
    model_records = list(iter_records("models") if models is None else models)
    known = {str(r.get("slug")) for r in (*dev_records, *rt_records, *model_records)}
    unknown = sorted(set(reset) - known)
    if unknown:
        raise ValidationError(
            {"reset": [f"not in the seed data: {', '.join(unknown)} (nothing was changed)"]}
        )
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
                _seed_row(
                    report,
                    "device",
                    Device,
                    spec.slug,
                    device_seed_values(spec, notes=notes),
                    reset,
                    lambda spec=spec, notes=notes: device_save(spec, notes=notes),
                )
            except ValidationError as exc:
                raise _record_error("device", {"slug": spec.slug}, exc) from exc
            report.devices.append(spec.slug)
        for rec in rt_records:
            rec = dict(rec)
            is_default = bool(rec.pop("default_for_kind", False))
            notes = str(rec.get("notes", ""))
            try:
                rt = runtime_from_dict(rec)
                _seed_runtime(report, rt, is_default, notes, reset)
            except (SpecError, ValidationError, TypeError, ValueError) as exc:
                raise _record_error("runtime", rec, exc) from exc
            report.runtimes.append(rt.slug)
        for rec in model_records:
            try:
                model = model_from_dict(rec)
                notes = str(rec.get("notes", ""))
                _seed_row(
                    report,
                    "model",
                    LLMModel,
                    model.slug,
                    model_seed_values(model, notes=notes),
                    reset,
                    lambda model=model, notes=notes: model_save(model, notes=notes),
                )
            except (SpecError, ValidationError, TypeError, ValueError) as exc:
                raise _record_error("model", rec, exc) from exc
            report.models.append(model.slug)
    return report


def _seed_runtime(
    report: SeedReport, rt: RuntimeProfile, is_default: bool, notes: str, reset: Collection[str]
) -> None:
    """Seed one runtime profile. Making it its kind's default clears the previous default's
    mark; when the seed made that one's mark too, its snapshot follows, so the move is not
    mistaken for a staff edit at the next seed."""
    before = set(
        RuntimeProfileRow.objects.filter(
            device_kind=str(rt.device_kind), default_for_kind=True
        ).values_list("pk", flat=True)
    )
    _seed_row(
        report,
        "runtime",
        RuntimeProfileRow,
        rt.slug,
        runtime_seed_values(rt, default_for_kind=is_default, notes=notes),
        reset,
        lambda: runtime_save(rt, default_for_kind=is_default, notes=notes),
    )
    for row in RuntimeProfileRow.objects.filter(pk__in=before, default_for_kind=False):
        snapshot = row.seed_values or {}
        if isinstance(snapshot, dict) and snapshot.get("default_for_kind") is True:
            RuntimeProfileRow.objects.filter(pk=row.pk).update(
                seed_values={**snapshot, "default_for_kind": False}
            )


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
            config = json_fields.loads(config, path="config")
        except json_fields.JsonInputError as exc:
            raise ValidationError(exc.problems) from exc
    if not isinstance(config, Mapping):
        raise ValidationError({"config": ["must be a JSON object"]})
    problems = json_fields.storable_problems(config, "config")
    if problems:
        raise ValidationError(problems)
    try:
        spec = model_spec_from_hf_config(config, slug=slug, name=name, origin=origin)
    except SpecError as exc:
        if exc.field.startswith("config"):
            raise _validation_error(exc, "config") from exc
        raise _validation_error(exc) from exc
    return model_save(spec, hf_config=config)


def _trace_text(text: str | bytes) -> str:
    """The upload as text within the byte cap; ValidationError under ``text`` otherwise."""
    if len(text) > MAX_TRACE_BYTES:
        raise ValidationError({"text": [f"the trace is larger than {MAX_TRACE_BYTES} bytes"]})
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError({"text": [f"not UTF-8 text (byte {exc.start})"]}) from exc
    return text


def trace_parse(*, slug: str, text: str | bytes) -> dict[str, Any]:
    """Parse an Azure-format trace into Trace column values (``request_count``,
    ``duration_s``, ``data``); ValidationError under ``text`` names the line and column."""
    text = _trace_text(text)
    try:
        # the row cap is checked by a cheap scan before any row is parsed (a 1,000,000-row
        # upload is refused in milliseconds, not after parsing it all)
        data = parse_azure_trace(text, name=slug, max_rows=scenario_rules.MAX_TRACE_ROWS)
    except SpecError as exc:
        raise _validation_error(exc, "text") from exc
    return trace_values(data)


def _trace_precheck(*, slug: str, text: str) -> None:
    """What can be refused at upload without parsing a row: a NUL (PostgreSQL text cannot
    hold it), the header, and the row cap (a scan of line ends)."""
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise ValidationError({"text": [f"{slug}: trace line {line}: contains a NUL character"]})
    try:
        check_azure_header(text, name=slug)
        over = count_rows_upto(text, scenario_rules.MAX_TRACE_ROWS)
    except SpecError as exc:
        raise _validation_error(exc, "text") from exc
    if over is not None:
        cap = scenario_rules.MAX_TRACE_ROWS
        raise ValidationError(
            {
                "text": [
                    f"{slug}: trace line {over}: the trace has more than {cap} rows; "
                    f"at most {cap} rows are allowed"
                ]
            }
        )


def trace_import(
    *,
    slug: str,
    name: str,
    text: str | bytes,
    source: str = "",
    owner: Any = None,
    visibility: str | None = None,
) -> Trace:
    """Store an Azure-format trace (``TIMESTAMP,ContextTokens,GeneratedTokens``) owned by
    ``owner`` (None: a built-in trace) with ``visibility`` — by default private for an
    upload and public for a built-in trace; only a catalog editor (or the system, without
    an owner) publishes one.

    Up to ``HETPLANNER_TRACE_ASYNC_BYTES`` the trace is parsed here and stored ``done``;
    a larger one is checked cheaply (size, UTF-8, NUL, header, row cap), stored ``queued``
    with its text, and parsed by the :func:`simulations.tasks.parse_trace` task queued
    when the transaction commits (the row then says ``done`` or ``failed`` with the line
    at fault). Raises ValidationError (``text`` names the line and column at fault,
    ``visibility`` a refused choice); nothing is stored then.
    """
    if visibility is None:
        visibility = TraceVisibility.PRIVATE if owner is not None else TraceVisibility.PUBLIC
    if visibility == TraceVisibility.PUBLIC and owner is not None and not can_edit_catalog(owner):
        raise ValidationError(
            {"visibility": ["only staff publish a trace; choose private or shared"]}
        )
    text = _trace_text(text)
    common = {"slug": slug, "name": name, "source": source, "owner": owner}
    if len(text) <= settings.HETPLANNER_TRACE_ASYNC_BYTES:
        values = trace_parse(slug=slug, text=text)
        row = Trace(**common, visibility=visibility, **values)
        row.full_clean()
        row.save()
        return row
    _trace_precheck(slug=slug, text=text)
    row = Trace(
        **common,
        visibility=visibility,
        parse_status=TraceParseStatus.QUEUED,
        upload_text=text,
        enqueued_at=timezone.now(),
    )
    row.full_clean(exclude=["upload_text"])
    with transaction.atomic():
        row.save()
        trace_id = row.pk
        transaction.on_commit(lambda: _enqueue_trace_parse(trace_id))
    return row


class TraceInUseError(Exception):
    """A trace cannot be deleted: scenarios, sweeps, plans or workloads use it.

    ``referrers`` lists them (:func:`trace_referrers`), ``str()`` names them.
    """

    def __init__(self, trace: Trace, referrers: list[dict[str, Any]]) -> None:
        self.trace_slug = trace.slug
        self.referrers = referrers
        names = ", ".join(
            f"{r['kind']} #{r['id']}"
            + (f" “{r['name']}”" if r["name"] else "")
            + (f" ({r['owner']})" if r["owner"] else "")
            for r in referrers
        )
        super().__init__(
            f"trace {trace.slug!r} is still used by {names}; nothing was deleted "
            "(change or delete those first)"
        )


def trace_referrers(trace: Trace, user: Any) -> list[dict[str, Any]]:
    """Every row that uses ``trace``: ``{"kind", "id", "owner", "name"}`` by kind and id.

    ``owner`` is the username (so the trace's owner knows whom to ask); ``name`` is given
    only where ``user`` may read the row (their own, or a shared scenario or workload) —
    another user's private row is counted, never described.
    """
    out: list[dict[str, Any]] = []
    refs = (
        TraceReference.objects.filter(trace=trace)
        .select_related("scenario__owner", "sweep__owner", "plan__owner")
        .order_by("id")
    )
    rows: list[tuple[str, Any]] = []
    for ref in refs:
        for kind in ("scenario", "sweep", "plan"):
            row = getattr(ref, kind)
            if row is not None:
                rows.append((kind, row))
    rows += [("workload", w) for w in Workload.objects.filter(trace=trace).select_related("owner")]
    order = {"scenario": 0, "sweep": 1, "plan": 2, "workload": 3}
    for kind, row in sorted(rows, key=lambda kr: (order[kr[0]], kr[1].pk)):
        readable = row.owner_id == getattr(user, "pk", None) or (
            isinstance(row, Scenario | Workload) and row.shared
        )
        out.append(
            {
                "kind": kind,
                "id": row.pk,
                "owner": row.owner.get_username() if row.owner_id else None,
                "name": row.name if readable else None,
            }
        )
    return out


def trace_delete(*, trace: Trace, user: Any) -> None:
    """Delete ``trace`` unless something uses it.

    Its owner deletes a private or shared trace; catalog editors delete any (a public one
    only they). PermissionDenied otherwise; TraceInUseError (naming the referrers) while
    scenarios, sweeps, plans or workloads use it — nothing is deleted then. The trace row
    is locked while the references are read, and the PROTECT foreign keys refuse a delete
    that races a new reference.
    """
    if not can_delete_trace(user, trace):
        raise PermissionDenied("only its owner or staff delete a trace")
    try:
        with transaction.atomic():
            Trace.objects.select_for_update().filter(pk=trace.pk).first()
            referrers = trace_referrers(trace, user)
            if referrers:
                raise TraceInUseError(trace, referrers)
            trace.delete()
    except ProtectedError as exc:
        raise TraceInUseError(trace, trace_referrers(trace, user)) from exc


def trace_references_set(
    names: Iterable[str], *, scenario: Any = None, sweep: Any = None, plan: Any = None
) -> None:
    """Record that one scenario, sweep or plan uses the traces ``names`` (replacing what it
    recorded before). Call inside the transaction that saves the row, after validating the
    document: the trace rows are locked (a concurrent :func:`trace_delete` waits), and a
    name that no longer exists — deleted since the validation — is a
    ScenarioValidationError, which rolls the save back."""
    owner = {"scenario": scenario, "sweep": sweep, "plan": plan}
    given = {k: v for k, v in owner.items() if v is not None}
    if len(given) != 1:
        raise TypeError("give exactly one of scenario, sweep, plan")
    ((field_name, row),) = given.items()
    names = set(names)
    found = dict(Trace.objects.select_for_update().filter(slug__in=names).values_list("slug", "pk"))
    gone = sorted(names - found.keys())
    if gone:
        raise ScenarioValidationError(
            {"workload": [f"unknown trace {name!r} (deleted meanwhile)" for name in gone]}
        )
    wanted = set(found.values())
    existing = TraceReference.objects.filter(**{field_name: row})
    existing.exclude(trace_id__in=wanted).delete()
    have = set(existing.values_list("trace_id", flat=True))
    TraceReference.objects.bulk_create(
        TraceReference(trace_id=pk, **{field_name: row}) for pk in sorted(wanted - have)
    )


def _enqueue_trace_parse(trace_id: int) -> None:
    """Send the parse task; a broker failure is logged (the row stays ``queued``)."""
    from simulations.tasks import parse_trace

    try:
        parse_trace.delay(trace_id)
    except Exception:
        logger.exception("could not queue the parse of trace %s; the reconciler resends", trace_id)
        mark_unsent(Trace, [trace_id], queued={"parse_status": TraceParseStatus.QUEUED})


def trace_parse_claim(
    trace_id: int, *, resume_attempt: int | None = None, now: datetime | None = None
) -> int | None:
    """Claim the parse of ``trace_id`` with one conditional UPDATE; the attempt number, or
    None when it is not claimable (parsed, failed, or held by a live attempt).

    Claimable: queued; running whose attempt started longer ago than the task time limit
    (its worker died); or running under ``resume_attempt`` (a retry after a transient
    error). After ``HETPLANNER_MAX_ATTEMPTS`` deliveries the trace fails instead.
    """
    now = now or timezone.now()
    row = Trace.objects.filter(pk=trace_id).values("parse_attempts").first()
    if row is None:
        return None
    attempts = row["parse_attempts"]
    lost_before = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    claimable = Q(parse_status=TraceParseStatus.QUEUED) | Q(
        parse_status=TraceParseStatus.RUNNING, parse_started_at__lt=lost_before
    )
    if resume_attempt is not None:
        claimable |= Q(parse_status=TraceParseStatus.RUNNING, parse_attempts=resume_attempt)
    guard = Trace.objects.filter(claimable, pk=trace_id, parse_attempts=attempts)
    if attempts >= settings.HETPLANNER_MAX_ATTEMPTS:
        guard.update(
            parse_status=TraceParseStatus.FAILED,
            parse_error=f"gave up after {attempts} attempts: the worker parsing it was lost",
            upload_text="",
        )
        return None
    changed = guard.update(
        parse_status=TraceParseStatus.RUNNING,
        parse_attempts=attempts + 1,
        parse_started_at=now,
    )
    return attempts + 1 if changed else None


def traces_reconcile(*, now: datetime | None = None, limit: int = 500) -> ReconcileReport:
    """Re-send the parse of uploaded traces whose message may be lost: queued and never sent
    (the broker refused it) or sent more than ``HETPLANNER_QUEUED_STALE_S`` ago, and running
    past the task time limit (its worker died; :func:`trace_parse_claim` lets a new
    delivery take it over). A duplicate message is harmless: the claim is conditional."""
    now = now or timezone.now()
    report = ReconcileReport()
    report.resent = resend_lost(
        Trace,
        Q(),
        queued={"parse_status": TraceParseStatus.QUEUED},
        now=now,
        limit=limit,
        enqueue=_enqueue_trace_parse,
    )
    lost_before = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    lost = Trace.objects.filter(
        parse_status=TraceParseStatus.RUNNING, parse_started_at__lt=lost_before
    ).filter(Q(enqueued_at__lt=lost_before) | Q(enqueued_at__isnull=True))
    for pk, sent in lost.values_list("pk", "enqueued_at")[:limit]:
        with transaction.atomic():
            if Trace.objects.filter(pk=pk, enqueued_at=sent).update(enqueued_at=now):
                transaction.on_commit(partial(_enqueue_trace_parse, pk))
                report.resent.append(pk)
    return report


def trace_parse_run(trace_id: int, attempt: int) -> str:
    """Parse the claimed trace's text and store the columns (``done``) or the error naming
    the line (``failed``), by a conditional update under the claimed attempt."""
    row = Trace.objects.filter(pk=trace_id).values("slug", "upload_text").first()
    if row is None:
        return "gone"
    mine = Trace.objects.filter(
        pk=trace_id, parse_status=TraceParseStatus.RUNNING, parse_attempts=attempt
    )
    try:
        values = trace_parse(slug=row["slug"], text=row["upload_text"])
    except ValidationError as exc:
        message = "; ".join(exc.messages)[:4000]
        mine.update(parse_status=TraceParseStatus.FAILED, parse_error=message, upload_text="")
        return "failed"
    done = mine.update(parse_status=TraceParseStatus.DONE, parse_error="", upload_text="", **values)
    return "done" if done else "lost"


# --- workloads and scenarios -----------------------------------------------------------------


def _document_size_check(document: Any) -> None:
    """ScenarioValidationError when ``document`` cannot be read safely: a NUL character or
    too-deep nesting anywhere (by JSON path), or too many bytes.

    Every document write (scenarios, sweep templates, plans) passes here before any value
    of it reaches a query (trace lookups); non-finite numbers are left to the document
    parser, which names them field by field, and :func:`_storable_check` runs after it."""
    problems = json_fields.storable_problems(document, finite=False)
    if problems:
        raise ScenarioValidationError(problems)
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


def visible_traces(user: Any) -> Any:
    """The traces ``user`` may use (None: every trace — workers and the CLI, which run
    documents validated when they were submitted)."""
    return None if user is None else selectors.traces_visible_to(user)


def visible_runtimes(user: Any) -> Any:
    """The runtime profiles ``user`` may simulate with (None: every profile — workers and
    the CLI). Another user's private profile (saved from their calibration) is unknown."""
    return None if user is None else runtimes_visible_to(user)


def _storable_check(document: Any) -> None:
    """ScenarioValidationError for any value a jsonb column cannot hold (by JSON path),
    e.g. a NaN where the parser does not look; run after the document parser."""
    problems = json_fields.storable_problems(document)
    if problems:
        raise ScenarioValidationError(problems)


def scenario_validate(document: Any, *, user: Any = None) -> ScenarioSpec:
    """Parse ``document`` against the catalog in the database (ScenarioValidationError).

    With ``user``, a trace name resolves only among the traces that user may use (their
    own, shared and public ones): another user's private trace is an unknown trace; a
    runtime likewise among the profiles they may use.
    """
    _document_size_check(document)
    traces = traces_from_db(scenario_rules.trace_names(document), visible_traces(user))
    catalog = catalog_from_db(visible_runtimes(user))
    spec = scenario_rules.parse_scenario(document, catalog, traces=traces)
    _storable_check(document)
    return spec


def scenario_create(
    *, owner: Any, document: Any, shared: bool = False, new_systems: bool = False
) -> Scenario:
    """Validate and store a scenario document owned by ``owner``, and record the traces it
    uses (so they cannot be deleted under it).

    A trace file the repository ships (``traces/AzureLLMInferenceTrace_conv.csv``, as the
    shipped examples name it) is replaced by its built-in trace's slug.
    With ``new_systems`` (a scenario written through the API, not an example or a plan's
    recommendation) each system that names none of its policy's ``new_system_options``
    gets them, and the document is stored so (``scenario.with_new_system_options``).
    Raises ScenarioValidationError (every problem, keyed by JSON path); nothing is stored then.
    """
    from simulations.builtin_traces import resolve_trace_files

    document = resolve_trace_files(document)
    if new_systems:
        document = scenario_rules.with_new_system_options(document)
    spec = scenario_validate(document, user=owner)
    with transaction.atomic():
        scenario = Scenario.objects.create(
            owner=owner, name=spec.name, document=document, shared=shared
        )
        trace_references_set(scenario_rules.trace_names(document), scenario=scenario)
    return scenario


def scenario_update(
    *, scenario: Scenario, document: Any = None, shared: bool | None = None
) -> Scenario:
    """Replace the document and/or the sharing flag (validated like :func:`scenario_create`;
    the recorded trace references follow the new document)."""
    from simulations.builtin_traces import resolve_trace_files

    fields = ["updated_at"]
    if document is not None:
        document = resolve_trace_files(document)
        spec = scenario_validate(document, user=scenario.owner)
        scenario.document, scenario.name = document, spec.name
        fields += ["document", "name"]
    if shared is not None:
        scenario.shared = shared
        fields.append("shared")
    with transaction.atomic():
        scenario.save(update_fields=fields)
        if document is not None:
            trace_references_set(scenario_rules.trace_names(document), scenario=scenario)
    return scenario


def workload_validate(workload: Workload) -> WorkloadSpec:
    """Validate a (possibly unsaved) Workload row as a scenario's ``workload`` object (its
    trace must be one its owner may use)."""
    doc = workload.to_document()
    problems = json_fields.storable_problems(doc, "workload")
    if problems:
        raise ScenarioValidationError(problems)
    user = workload.owner if workload.owner_id is not None else None
    traces = traces_from_db(scenario_rules.workload_trace_names(doc), visible_traces(user))
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
                transaction.on_commit(partial(_enqueue, run_id))
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
