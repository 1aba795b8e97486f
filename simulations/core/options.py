"""Declared settings: what a policy's options and a device family's parameters may hold.

A policy declares its options and a device family its kind-specific parameters as
:class:`OptionSpec` tuples; :func:`resolve` validates a mapping against them. The same
declarations describe themselves (:meth:`OptionSpec.as_schema`) so the API, the admin and
the pages can render and check the fields without knowing any policy or device kind.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SpecError


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One declared setting: its type, default, bounds, unit and help text.

    ``type`` is ``bool``, ``int``, ``float``, ``str`` or ``tuple`` (a list of ``items``,
    each checked against the bounds). ``minimum`` is inclusive unless ``exclusive_minimum``.
    A ``required`` setting has no default: leaving it out is an error. ``catalog`` names the
    catalog collection whose slug a text setting holds (``"links"``: an interconnect), so
    the pages can offer its entries.
    """

    name: str
    type: builtins.type
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] = ()
    required: bool = False
    unit: str = ""
    items: builtins.type | None = None
    exclusive_minimum: bool = False
    catalog: str = ""

    def validate(self, value: Any, path: str) -> Any:
        """Return ``value`` converted to the setting's type, or raise SpecError at ``path``."""
        if self.type is tuple:
            if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
                raise SpecError(path, "must be a list")
            item_type = self.items or float
            return tuple(self._scalar(v, item_type, f"{path}[{i}]") for i, v in enumerate(value))
        return self._scalar(value, self.type, path)

    def _scalar(self, value: Any, kind: builtins.type, path: str) -> Any:
        if kind is bool:
            if not isinstance(value, bool):
                raise SpecError(path, "must be true or false")
            return value
        if kind in (int, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(path, f"must be a number ({kind.__name__})")
            if kind is int and not float(value).is_integer():
                raise SpecError(path, "must be an integer")
            v: Any = kind(value)
            if v != v or v in (float("inf"), float("-inf")):
                raise SpecError(path, "must be finite")
            if self.minimum is not None:
                if self.exclusive_minimum and v <= self.minimum:
                    raise SpecError(path, f"must be greater than {self.minimum:g}")
                if v < self.minimum:
                    raise SpecError(path, f"must be at least {self.minimum:g}")
            if self.maximum is not None and v > self.maximum:
                raise SpecError(path, f"must be at most {self.maximum:g}")
        elif not isinstance(value, kind):
            raise SpecError(path, f"must be a {kind.__name__}")
        else:
            v = value
        if self.choices and v not in self.choices:
            raise SpecError(path, f"must be one of {', '.join(map(str, self.choices))}")
        return v

    def as_schema(self) -> dict[str, Any]:
        """JSON-friendly description for the API, the admin and the pages."""
        out: dict[str, Any] = {
            "name": self.name,
            "type": "list" if self.type is tuple else self.type.__name__,
            "default": list(self.default) if isinstance(self.default, tuple) else self.default,
            "help": self.help,
        }
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.exclusive_minimum:
            out["exclusive_minimum"] = True
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.choices:
            out["choices"] = list(self.choices)
        if self.required:
            out["required"] = True
        if self.unit:
            out["unit"] = self.unit
        if self.items is not None:
            out["items"] = self.items.__name__
        if self.catalog:
            out["catalog"] = self.catalog
        return out


def resolve(
    specs: Iterable[OptionSpec], given: Mapping[str, Any], path: str, owner: str
) -> dict[str, Any]:
    """``given`` validated against ``specs``, with the defaults filled in.

    A key no spec declares, a missing required setting and a bad value are SpecErrors at
    ``path.<key>``; ``owner`` names what declares the settings in the unknown-key message.
    """
    known = {o.name: o for o in specs}
    for key in given:
        if key not in known:
            raise SpecError(
                f"{path}.{key}",
                f"unknown {_noun(path)} for {owner} (known: {', '.join(known) or 'none'})",
            )
    out: dict[str, Any] = {}
    for name, opt in known.items():
        if name in given:
            out[name] = opt.validate(given[name], f"{path}.{name}")
        elif opt.required:
            raise SpecError(f"{path}.{name}", f"required for {owner}")
        else:
            out[name] = opt.default
    return out


def _noun(path: str) -> str:
    return "parameter" if path.endswith("params") else "option"


def schema(specs: Iterable[OptionSpec]) -> list[dict[str, Any]]:
    """The JSON-friendly description of every spec, in declaration order."""
    return [o.as_schema() for o in specs]
