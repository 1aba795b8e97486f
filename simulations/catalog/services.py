"""Every write to the catalog: devices, runtime profiles, models, the seed of the shipped
catalog and the Hugging Face config import.

Inputs are validated as core specs before anything is written, so a rejected input stores
nothing; errors are :class:`ValidationError` keyed by field.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from simulations.adapters import (
    device_values,
    memory_tier_values,
    model_values,
    runtime_values,
)
from simulations.catalog.models import Device, LLMModel, MemoryTier
from simulations.catalog.models import RuntimeProfile as RuntimeProfileRow
from simulations.core import json_fields
from simulations.core.catalog import (
    device_from_dict,
    iter_records,
    model_from_dict,
    runtime_from_dict,
)
from simulations.core.errors import SpecError
from simulations.core.hf_config import model_spec_from_hf_config
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile

logger = logging.getLogger(__name__)


def spec_validation_error(exc: SpecError, field_name: str | None = None) -> ValidationError:
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
            raise spec_validation_error(exc, "config") from exc
        raise spec_validation_error(exc) from exc
    return model_save(spec, hf_config=config)
