"""Policy registry: one module per paper's scheduler, looked up by name.

A policy declares the device roles and options it accepts (with defaults and help text the
API and the pages can render) and runs one system of a scenario through the engine,
returning that system's entry of the result document (DESIGN.md §4).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from simulations.core.engine.core import ProgressFn as ProgressFn  # re-exported
from simulations.core.errors import SpecError, UnknownPolicyError
from simulations.core.spec import ModelSpec, SloSpec, SystemSpec, WorkloadSpec


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option a policy accepts: its type, default, bounds and help text."""

    name: str
    type: type
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] = ()

    def validate(self, value: Any, path: str) -> Any:
        """Return ``value`` converted to the option's type, or raise SpecError at ``path``."""
        if self.type is bool:
            if not isinstance(value, bool):
                raise SpecError(path, "must be true or false")
            return value
        if self.type in (int, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(path, f"must be a number ({self.type.__name__})")
            if self.type is int and not float(value).is_integer():
                raise SpecError(path, "must be an integer")
            v: Any = self.type(value)
            if v != v or v in (float("inf"), float("-inf")):
                raise SpecError(path, "must be finite")
            if self.minimum is not None and v < self.minimum:
                raise SpecError(path, f"must be at least {self.minimum:g}")
            if self.maximum is not None and v > self.maximum:
                raise SpecError(path, f"must be at most {self.maximum:g}")
        elif not isinstance(value, self.type):
            raise SpecError(path, f"must be a {self.type.__name__}")
        else:
            v = value
        if self.choices and v not in self.choices:
            raise SpecError(path, f"must be one of {', '.join(map(str, self.choices))}")
        return v

    def as_schema(self) -> dict[str, Any]:
        """JSON-friendly description for the API and the scenario builder."""
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type.__name__,
            "default": self.default,
            "help": self.help,
        }
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.choices:
            out["choices"] = list(self.choices)
        return out


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """A device role a policy understands (``""`` is the role of a policy without roles)."""

    name: str
    help: str
    kinds: tuple[str, ...] = ()  # allowed DeviceKind values; empty = any
    required: bool = True


class Policy(ABC):
    """Base class of every scheduling policy.

    Subclasses set ``name``, ``roles``, ``options`` and a docstring that cites the paper
    section they implement and lists any deviation from it.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    roles: ClassVar[tuple[RoleSpec, ...]] = ()
    options: ClassVar[tuple[OptionSpec, ...]] = ()

    @classmethod
    def resolve_options(cls, given: Mapping[str, Any], path: str = "options") -> dict[str, Any]:
        """Validate ``given`` against the declared options and fill in the defaults."""
        known = {o.name: o for o in cls.options}
        for key in given:
            if key not in known:
                raise SpecError(
                    f"{path}.{key}",
                    f"unknown option for policy {cls.name!r} (known: {', '.join(known) or 'none'})",
                )
        return {
            name: (opt.validate(given[name], f"{path}.{name}") if name in given else opt.default)
            for name, opt in known.items()
        }

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """The registry entry as the API and the pages show it."""
        return {
            "name": cls.name,
            "summary": cls.summary or (cls.__doc__ or "").strip().splitlines()[0],
            "roles": [
                {"name": r.name, "help": r.help, "kinds": list(r.kinds), "required": r.required}
                for r in cls.roles
            ],
            "options": [o.as_schema() for o in cls.options],
        }

    @abstractmethod
    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Simulate ``system`` on ``workload`` and return its result-document entry."""


_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: add a policy to the registry under ``cls.name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"policy {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def get_policy(name: str) -> type[Policy]:
    """The policy class registered as ``name``; UnknownPolicyError if there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownPolicyError(name, list(_REGISTRY)) from None


def policy_names() -> list[str]:
    """Names of every registered policy, sorted."""
    return sorted(_REGISTRY)
