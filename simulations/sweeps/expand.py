"""Sweep axes and the mapping from a configuration index to its scenario document.

A sweep is a scenario *template* (a scenario document, docs/architecture.md) and a list of *axes*;
each axis sets one place in the template, named by a path such as
``systems[0].devices[0].count``, ``systems[0].devices[0].device``, ``systems[0].policy``,
``systems[0].options.max_batch`` or ``workload.arrival.rate_per_s``, to each of its values
in turn. The configurations are the Cartesian product of the axes, numbered in
:func:`itertools.product` order (the last axis varies fastest), so a worker rebuilds any
configuration from its index alone and nothing per configuration is stored before it runs.

The number of configurations is computed, and capped, before anything is queued: the error
names the first axis whose values take the product past the cap. Pure Python (no database).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Axes per sweep.
MAX_AXES = 8
#: Values on one axis.
MAX_AXIS_VALUES = 1000
#: Characters of an axis path or name.
MAX_PATH_LENGTH = 200
#: Nesting depth of one axis value (objects and arrays).
MAX_VALUE_DEPTH = 8

_KEY = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(rf"\.?({_KEY})|\[(\d{{1,4}})\]")
_PATH = re.compile(rf"^{_KEY}(?:\.{_KEY}|\[\d{{1,4}}\])*\Z")

PathToken = str | int


class SweepValidationError(ValueError):
    """Problems with a sweep's axes, keyed like DRF field errors (``axes[1].values``)."""

    def __init__(self, errors: Mapping[str, Sequence[str]]) -> None:
        self.errors = {k: list(v) for k, v in errors.items()}
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in self.errors.items()))


@dataclass(frozen=True)
class Axis:
    """One swept parameter: where it goes in the template and the values it takes."""

    name: str
    path: str
    tokens: tuple[PathToken, ...]
    values: tuple[Any, ...]


def parse_path(text: str) -> tuple[PathToken, ...]:
    """``systems[0].devices[1].count`` → ``("systems", 0, "devices", 1, "count")``."""
    if not isinstance(text, str) or not _PATH.match(text):
        raise ValueError(
            "must be a path such as systems[0].devices[0].count "
            "(keys joined by '.', list positions in [])"
        )
    return tuple(
        m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _TOKEN.finditer(text)
    )


