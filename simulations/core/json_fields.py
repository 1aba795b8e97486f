"""JSON-path validation helpers shared by the document parsers (scenarios, plans).

Each ``read_*`` function checks one value of a JSON document and returns it converted, or
records why it is invalid in an :class:`Errors` under the value's JSON path
(``systems[0].devices[1].count``) and returns ``None``, so a parser reports *every* problem
of a document at once (see :func:`simulations.core.scenario.parse_scenario`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: Key of errors that concern the document as a whole.
ROOT = "document"
#: Characters of names (scenario, systems) and roles.
MAX_NAME_LENGTH = 200
#: Largest price a document may quote for one device, USD.
MAX_PRICE_USD = 1e8


class Errors:
    """Collects messages by JSON path."""

    def __init__(self) -> None:
        self.by_path: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        """Record ``message`` at ``path`` (:data:`ROOT` for the document itself)."""
        self.by_path.setdefault(path or ROOT, []).append(message)

    def __bool__(self) -> bool:
        return bool(self.by_path)


def key_path(path: str, key: str) -> str:
    """The JSON path of ``key`` inside the object at ``path`` (``""`` is the root)."""
    return f"{path}.{key}" if path else key


def type_name(value: Any) -> str:
    """The JSON type name of ``value`` for messages (``null``, ``number``, ``object``, …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def read_mapping(errs: Errors, path: str, value: Any) -> Mapping[str, Any] | None:
    """``value`` if it is an object, else ``None`` with an error at ``path``."""
    if not isinstance(value, Mapping):
        errs.add(path, f"must be an object, got {type_name(value)}")
        return None
    return value


def reject_unknown_keys(
    errs: Errors, path: str, obj: Mapping[str, Any], allowed: Sequence[str]
) -> None:
    """An error at each key of ``obj`` that is not in ``allowed``."""
    for key in obj:
        if key not in allowed:
            errs.add(
                key_path(path, str(key)), f"unknown field (expected one of: {', '.join(allowed)})"
            )


def read_str(
    errs: Errors, path: str, value: Any, *, required: bool = True, max_len: int = MAX_NAME_LENGTH
) -> str | None:
    """A string of at most ``max_len`` characters; ``required`` ones must be present and
    not blank."""
    if value is None:
        if required:
            errs.add(path, "is required")
        return None
    if not isinstance(value, str):
        errs.add(path, f"must be a string, got {type_name(value)}")
        return None
    if required and not value.strip():
        errs.add(path, "must not be empty")
        return None
    if len(value) > max_len:
        errs.add(path, f"must be at most {max_len} characters")
        return None
    return value


def read_int(errs: Errors, path: str, value: Any, *, minimum: int, maximum: int) -> int | None:
    """A required integer in ``[minimum, maximum]`` (booleans and floats refused)."""
    if value is None:
        errs.add(path, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and not math.isfinite(value):
            errs.add(path, "must be finite (NaN and Infinity are rejected)")
        else:
            errs.add(path, f"must be an integer, got {type_name(value)}")
        return None
    if value < minimum:
        errs.add(path, f"must be at least {minimum}")
        return None
    if value > maximum:
        errs.add(path, f"must be at most {maximum}")
        return None
    return value


def read_positive(errs: Errors, path: str, value: Any, *, maximum: float) -> float | None:
    """A required finite number in ``(0, maximum]``, as a float."""
    if value is None:
        errs.add(path, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        errs.add(path, f"must be a number, got {type_name(value)}")
        return None
    v = float(value)
    if not math.isfinite(v):
        errs.add(path, "must be finite (NaN and Infinity are rejected)")
        return None
    if v <= 0:
        errs.add(path, "must be positive")
        return None
    if v > maximum:
        errs.add(path, f"must be at most {maximum:g}")
        return None
    return v


def read_list(
    errs: Errors, path: str, value: Any, *, minimum: int, maximum: int
) -> Sequence[Any] | None:
    """A required array of ``minimum`` to ``maximum`` entries."""
    if value is None:
        errs.add(path, "is required")
        return None
    if not isinstance(value, list | tuple):
        errs.add(path, f"must be an array, got {type_name(value)}")
        return None
    if len(value) < minimum:
        errs.add(path, f"must have at least {minimum} entr{'y' if minimum == 1 else 'ies'}")
        return None
    if len(value) > maximum:
        errs.add(path, f"must have at most {maximum} entries")
        return None
    return value
