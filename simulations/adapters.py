"""The one place where database rows become simulation-core specs (and specs become rows).

Data flows one way (docs/architecture.md): catalog rows → :mod:`simulations.core.spec` objects →
engine. Everything that hands catalog data to the core goes through
:func:`catalog_from_db` and the ``*_spec`` functions here; the inverse ``*_values``
functions give the column values for a spec, used by the services that write the catalog
(seeding, imports), so a record survives JSON → spec → row → spec unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from django.db.models import QuerySet

from simulations.catalog.models import Device, LLMModel
from simulations.catalog.models import RuntimeProfile as RuntimeProfileRow
from simulations.choices import TraceParseStatus
from simulations.core.catalog import Catalog
from simulations.core.provenance import calibration_from_dict
from simulations.core.spec import (
    ARCHITECTURE_BLOCKS,
    DeviceSpec,
    LinkSpec,
    MemoryKind,
    MemoryTier,
    ModelSpec,
    RuntimeProfile,
    TraceData,
)
from simulations.scenarios.models import Trace


def _plain_fields(spec: type, structured: frozenset[str]) -> tuple[str, ...]:
    """The fields of the ``spec`` dataclass other than ``structured`` (those have their own
    columns or tables), in declaration order."""
    return tuple(f.name for f in fields(spec) if f.name not in structured)


#: DeviceSpec fields stored under the same name on the Device row.
DEVICE_PLAIN_FIELDS = _plain_fields(
    DeviceSpec, frozenset({"memory", "host_link", "peer_link", "parent", "params", "sources"})
)
#: RuntimeProfile fields stored under the same name on the RuntimeProfile row.
RUNTIME_FIELDS = _plain_fields(RuntimeProfile, frozenset({"params", "sources", "calibration"}))
#: ModelSpec fields stored under the same name on the LLMModel row (the architecture blocks
#: — moe, mla, sliding_window — share its ``architecture`` JSON column).
MODEL_FIELDS = _plain_fields(ModelSpec, frozenset({"sources", *ARCHITECTURE_BLOCKS}))
_LINK_COLUMNS = ("bw_gbps", "latency_us", "pcie_gen", "lanes")


# --- rows → specs ----------------------------------------------------------------------------


def _link(row: Device, prefix: str) -> LinkSpec | None:
    kind = getattr(row, f"{prefix}_kind")
    if not kind:
        return None
    latency = getattr(row, f"{prefix}_latency_us")
    return LinkSpec(
        kind=kind,
        bw_gbps=getattr(row, f"{prefix}_bw_gbps"),
        latency_us=0.0 if latency is None else latency,
        pcie_gen=getattr(row, f"{prefix}_pcie_gen"),
        lanes=getattr(row, f"{prefix}_lanes"),
    )


def device_spec(row: Device) -> DeviceSpec:
    """The DeviceSpec of a Device row (prefetch ``memory_tiers`` and ``parent`` for lists);
    its ``params`` are the row's, as its device family declares them."""
    tiers = sorted(row.memory_tiers.all(), key=lambda t: t.order)
    return DeviceSpec(
        **{f: getattr(row, f) for f in DEVICE_PLAIN_FIELDS},
        memory=tuple(MemoryTier(MemoryKind(t.kind), t.capacity_gb, t.bw_gbps) for t in tiers),
        host_link=_link(row, "host_link"),
        peer_link=_link(row, "peer_link"),
        parent=row.parent.slug if row.parent is not None else None,
        params=dict(row.params or {}),
        sources=dict(row.sources or {}),
    )


def runtime_spec(row: RuntimeProfileRow) -> RuntimeProfile:
    """The core RuntimeProfile of a RuntimeProfile row."""
    return RuntimeProfile(
        **{f: getattr(row, f) for f in RUNTIME_FIELDS},
        params=dict(row.params or {}),
        sources=dict(row.sources or {}),
        calibration=calibration_from_dict(row.calibration or {}),
    )


def model_spec(row: LLMModel) -> ModelSpec:
    """The ModelSpec of an LLMModel row."""
    return ModelSpec(
        **{f: getattr(row, f) for f in MODEL_FIELDS},
        **dict(row.architecture or {}),
        sources=dict(row.sources or {}),
    )


def trace_data(row: Trace) -> TraceData:
    """The TraceData of a Trace row, named by its slug (the name scenarios use)."""
    data: dict[str, Any] = row.data or {}  # a parsed trace always has its columns
    return TraceData(
        arrival_s=tuple(float(x) for x in data["arrival_s"]),
        input_tokens=tuple(int(x) for x in data["input_tokens"]),
        output_tokens=tuple(int(x) for x in data["output_tokens"]),
        name=row.slug,
    )


