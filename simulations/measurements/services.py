"""Writes for measurement sets and calibrations: import, fit, save, publish.

Every function validates everything before it stores anything, and stores in one
transaction: a file with one bad cell stores nothing. Errors are Django ValidationErrors
keyed by the input at fault; a bad row is named by its line (the header is line 1) and
column — or, for rows given as JSON, by ``rows[i].column``.

*Why the fit runs in the request, not as a Celery job.* The A100 operator set (62 rows, six
hold-out groups) fits with its hold-out in about 0.08 s, and the whole
``POST /api/calibrations/`` in about 0.2 s on the 2-core development machine
(``benchmarks/test_bench_calibration.py``, targets 2 s and 2.5 s). A fit's cost grows with
rows × hold-out groups, so the service bounds the set it fits in a request
(:data:`MAX_FIT_ROWS`, 6.5 times the A100 set's rows; how long the largest accepted set
takes depends on its hold-out groups and is not benchmarked) and refuses a larger one with
a message pointing at ``manage.py calibrate``. That keeps the
page and the API one round trip with the answer, without a job, a queue and a polling page
for a sub-second computation.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from simulations.adapters import catalog_from_db, runtime_spec, runtime_values
from simulations.catalog.models import Device, LLMModel
from simulations.catalog.models import RuntimeProfile as RuntimeProfileRow
from simulations.core.calibration.fit import FitRefusedError, fit_profile, with_values
from simulations.core.calibration.measurements import (
    COLUMNS,
    CellError,
    MeasurementError,
    MeasurementFormat,
    parse_measurements,
)
from simulations.core.jsonsafe import finite
from simulations.core.provenance import CalibrationInfo
from simulations.measurements import selectors
from simulations.measurements.models import Calibration, MeasurementSet
from simulations.ownership import Visibility, stored_visibility
from simulations.permissions import can_edit_catalog

#: Largest set fitted in a request (rows): the A100 set has 62 and fits in ~0.1 s.
MAX_FIT_ROWS = 400
#: Largest number of rows accepted as JSON (the CSV cap is the core's MAX_ROWS).
MAX_JSON_ROWS = 20_000
#: The error figures of a fit stored in a saved profile's calibration block.
FIT_ERROR_KEYS = ("mape", "max_rel_err", "holdout_mape", "holdout_max_rel_err")


def _cell_text(cell: CellError, json_rows: bool) -> str:
    """A bad cell in the words of the input it came from."""
    if json_rows and cell.line >= 2:
        where = f"rows[{cell.line - 2}]" + (f".{cell.column}" if cell.column else "")
        return f"{where}: {cell.message}"
    return str(cell)


def rows_to_csv(rows: Any) -> str:
    """Rows given as JSON objects (column → value) as the CSV text the core parses, so one
    parser validates both; ValidationError under ``rows`` when they are not objects of
    known columns."""
    if not isinstance(rows, list) or not rows:
        raise ValidationError({"rows": ["must be a non-empty list of objects"]})
    if len(rows) > MAX_JSON_ROWS:
        raise ValidationError({"rows": [f"at most {MAX_JSON_ROWS} rows"]})
    known = dict.fromkeys(c for cols in COLUMNS.values() for c in cols)
    header: dict[str, None] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValidationError({"rows": [f"rows[{i}]: must be an object"]})
        for key, value in row.items():
            if key not in known:
                raise ValidationError({"rows": [f"rows[{i}].{key}: unknown column"]})
            if isinstance(value, dict | list | bool):
                raise ValidationError({"rows": [f"rows[{i}].{key}: must be a number or text"]})
            # one row, one CSV line: the parser's line numbers map back to rows[i]
            if isinstance(value, str) and ("\n" in value or "\r" in value):
                raise ValidationError({"rows": [f"rows[{i}].{key}: must be one line of text"]})
            header[key] = None
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(header), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def _resolve(model: Any, slug: str | None, field: str) -> Any:
    if not slug:
        return None
    row = model.objects.filter(slug=slug).first()
    if row is None:
        raise ValidationError({field: [f"unknown {field} {slug!r}"]})
    return row


def _precision_name(rt: RuntimeProfileRow) -> str:
    if rt.weight_bits == rt.act_bits == 16:
        return "fp16"
    return f"w{rt.weight_bits}a{rt.act_bits}"


def measurement_set_build(
    *,
    slug: str,
    name: str,
    text: str | bytes,
    stack: str,
    device: str | None = None,
    model: str | None = None,
    owner: Any = None,
    visibility: str | None = None,
    source: str = "",
    notes: str = "",
    json_rows: bool = False,
) -> MeasurementSet:
    """Parse a measurement CSV (operator or end-to-end rows, told apart by the header) into
    an unsaved, validated set of ``stack`` measured on ``device`` running ``model`` (slugs; when
    left out, the one device / model every row names).

    ``owner`` None stores a built-in set (public by default); a user's upload is private by
    default, and only a catalog editor makes one public. Every row must name the set's
    device and model. Raises ValidationError: ``text`` lists each bad cell by line and
    column (``rows[i].column`` with ``json_rows``), ``device`` / ``model`` / ``stack`` /
    ``visibility`` / ``slug`` a bad choice; nothing is stored then.
    """
    field = "rows" if json_rows else "text"
    visibility = stored_visibility(owner, visibility, what="measurement set")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError({field: [f"not UTF-8 text (byte {exc.start})"]}) from exc
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ValidationError({field: [f"line {line}: contains a NUL character"]})
    runtime = selectors.runtimes_visible_to(owner).filter(slug=stack).first() if stack else None
    if runtime is None:
        raise ValidationError({"stack": [f"unknown runtime profile {stack!r}"]})
    dev = _resolve(Device, device, "device")
    llm = _resolve(LLMModel, model, "model")
    try:
        parsed = parse_measurements(text, slug)
    except MeasurementError as exc:
        raise ValidationError({field: [_cell_text(c, json_rows) for c in exc.errors]}) from exc
    first = parsed.rows[0]
    # left out: the device / model the rows name (an unknown one is a bad cell of line 2)
    if dev is None:
        dev = Device.objects.filter(slug=first.device).first()
        if dev is None:
            cell = CellError(first.line, "device", f"unknown device {first.device!r}")
            raise ValidationError({field: [_cell_text(cell, json_rows)]})
    if llm is None:
        llm = LLMModel.objects.filter(slug=first.model).first()
        if llm is None:
            cell = CellError(first.line, "model", f"unknown model {first.model!r}")
            raise ValidationError({field: [_cell_text(cell, json_rows)]})
    if dev.kind != runtime.device_kind:
        raise ValidationError(
            {
                "stack": [
                    f"{runtime.slug} runs on {runtime.device_kind} devices; "
                    f"{dev.slug} is a {dev.kind}"
                ]
            }
        )
    precisions = {r.precision.lower() for r in parsed.rows if r.precision}
    errors: list[CellError] = []
    seen_precision = ""
    for r in parsed.rows:
        if r.device != dev.slug:
            errors.append(CellError(r.line, "device", f"{r.device!r} is not the set's {dev.slug}"))
        if r.model != llm.slug:
            errors.append(CellError(r.line, "model", f"{r.model!r} is not the set's {llm.slug}"))
        if r.precision:
            seen_precision = seen_precision or r.precision.lower()
            if r.precision.lower() != seen_precision:
                errors.append(
                    CellError(r.line, "precision", f"mixes {r.precision!r} with {seen_precision!r}")
                )
    if errors:
        raise ValidationError({field: [_cell_text(c, json_rows) for c in errors]})
    row = MeasurementSet(
        slug=slug,
        name=name or slug,
        owner=owner,
        visibility=visibility,
        device=dev,
        llm=llm,
        runtime=runtime,
        precision=next(iter(precisions)) if precisions else _precision_name(runtime),
        tensor_parallel=first.tp,
        format=parsed.format.value,
        source=source or first.source,
        notes=notes,
        rows=[
            {
                "line": r.line,
                "device": r.device,
                "model": r.model,
                "stack": r.stack,
                "precision": r.precision,
                "tp": r.tp,
                "phase": r.phase,
                "op": r.op,
                "tokens": r.tokens,
                "batch": r.batch,
                "kv_tokens": r.kv_tokens,
                "time_ms": r.time_ms,
                "power_w": r.power_w,
                "source": r.source,
            }
            for r in parsed.rows
        ],
        row_count=len(parsed.rows),
    )
    row.full_clean(exclude=["rows"])
    return row


def measurement_set_import(**kwargs: Any) -> MeasurementSet:
    """Validate (:func:`measurement_set_build`, same arguments) and store a measurement set
    in one transaction: a file with any bad cell stores nothing."""
    row = measurement_set_build(**kwargs)
    with transaction.atomic():
        row.save()
    return row


def measurement_set_delete(*, measurement_set: MeasurementSet, user: Any) -> None:
    """Delete a set: its owner a private or shared one, catalog editors any. Its fits go
    with it; profiles saved from them stay (their calibration block names the set)."""
    mine = measurement_set.owner_id is not None and measurement_set.owner_id == user.pk
    public = measurement_set.visibility == Visibility.PUBLIC
    if not (can_edit_catalog(user) or (mine and not public)):
        raise PermissionDenied("only its owner or staff delete a measurement set")
    measurement_set.delete()


def calibration_run(
    *, owner: Any, measurement_set: MeasurementSet, stack: str | None = None
) -> Calibration:
    """Fit ``stack`` (a runtime profile slug the owner may see; default: the set's own) to
    the set with the core's fitting service and store the report.

    Raises ValidationError: ``measurement_set`` for a set too large to fit in a request or
    rows the catalog cannot resolve (line and column), ``stack`` for an unknown stack,
    ``fit`` for a refused fit (under-determined or unphysical, with the core's reason).
    """
    if measurement_set.row_count > MAX_FIT_ROWS:
        raise ValidationError(
            {
                "measurement_set": [
                    f"{measurement_set.row_count} rows: at most {MAX_FIT_ROWS} rows are fitted "
                    "interactively; fit a larger set with manage.py calibrate"
                ]
            }
        )
    if stack:
        base_row = selectors.runtimes_visible_to(owner).filter(slug=stack).first()
        if base_row is None:
            raise ValidationError({"stack": [f"unknown runtime profile {stack!r}"]})
    else:
        base_row = measurement_set.runtime
    try:
        report = fit_profile(runtime_spec(base_row), measurement_set.to_core(), catalog_from_db())
    except MeasurementError as exc:
        raise ValidationError({"measurement_set": [str(c) for c in exc.errors]}) from exc
    except FitRefusedError as exc:
        raise ValidationError({"fit": [f"fit refused: {exc}"]}) from exc
    doc = finite(report.as_dict())
    return Calibration.objects.create(
        owner=owner,
        measurement_set=measurement_set,
        base_runtime=base_row,
        report=doc,
        mape=doc["mape"],
        holdout_mape=doc["holdout_mape"],
    )


def _fit_values(report: Mapping[str, Any]) -> dict[str, float]:
    """Every parameter value the fit predicted with (fitted and kept)."""
    return {name: float(p["value"]) for name, p in report["parameters"].items()}


def calibration_info(calibration: Calibration) -> CalibrationInfo:
    """The provenance block of a profile saved from ``calibration``."""
    report = calibration.report
    mset = calibration.measurement_set
    errors = {k: float(report[k]) for k in FIT_ERROR_KEYS if report.get(k) is not None}
    return CalibrationInfo(
        devices=tuple(report["devices"]),
        models=tuple(report["models"]),
        measurement_sets=(mset.slug,),
        method="simulations.core.calibration.fit.fit_profile",
        fit_error=errors,
        notes=f"{calibration.base_runtime.slug} refitted to {mset.name} "
        f"({mset.get_format_display().lower()}, {mset.row_count} rows)",
    )


def calibration_save_profile(
    *,
    calibration: Calibration,
    user: Any,
    slug: str,
    name: str = "",
    publish: bool = False,
) -> RuntimeProfileRow:
    """Save the fit as a new runtime profile: private to ``user``, or with ``publish``
    public in the catalog (catalog editors only — PermissionDenied otherwise).

    The profile is the base stack with every value the fit predicted with and a calibration
    block naming the devices, models and set it was fitted on and the fit's errors, so
    results that use it say ``measured`` / ``transferred``. Raises ValidationError
    (``slug`` taken or malformed).
    """
    if calibration.owner_id != user.pk:
        raise PermissionDenied("only who ran the fit saves it")
    if publish and not can_edit_catalog(user):
        raise PermissionDenied("only staff publish a runtime profile to the catalog")
    base = runtime_spec(calibration.base_runtime)
    spec = replace(
        with_values(base, _fit_values(calibration.report)),
        slug=slug,
        name=name or slug,
        calibration=calibration_info(calibration),
    )
    values = runtime_values(spec)
    row = RuntimeProfileRow(
        **values,
        default_for_kind=False,
        owner=user,
        visibility=Visibility.PUBLIC if publish else Visibility.PRIVATE,
        notes=f"Fitted by {user.get_username()} (calibration #{calibration.pk}).",
    )
    row.full_clean()
    with transaction.atomic():
        row.save()
        Calibration.objects.filter(pk=calibration.pk).update(profile=row)
    calibration.profile = row
    return row


def measurement_format_columns() -> Mapping[str, Sequence[str]]:
    """The CSV columns of each format (for the import page's help)."""
    return {MeasurementFormat(f).value: cols for f, cols in COLUMNS.items()}
