"""The built-in catalog: devices, runtime profiles and models shipped as JSON in ``data/``.

The same files seed the database (``manage.py seed_catalog``); this loader lets the core,
its tests and the calibration scripts use the catalog without Django. Every record carries a
``sources`` mapping from each numeric field to where the number comes from.

Layout: ``data/devices/*.json``, ``data/runtimes/*.json``, ``data/models/*.json`` and
``data/links/*.json`` (the interconnects a system's parallel groups communicate over); each file
holds a JSON list of records whose keys are the spec dataclass's field names. A device's
kind-specific facts sit in its ``params`` object, as its device family declares them
(:func:`simulations.core.devices.describe_family`); their sources are keyed
``params.<name>``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from .devices import check_device
from .errors import SpecError
from .spec import CloudOffer, DeviceSpec, LinkSpec, MemoryTier, ModelSpec, RuntimeProfile

DATA_DIR = Path(__file__).resolve().parent / "data"


_Spec = TypeVar("_Spec")


def _from_record(cls: Callable[..., _Spec], rec: dict[str, Any], what: str) -> _Spec:
    """``cls(**rec)`` without the record's free-text ``notes``; a field the spec does not
    have (or one it misses) is a SpecError named by the record's slug."""
    rec.pop("notes", None)
    try:
        return cls(**rec)
    except TypeError as exc:
        raise SpecError(str(rec.get("slug", what)), str(exc)) from exc


def device_from_dict(d: Mapping[str, Any]) -> DeviceSpec:
    """Build a DeviceSpec from a catalog record (nested memory tiers and links), its
    ``params`` checked against its device family's declaration."""
    rec = dict(d)
    rec["memory"] = tuple(MemoryTier(**m) for m in rec.get("memory", ()))
    for key in ("host_link", "peer_link"):
        if rec.get(key) is not None:
            rec[key] = LinkSpec(**rec[key])
    return check_device(_from_record(DeviceSpec, rec, "device"))


def link_from_dict(d: Mapping[str, Any]) -> LinkSpec:
    """Build a catalog LinkSpec (``slug``, ``name``, bandwidth per direction, latency,
    sources) from a record."""
    rec = dict(d)
    if not rec.get("slug"):
        raise SpecError("link.slug", "a catalog link needs a slug")
    return _from_record(LinkSpec, rec, "link")


def runtime_from_dict(d: Mapping[str, Any]) -> RuntimeProfile:
    """Build a RuntimeProfile from a catalog record."""
    return _from_record(RuntimeProfile, dict(d), "runtime")


def model_from_dict(d: Mapping[str, Any]) -> ModelSpec:
    """Build a ModelSpec from a catalog record."""
    return _from_record(ModelSpec, dict(d), "model")


def iter_records(kind: str) -> Iterator[dict[str, Any]]:
    """Raw records of ``kind`` (devices, runtimes, models, links or prices), in file then
    list order."""
    for path in sorted((DATA_DIR / kind).glob("*.json")):
        records = json.loads(path.read_text())
        if not isinstance(records, list):
            raise SpecError(str(path), "a catalog file must hold a JSON list")
        yield from records


