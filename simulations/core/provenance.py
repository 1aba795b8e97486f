"""Where a runtime profile's numbers come from, and what that means for each device it runs on.

Every runtime profile records what it was calibrated on (:class:`CalibrationInfo`: devices,
models, measurement sets, the fit's error). A result's device entry then says how far its
numbers can be trusted (``docs/architecture.md``, Documents: Provenance):

- ``"measured"``: the profile was fitted to measurements taken on this device;
- ``"transferred"``: it was fitted on other devices (``calibrated_on`` names them) and this
  device is predicted through its datasheet;
- ``"derived"``: no measurement calibrated the profile (carried over from another stack, or
  cited stand-ins).

:func:`annotate_result` adds these fields to every device entry of a simulated system, once,
whatever policy produced the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from .errors import SpecError

if TYPE_CHECKING:
    from .spec import ModelSpec, RuntimeProfile, SystemSpec


class CalibrationLabel(StrEnum):
    """How a device's figures relate to measurements."""

    MEASURED = "measured"
    TRANSFERRED = "transferred"
    DERIVED = "derived"


@dataclass(frozen=True)
class CalibrationInfo:
    """What a runtime profile was calibrated on (empty ``devices``: derived, not fitted).

    ``fit_error`` holds the fit's error figures as fractions (e.g. ``mape``,
    ``max_rel_err``, ``holdout_mape``); ``method`` names what produced the values (a
    calibration module); ``notes`` is free text for a planner.
    """

    devices: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    measurement_sets: tuple[str, ...] = ()
    method: str = ""
    fit_error: Mapping[str, float] = field(default_factory=dict)
    notes: str = ""

    @property
    def measured(self) -> bool:
        """Whether any measurement calibrated the profile."""
        return bool(self.devices)

    def as_dict(self) -> dict[str, Any]:
        """The catalog (JSON) form."""
        return {
            "devices": list(self.devices),
            "models": list(self.models),
            "measurement_sets": list(self.measurement_sets),
            "method": self.method,
            "fit_error": dict(self.fit_error),
            "notes": self.notes,
        }


_KEYS = ("devices", "models", "measurement_sets", "method", "fit_error", "notes")


def calibration_from_dict(
    d: Mapping[str, Any] | None, where: str = "calibration"
) -> CalibrationInfo:
    """A :class:`CalibrationInfo` from its catalog form (SpecError naming a bad key)."""
    if d is None:
        return CalibrationInfo()
    if isinstance(d, CalibrationInfo):
        return d
    if not isinstance(d, Mapping):
        raise SpecError(where, "must be an object")
    unknown = [k for k in d if k not in _KEYS]
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}", f"unknown key (known: {', '.join(_KEYS)})")

    def strings(key: str) -> tuple[str, ...]:
        v = d.get(key, ())
        if isinstance(v, str) or not all(isinstance(x, str) for x in v):
            raise SpecError(f"{where}.{key}", "must be a list of strings")
        return tuple(v)

    errors = d.get("fit_error", {})
    if not isinstance(errors, Mapping) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in errors.values()
    ):
        raise SpecError(f"{where}.fit_error", "must map names to numbers")
    for key in ("method", "notes"):
        if not isinstance(d.get(key, ""), str):
            raise SpecError(f"{where}.{key}", "must be text")
    return CalibrationInfo(
        devices=strings("devices"),
        models=strings("models"),
        measurement_sets=strings("measurement_sets"),
        method=str(d.get("method", "")),
        fit_error={str(k): float(v) for k, v in errors.items()},
        notes=str(d.get("notes", "")),
    )


def device_calibration(device: str, model: str, runtime: RuntimeProfile) -> dict[str, Any]:
    """The provenance fields of a result's device entry for ``device`` running ``runtime``
    on ``model``: ``calibration``, ``calibrated_on`` and a plain-words ``calibration_note``."""
    info = runtime.calibration
    if not info.measured:
        note = f"{runtime.slug} was not fitted to measurements: its figures are derived"
        if info.notes:
            note += f" ({info.notes})"
        return {
            "calibration": CalibrationLabel.DERIVED.value,
            "calibrated_on": [],
            "calibration_note": note + ".",
        }
    on = ", ".join(info.devices)
    if device in info.devices:
        label = CalibrationLabel.MEASURED
        note = f"fitted to measurements on {device}"
    else:
        label = CalibrationLabel.TRANSFERRED
        note = f"predicted from {on} measurements; not measured on {device}"
    if info.models and model not in info.models:
        note += f"; {model} predicted from its shapes (measured: {', '.join(info.models)})"
    return {
        "calibration": label.value,
        "calibrated_on": list(info.devices),
        "calibration_note": f"{runtime.slug}: {note}.",
    }


def annotate_result(system: SystemSpec, model: ModelSpec, result: dict[str, Any]) -> None:
    """Add the provenance fields to every device entry of ``result`` (a system's result),
    matching each entry to its placement by device, and by role and runtime where the entry
    names them."""
    placements = system.devices
    for entry in result.get("devices", ()):
        if not isinstance(entry, dict):
            continue
        match = [p for p in placements if p.device.slug == entry.get("device")]
        for key, attr in (("role", "role"), ("runtime", "runtime")):
            if key in entry and len(match) > 1:
                narrowed = [
                    p for p in match if (p.role if attr == "role" else p.runtime.slug) == entry[key]
                ]
                match = narrowed or match
        if match:
            entry.update(device_calibration(match[0].device.slug, model.slug, match[0].runtime))


__all__ = [
    "CalibrationInfo",
    "CalibrationLabel",
    "annotate_result",
    "calibration_from_dict",
    "device_calibration",
]