def _json_value_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` is not a plain, finite JSON value (None when it is)."""
    if depth > MAX_VALUE_DEPTH:
        return f"is nested deeper than {MAX_VALUE_DEPTH} levels"
    if value is None or isinstance(value, bool | str):
        return None
    if isinstance(value, int):
        return None if abs(value) <= 2**63 - 1 else "is out of the 64-bit integer range"
    if isinstance(value, float):
        return None if math.isfinite(value) else "must be finite (NaN and Infinity are rejected)"
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                return "object keys must be strings"
            if (problem := _json_value_problem(v, depth + 1)) is not None:
                return problem
        return None
    if isinstance(value, list | tuple):
        for v in value:
            if (problem := _json_value_problem(v, depth + 1)) is not None:
                return problem
        return None
    return f"is not a JSON value ({type(value).__name__})"


def parse_axes(raw: Any) -> list[Axis]:
    """Validate the ``axes`` list (shape, paths, values); SweepValidationError otherwise.

    Does not check the template or the cap: see :func:`check_template_paths` and
    :func:`check_count`.
    """
    errors: dict[str, list[str]] = {}
    if not isinstance(raw, list | tuple):
        raise SweepValidationError({"axes": ["must be a list of axes"]})
    if not 1 <= len(raw) <= MAX_AXES:
        raise SweepValidationError({"axes": [f"must have between 1 and {MAX_AXES} axes"]})
    axes: list[Axis] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        where = f"axes[{i}]"
        if not isinstance(entry, Mapping):
            errors.setdefault(where, []).append("must be an object with path and values")
            continue
        unknown = sorted(set(entry) - {"name", "path", "values"})
        for key in unknown:
            errors.setdefault(f"{where}.{key}", []).append(
                "unknown field (expected name, path, values)"
            )
        path = entry.get("path")
        tokens: tuple[PathToken, ...] = ()
        if not isinstance(path, str) or len(path) > MAX_PATH_LENGTH:
            errors.setdefault(f"{where}.path", []).append(
                f"must be a string of at most {MAX_PATH_LENGTH} characters"
            )
        else:
            try:
                tokens = parse_path(path)
            except ValueError as exc:
                errors.setdefault(f"{where}.path", []).append(str(exc))
            else:
                if path in seen:
                    errors.setdefault(f"{where}.path", []).append(
                        f"axes[{seen[path]}] already sweeps {path}"
                    )
                seen.setdefault(path, i)
        name = entry.get("name", path)
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_PATH_LENGTH:
            errors.setdefault(f"{where}.name", []).append(
                f"must be a non-empty string of at most {MAX_PATH_LENGTH} characters"
            )
            name = str(path)
        values = entry.get("values")
        if not isinstance(values, list | tuple) or not 1 <= len(values) <= MAX_AXIS_VALUES:
            errors.setdefault(f"{where}.values", []).append(
                f"must be a list of 1 to {MAX_AXIS_VALUES} values"
            )
            continue
        for j, value in enumerate(values):
            if (problem := _json_value_problem(value)) is not None:
                errors.setdefault(f"{where}.values[{j}]", []).append(problem)
        if tokens and not errors:
            axes.append(Axis(name=name, path=str(path), tokens=tokens, values=tuple(values)))
    if errors:
        raise SweepValidationError(errors)
    return axes


def configuration_count(axes: Sequence[Axis]) -> int:
    """How many configurations the axes expand to (the product of their lengths)."""
    return math.prod(len(a.values) for a in axes)


def check_count(axes: Sequence[Axis], cap: int) -> int:
    """The configuration count, or SweepValidationError naming the axis that passes ``cap``.

    The axis at fault is the first one (in order) whose values take the running product
    past the cap; the message gives the product and how many values would still fit.
    """
    running = 1
    for i, axis in enumerate(axes):
        product = running * len(axis.values)
        if product > cap:
            fit = cap // running
            total = configuration_count(axes)
            raise SweepValidationError(
                {
                    f"axes[{i}].values": [
                        f"axis {axis.name!r} ({axis.path}, {len(axis.values)} values) takes "
                        f"the sweep past the cap of {cap:,} configurations per sweep "
                        f"(the axes expand to {total:,}); at most {fit} values fit on this "
                        "axis with the axes before it"
                    ]
                }
            )
        running = product
    return running


def _set(doc: Any, tokens: Sequence[PathToken], value: Any) -> None:
    """Set ``doc[tokens...] = value`` in place; missing object keys on the way are created."""
    node = doc
    for depth, token in enumerate(tokens):
        last = depth == len(tokens) - 1
        where = "".join(f"[{t}]" if isinstance(t, int) else f".{t}" for t in tokens[:depth])
        where = where.lstrip(".") or "the template"
        if isinstance(token, int):
            if not isinstance(node, list):
                raise KeyError(f"{where} is not a list")
            if token >= len(node):
                raise KeyError(f"{where} has no position {token} (it has {len(node)})")
            if last:
                node[token] = copy.deepcopy(value)
            else:
                node = node[token]
        else:
            if not isinstance(node, dict):
                raise KeyError(f"{where} is not an object")
            if last:
                node[token] = copy.deepcopy(value)
            else:
                if token not in node:
                    node[token] = {}
                node = node[token]


def check_template_paths(template: Any, axes: Sequence[Axis]) -> None:
    """Every axis path must lead somewhere in the template (SweepValidationError otherwise)."""
    errors: dict[str, list[str]] = {}
    for i, axis in enumerate(axes):
        try:
            _set(copy.deepcopy(template), axis.tokens, axis.values[0])
        except KeyError as exc:
            errors[f"axes[{i}].path"] = [f"does not fit the template: {exc.args[0]}"]
    if errors:
        raise SweepValidationError(errors)


def configuration_values(axes: Sequence[Axis], index: int) -> list[Any]:
    """The value of every axis for configuration ``index`` (last axis fastest)."""
    total = configuration_count(axes)
    if not 0 <= index < total:
        raise IndexError(f"configuration {index} is outside 0..{total - 1}")
    out: list[Any] = [None] * len(axes)
    for k in range(len(axes) - 1, -1, -1):
        index, digit = divmod(index, len(axes[k].values))
        out[k] = axes[k].values[digit]
    return out


def configuration_parameters(axes: Sequence[Axis], index: int) -> dict[str, Any]:
    """Axis name → value for configuration ``index`` (what result rows and tables show)."""
    return {a.name: v for a, v in zip(axes, configuration_values(axes, index), strict=True)}


def configuration_document(
    template: Mapping[str, Any], axes: Sequence[Axis], index: int
) -> dict[str, Any]:
    """The scenario document of configuration ``index``: the template with its axis values."""
    doc = copy.deepcopy(dict(template))
    for axis, value in zip(axes, configuration_values(axes, index), strict=True):
        _set(doc, axis.tokens, value)
    return doc


def axes_document(axes: Sequence[Axis]) -> list[dict[str, Any]]:
    """The axes as stored (and as :func:`parse_axes` accepts them again)."""
    return [{"name": a.name, "path": a.path, "values": list(a.values)} for a in axes]


__all__ = [
    "MAX_AXES",
    "MAX_AXIS_VALUES",
    "Axis",
    "SweepValidationError",
    "axes_document",
    "check_count",
    "check_template_paths",
    "configuration_count",
    "configuration_document",
    "configuration_parameters",
    "configuration_values",
    "parse_axes",
    "parse_path",
]
