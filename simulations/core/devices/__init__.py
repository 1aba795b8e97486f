"""Device families: one cost model per device kind, looked up by kind.

A device family is a module (or package) of this package that registers its
:class:`~.base.DeviceModel` subclass with :func:`register_device_model`, plus the catalog
records of its devices (``data/devices/*.json``). The registry imports every module of this
package the first time it is asked, so adding a family adds no line anywhere else (see the
recipe in ``docs/architecture.md``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache
from typing import Any

from simulations.core.errors import SpecError
from simulations.core.options import schema
from simulations.core.spec import CONTAINER_KINDS, DeviceSpec, RuntimeProfile, device_kind

from .base import DeviceModel, PhaseCost, StreamFloor, resolve_params

_MODELS: dict[str, type[DeviceModel]] = {}


def register_device_model(kind: str) -> Callable[[type[DeviceModel]], type[DeviceModel]]:
    """Class decorator: the cost model (device family) for devices of ``kind`` (a built-in
    :class:`~simulations.core.spec.DeviceKind` or a new kind's slug)."""
    key = device_kind(kind)

    def deco(cls: type[DeviceModel]) -> type[DeviceModel]:
        if _MODELS.get(key, cls) is not cls:
            raise ValueError(f"device kind {key!r} registered twice")
        _MODELS[key] = cls
        return cls

    return deco


@cache
def _load() -> None:
    """Import every module of this package once (each registers its family)."""
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")


def device_family(kind: str) -> type[DeviceModel]:
    """The cost model class of ``kind``; SpecError when no family is registered for it."""
    _load()
    try:
        return _MODELS[kind]
    except KeyError:
        raise SpecError("device", f"no cost model for {kind} devices") from None


def device_kinds() -> list[str]:
    """Every kind a device may have: the registered families' and the containers'."""
    _load()
    return sorted({*_MODELS, *CONTAINER_KINDS})


def roofline_kinds() -> frozenset[str]:
    """The kinds whose family one device's roofline describes
    (:attr:`~.base.DeviceModel.single_device_roofline`); containers have none."""
    _load()
    return frozenset(k for k, cls in _MODELS.items() if cls.single_device_roofline)


def model_parallel_kinds() -> frozenset[str]:
    """The kinds whose family serves one replica from a group of its devices (tensor,
    pipeline or expert parallelism, :attr:`~.base.DeviceModel.model_parallel`); containers
    have none."""
    _load()
    return frozenset(k for k, cls in _MODELS.items() if cls.model_parallel)


def calibrated_kinds() -> frozenset[str]:
    """The kinds whose family's stacks the kernel-class calibration fits
    (:attr:`~.base.DeviceModel.kernel_calibration`); containers have none."""
    _load()
    return frozenset(k for k, cls in _MODELS.items() if cls.kernel_calibration)


def describe_family(kind: str) -> dict[str, Any]:
    """A family as the API, the admin and the pages render it: the kind-specific parameters
    of its devices and the settings a policy may choose, with units and bounds."""
    if kind in CONTAINER_KINDS:
        return {"kind": str(kind), "params": [], "settings": []}
    cls = device_family(kind)
    return {"kind": str(kind), "params": schema(cls.params), "settings": schema(cls.settings)}


def check_device(device: DeviceSpec) -> DeviceSpec:
    """``device`` after checking its kind has a family and its ``params`` are the ones the
    family declares (SpecError naming ``<slug>.params.<name>`` otherwise); the catalog
    loaders call it on every record."""
    if device.kind in CONTAINER_KINDS:
        if device.params:
            name = next(iter(device.params))
            raise SpecError(f"{device.slug}.params.{name}", f"{device.kind} devices take none")
        return device
    _load()
    cls = _MODELS.get(device.kind)
    if cls is None:
        raise SpecError(
            f"{device.slug}.kind",
            f"no device family for kind {device.kind!r} (known: {', '.join(device_kinds())})",
        )
    resolve_params(cls, device)
    return device


def build_device_model(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
    """The cost model of ``device`` running ``runtime`` (cached per pair)."""
    # RuntimeProfile.params takes no part in equality/hashing, so it joins the cache key
    # explicitly: two profiles differing only in fitted params must not share a model.
    return _build_device_model(device, runtime, tuple(sorted(runtime.params.items())))


@cache
def _build_device_model(
    device: DeviceSpec, runtime: RuntimeProfile, _params_key: tuple[tuple[str, float], ...]
) -> DeviceModel:
    if runtime.device_kind != device.kind:
        raise SpecError(
            "runtime",
            f"runtime {runtime.slug!r} is for {runtime.device_kind} devices, "
            f"not {device.kind} ({device.slug})",
        )
    return device_family(device.kind)(device, runtime)


__all__ = [
    "CONTAINER_KINDS",
    "DeviceModel",
    "PhaseCost",
    "StreamFloor",
    "build_device_model",
    "calibrated_kinds",
    "check_device",
    "describe_family",
    "device_family",
    "device_kinds",
    "model_parallel_kinds",
    "register_device_model",
    "roofline_kinds",
]
