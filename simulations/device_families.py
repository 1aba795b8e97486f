"""The Django side of the device-family registry: the kinds a Device row may have, the
parameters its family declares (``Device.params``), checked and described for the model,
the service, the API, the admin and the pages — none of which lists a kind's fields.

The declarations live with each family (:attr:`simulations.core.devices.base.DeviceModel.params`,
found by :func:`simulations.core.devices.describe_family`); see ``docs/architecture.md``,
"Recipe: add a device family".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulations.choices import DeviceKind
from simulations.core.devices import CONTAINER_KINDS, describe_family, device_family, device_kinds
from simulations.core.errors import SpecError
from simulations.core.options import resolve

#: Parameters one device may carry (a family declares a handful).
MAX_PARAMS = 64


def kind_label(kind: str) -> str:
    """A device kind as people read it: the built-in label, else the family's slug."""
    try:
        return str(DeviceKind(kind).label)
    except ValueError:
        return kind


def device_kind_choices() -> list[tuple[str, str]]:
    """Every registered kind as ``(value, label)``: a model field's choices as a callable,
    so a new device family needs no migration."""
    return [(k, kind_label(k)) for k in device_kinds()]


def param_schema(kind: str) -> list[dict[str, Any]]:
    """The parameters the family of ``kind`` declares (name, type, unit, bounds, help,
    ``required``), each with a ``label``; empty for a container or an unknown kind."""
    if kind not in device_kinds():
        return []
    return [{**p, "label": param_label(p)} for p in describe_family(kind)["params"]]


def param_label(entry: Mapping[str, Any]) -> str:
    """A parameter's label from its declaration: its name in words, then its unit."""
    words = str(entry["name"]).replace("_", " ")
    unit = entry.get("unit") or ""
    # a name that ends in its unit (clock_mhz, simd_width_bits) keeps the unit once
    for suffix in {unit.lower(), {"GHz": "ghz", "MHz": "mhz"}.get(unit, "")} - {""}:
        words = words.removesuffix(f" {suffix}")
    words = words[:1].upper() + words[1:]
    return f"{words} ({unit})" if unit else words


def params_errors(kind: str, params: Any) -> dict[str, str]:
    """What is wrong with ``params`` for a device of ``kind``, keyed ``params.<name>``
    (or ``params`` for the whole value, ``kind`` for a kind with no family): an unknown
    name, a missing required one, a wrong type, a value out of its bounds, NaN or
    Infinity. Empty when the parameters are the ones the family declares."""
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        return {"params": "Must be an object mapping parameter names to values."}
    if len(params) > MAX_PARAMS:
        return {"params": f"At most {MAX_PARAMS} parameters."}
    if kind not in device_kinds():
        return {"kind": f"No device family for kind {kind!r} (known: {', '.join(device_kinds())})."}
    if kind in CONTAINER_KINDS:
        if params:
            name = next(iter(params))
            return {f"params.{name}": f"{kind_label(kind)} devices take no parameters."}
        return {}
    try:
        resolve(device_family(kind).params, params, "params", f"{kind} devices")
    except SpecError as exc:
        return {exc.field.split("[", 1)[0]: exc.message[:1].upper() + exc.message[1:] + "."}
    return {}


__all__ = [
    "MAX_PARAMS",
    "device_kind_choices",
    "kind_label",
    "param_label",
    "param_schema",
    "params_errors",
]
