"""How far a result's figures can be trusted, in a planner's words.

The core labels every device entry of a result and every placement of a plan's
recommendation (:mod:`simulations.core.provenance`): ``calibration`` is ``measured``,
``transferred`` or ``derived``, ``calibrated_on`` names the devices measured and
``calibration_note`` says it in plain words ("vllm-fp16: predicted from a100-80gb
measurements; not measured on h200."). The pages show that, with a short badge; results
stored before provenance existed show nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The badge of each label (what a planner reads first).
BADGES = {
    "measured": "measured on this device",
    "transferred": "predicted from other devices",
    "derived": "derived, not measured",
}


@dataclass(frozen=True)
class DeviceProvenance:
    """One placement's provenance for a page."""

    system: str
    device: str
    count: Any
    role: str
    label: str
    badge: str
    note: str


def _entries(system: str, devices: Iterable[Any]) -> list[DeviceProvenance]:
    out = []
    for d in devices:
        if not isinstance(d, Mapping) or not d.get("calibration"):
            continue
        label = str(d["calibration"])
        out.append(
            DeviceProvenance(
                system=system,
                device=str(d.get("device", "")),
                count=d.get("count"),
                role=str(d.get("role") or ""),
                label=label,
                badge=BADGES.get(label, label),
                note=str(d.get("calibration_note") or ""),
            )
        )
    return out


def result_provenance(systems: Sequence[Mapping[str, Any]]) -> list[DeviceProvenance]:
    """Every device entry of a run's systems that carries a calibration label."""
    return [
        p
        for i, s in enumerate(systems)
        for p in _entries(str(s.get("name", f"system {i}")), s.get("devices") or ())
    ]


def plan_provenance(entry: Mapping[str, Any] | None) -> list[DeviceProvenance]:
    """The placements of a plan report's entry (recommendation, runner-up) with their
    calibration labels."""
    if not isinstance(entry, Mapping):
        return []
    return _entries(str(entry.get("description", "")), entry.get("calibration") or ())


def builder_provenance(user: Any, device_kinds: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """For the scenario builder: ``"device|runtime"`` → ``{"label", "badge", "note"}`` for
    every device and every runtime profile of its kind the user may use (``"device|"``: the
    kind's default profile), so the page says how far a placement's figures can be trusted
    as soon as its device and stack are chosen. The model is left out (the note speaks of
    the device)."""
    from simulations.adapters import runtime_spec
    from simulations.core.provenance import device_calibration
    from simulations.measurements.selectors import runtimes_visible_to

    by_kind: dict[str, list[Any]] = {}
    defaults: dict[str, Any] = {}
    for row in runtimes_visible_to(user):
        spec = runtime_spec(row)
        by_kind.setdefault(row.device_kind, []).append(spec)
        if row.default_for_kind:
            defaults[row.device_kind] = spec
    out: dict[str, dict[str, str]] = {}
    for device, kind in device_kinds.items():
        for spec in by_kind.get(kind, ()):
            model = spec.calibration.models[0] if spec.calibration.models else ""
            fields = device_calibration(device, model, spec)
            entry = {
                "label": fields["calibration"],
                "badge": BADGES.get(fields["calibration"], fields["calibration"]),
                "note": fields["calibration_note"],
            }
            out[f"{device}|{spec.slug}"] = entry
            if defaults.get(kind) is spec:
                out[f"{device}|"] = entry
    return out