@dataclass(frozen=True)
class Catalog:
    """Specs by slug, with the default runtime profile per device kind."""

    devices: Mapping[str, DeviceSpec]
    runtimes: Mapping[str, RuntimeProfile]
    models: Mapping[str, ModelSpec]
    default_runtimes: Mapping[str, str]
    #: Interconnects by slug (``nvlink4``, ``pcie5-x16`` …): the catalog's links unless
    #: given (the database stores none yet, so its catalog carries the shipped ones).
    links: Mapping[str, LinkSpec] = field(default_factory=lambda: _shipped_links())
    #: Published cloud rental prices by offer slug (``data/prices/``), each naming its
    #: device, source and date; shipped with the code, whatever the catalog's source.
    cloud_offers: Mapping[str, CloudOffer] = field(default_factory=lambda: _shipped_cloud_offers())

    def device(self, slug: str) -> DeviceSpec:
        """The device ``slug``; SpecError naming it when unknown."""
        return _lookup(self.devices, slug, "device", "device")

    def runtime(self, slug: str) -> RuntimeProfile:
        """The runtime profile ``slug``; SpecError naming it when unknown."""
        return _lookup(self.runtimes, slug, "runtime", "runtime profile")

    def model(self, slug: str) -> ModelSpec:
        """The model ``slug``; SpecError naming it when unknown."""
        return _lookup(self.models, slug, "model", "model")

    def link(self, slug: str) -> LinkSpec:
        """The interconnect ``slug``; SpecError naming it when unknown."""
        return _lookup(self.links, slug, "link", "link")

    def default_runtime(self, device: DeviceSpec) -> RuntimeProfile:
        """The runtime a device uses when a scenario names none (its kind's default)."""
        slug = self.default_runtimes.get(device.kind)
        if slug is None:
            raise SpecError("runtime", f"no default runtime for {device.kind} devices")
        return self.runtime(slug)


def _lookup(specs: Mapping[str, _Spec], slug: str, field: str, what: str) -> _Spec:
    try:
        return specs[slug]
    except KeyError:
        raise SpecError(field, f"unknown {what} {slug!r}") from None


def catalog_from_records(
    devices: Iterable[Mapping[str, Any]] = (),
    runtimes: Iterable[Mapping[str, Any]] = (),
    models: Iterable[Mapping[str, Any]] = (),
    *,
    links: Iterable[Mapping[str, Any]] | None = None,
    base: Catalog | None = None,
) -> Catalog:
    """A catalog of the records (in the data files' shape; a runtime record's
    ``default_for_kind`` makes it its kind's default), over ``base``'s entries if given.
    ``links`` default to ``base``'s, else the shipped ones."""
    devs = dict(base.devices) if base else {}
    rts = dict(base.runtimes) if base else {}
    mods = dict(base.models) if base else {}
    defaults = dict(base.default_runtimes) if base else {}
    devs.update((str(r["slug"]), device_from_dict(r)) for r in devices)
    for r in runtimes:
        rec = dict(r)
        is_default = bool(rec.pop("default_for_kind", False))
        rt = runtime_from_dict(rec)
        rts[rt.slug] = rt
        if is_default:
            defaults[rt.device_kind] = rt.slug
    mods.update((str(r["slug"]), model_from_dict(r)) for r in models)
    lnks = dict(base.links) if base else dict(builtin_links())
    if links is not None:
        lnks.update((str(r["slug"]), link_from_dict(r)) for r in links)
    return Catalog(devs, rts, mods, defaults, lnks)


def _shipped_links() -> dict[str, LinkSpec]:
    return dict(builtin_links())


@cache
def builtin_links() -> Mapping[str, LinkSpec]:
    """The interconnects shipped in ``data/links/`` (loaded once per process)."""
    out: dict[str, LinkSpec] = {}
    for r in iter_records("links"):
        link = link_from_dict(r)
        out[link.slug] = link
    return out


def _shipped_cloud_offers() -> dict[str, CloudOffer]:
    return dict(builtin_cloud_offers())


@cache
def builtin_cloud_offers() -> Mapping[str, CloudOffer]:
    """The cloud rental prices shipped in ``data/prices/`` (loaded once per process)."""
    out: dict[str, CloudOffer] = {}
    for r in iter_records("prices"):
        try:
            offer = CloudOffer(**r)  # its notes are part of the offer (shown with the price)
        except TypeError as exc:
            raise SpecError(str(r.get("slug", "cloud offer")), str(exc)) from exc
        if offer.slug in out:
            raise SpecError(offer.slug, "two cloud offers share this slug")
        out[offer.slug] = offer
    return out


@cache
def builtin_catalog() -> Catalog:
    """The catalog shipped in ``data/`` (loaded once per process)."""
    return catalog_from_records(
        iter_records("devices"), iter_records("runtimes"), iter_records("models")
    )