def catalog_from_db(among_runtimes: QuerySet[RuntimeProfileRow] | None = None) -> Catalog:
    """The core Catalog built from the database (three queries plus one for memory tiers).

    ``among_runtimes``: the runtime profiles to include (a user's visible ones: another user's
    private profile is then an unknown runtime); default every profile."""
    devices = {
        row.slug: device_spec(row)
        for row in Device.objects.select_related("parent").prefetch_related("memory_tiers")
    }
    runtimes: dict[str, RuntimeProfile] = {}
    defaults: dict[str, str] = {}
    rows = RuntimeProfileRow.objects.all() if among_runtimes is None else among_runtimes
    for row in rows:
        spec = runtime_spec(row)
        runtimes[spec.slug] = spec
        if row.default_for_kind:
            defaults[spec.device_kind] = spec.slug
    models = {row.slug: model_spec(row) for row in LLMModel.objects.all()}
    return Catalog(devices=devices, runtimes=runtimes, models=models, default_runtimes=defaults)


def traces_from_db(
    slugs: Iterable[str], among: QuerySet[Trace] | None = None
) -> dict[str, TraceData]:
    """TraceData of the named traces that exist (unknown names are simply absent), looked up
    in ``among`` when given (a user's visible traces: others are absent, i.e. unknown)."""
    rows = Trace.objects.all() if among is None else among
    # a trace still being parsed (or that failed) has no columns yet: not usable
    rows = rows.filter(slug__in=set(slugs), parse_status=TraceParseStatus.DONE)
    return {row.slug: trace_data(row) for row in rows}


def _json_normal(value: Any) -> Any:
    """``value`` as a JSON column gives it back."""
    return json.loads(json.dumps(value))


# --- specs → row values ----------------------------------------------------------------------


def _link_values(prefix: str, link: LinkSpec | None) -> dict[str, Any]:
    if link is None:
        return {f"{prefix}_kind": "", **{f"{prefix}_{c}": None for c in _LINK_COLUMNS}}
    return {
        f"{prefix}_kind": link.kind.value,
        f"{prefix}_bw_gbps": link.bw_gbps,
        f"{prefix}_latency_us": link.latency_us,
        f"{prefix}_pcie_gen": link.pcie_gen,
        f"{prefix}_lanes": link.lanes,
    }


def device_values(spec: DeviceSpec) -> dict[str, Any]:
    """Device column values for ``spec`` (without ``parent`` and the memory tiers)."""
    values: dict[str, Any] = {f: getattr(spec, f) for f in DEVICE_PLAIN_FIELDS}
    values["kind"] = str(spec.kind)
    values.update(_link_values("host_link", spec.host_link))
    values.update(_link_values("peer_link", spec.peer_link))
    # tuples (a list parameter) as the JSON column gives them back
    values["params"] = json.loads(json.dumps(dict(spec.params)))
    values["sources"] = dict(spec.sources)
    return values


def memory_tier_values(spec: DeviceSpec) -> list[dict[str, Any]]:
    """MemoryTier column values for ``spec``'s tiers, in order."""
    return [
        {"order": i, "kind": t.kind.value, "capacity_gb": t.capacity_gb, "bw_gbps": t.bw_gbps}
        for i, t in enumerate(spec.memory)
    ]


def runtime_values(spec: RuntimeProfile) -> dict[str, Any]:
    """RuntimeProfile column values for ``spec`` (without ``default_for_kind``)."""
    values: dict[str, Any] = {f: getattr(spec, f) for f in RUNTIME_FIELDS}
    values["device_kind"] = str(spec.device_kind)
    values["params"] = dict(spec.params)
    values["sources"] = dict(spec.sources)
    values["calibration"] = spec.calibration.as_dict()
    return values


def model_values(spec: ModelSpec) -> dict[str, Any]:
    """LLMModel column values for ``spec``."""
    values: dict[str, Any] = {f: getattr(spec, f) for f in MODEL_FIELDS}
    values["ffn_kind"] = spec.ffn_kind.value
    values["architecture"] = _json_normal(spec.architecture())
    values["sources"] = dict(spec.sources)
    return values


def trace_values(data: TraceData) -> dict[str, Any]:
    """Trace column values (``request_count``, ``duration_s``, ``data``) for ``data``."""
    return {
        "request_count": len(data.arrival_s),
        "duration_s": (data.arrival_s[-1] - data.arrival_s[0]) if data.arrival_s else 0.0,
        "data": {
            "arrival_s": list(data.arrival_s),
            "input_tokens": list(data.input_tokens),
            "output_tokens": list(data.output_tokens),
        },
    }


__all__ = [
    "catalog_from_db",
    "device_spec",
    "device_values",
    "memory_tier_values",
    "model_spec",
    "model_values",
    "runtime_spec",
    "runtime_values",
    "trace_data",
    "trace_values",
    "traces_from_db",
]
