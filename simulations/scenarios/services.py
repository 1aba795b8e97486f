"""Every write to traces, workloads and scenarios, and the trace-parse job.

Inputs are validated before anything is written, so a rejected input stores nothing. Trace
and workload errors are :class:`ValidationError` keyed by field; scenario errors are
:class:`ScenarioValidationError` keyed by JSON path.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import ProtectedError, Q
from django.utils import timezone

from simulations.adapters import (
    catalog_from_db,
    trace_values,
    traces_from_db,
)
from simulations.catalog.services import spec_validation_error
from simulations.choices import TraceParseStatus
from simulations.core import json_fields
from simulations.core import scenario as scenario_rules
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.spec import ScenarioSpec, WorkloadSpec
from simulations.core.traces import check_azure_header, count_rows_upto, parse_azure_trace
from simulations.jobs import ReconcileReport, mark_unsent, resend_lost
from simulations.measurements.selectors import runtimes_visible_to
from simulations.ownership import stored_visibility
from simulations.permissions import can_delete_trace
from simulations.scenarios import selectors
from simulations.scenarios.models import Scenario, Trace, TraceReference, Workload

logger = logging.getLogger(__name__)

#: Largest scenario document accepted, in bytes of compact JSON.
MAX_DOCUMENT_BYTES = 256 * 1024
#: Largest trace upload, in bytes.
MAX_TRACE_BYTES = 32 * 1024 * 1024


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
        raise spec_validation_error(exc, "text") from exc
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
        raise spec_validation_error(exc, "text") from exc
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
    with its text, and parsed by the :func:`simulations.scenarios.tasks.parse_trace` task queued
    when the transaction commits (the row then says ``done`` or ``failed`` with the line
    at fault). Raises ValidationError (``text`` names the line and column at fault,
    ``visibility`` a refused choice); nothing is stored then.
    """
    visibility = stored_visibility(owner, visibility, what="trace")
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
    from simulations.scenarios.tasks import parse_trace

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
