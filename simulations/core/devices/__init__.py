"""Device cost models, one module per kind, looked up by DeviceKind.

Each module registers its class with :func:`register_device_model`; importing this package
imports them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache

from simulations.core.errors import SpecError
from simulations.core.spec import DeviceKind, DeviceSpec, RuntimeProfile

from .base import DeviceModel, PhaseCost

_MODELS: dict[DeviceKind, type[DeviceModel]] = {}
_MODULES = ("gpu", "fpga", "npu", "cpu", "h2m2_accel")


def register_device_model(kind: DeviceKind) -> Callable[[type[DeviceModel]], type[DeviceModel]]:
    """Class decorator: the cost model for devices of ``kind``."""

    def deco(cls: type[DeviceModel]) -> type[DeviceModel]:
        _MODELS[kind] = cls
        return cls

    return deco


def _load() -> None:
    for name in _MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise


def build_device_model(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
    """The cost model of ``device`` running ``runtime`` (cached per pair)."""
    # RuntimeProfile.params takes no part in equality/hashing, so it joins the cache key
    # explicitly: two profiles differing only in fitted params must not share a model.
    return _build_device_model(device, runtime, tuple(sorted(runtime.params.items())))


@cache
def _build_device_model(
    device: DeviceSpec, runtime: RuntimeProfile, _params_key: tuple[tuple[str, float], ...]
) -> DeviceModel:
    _load()
    if runtime.device_kind is not device.kind:
        raise SpecError(
            "runtime",
            f"runtime {runtime.slug!r} is for {runtime.device_kind.value} devices, "
            f"not {device.kind.value} ({device.slug})",
        )
    try:
        cls = _MODELS[device.kind]
    except KeyError:
        raise SpecError("device", f"no cost model for {device.kind.value} devices") from None
    return cls(device, runtime)


__all__ = ["DeviceModel", "PhaseCost", "build_device_model", "register_device_model"]
