"""JSON-path validation helpers shared by the document parsers (scenarios, plans), and the
one sanitiser of JSON input every entry point uses (API parser, services, pages, CLI).

Each ``read_*`` function checks one value of a JSON document and returns it converted, or
records why it is invalid in an :class:`Errors` under the value's JSON path
(``systems[0].devices[1].count``) and returns ``None``, so a parser reports *every* problem
of a document at once (see :func:`simulations.core.scenario.parse_scenario`).

:func:`loads` and :func:`storable_problems` guard what may reach a database or a recursive
walk at all: JSON text nested deeper than :data:`MAX_JSON_DEPTH` is refused by a linear scan
*before* it is parsed (``json.loads`` recurses once per level, so 100,000 nested arrays in a
200 KB body raised RecursionError); a NUL character in any string or key is refused
(PostgreSQL stores U+0000 neither in text nor in jsonb); and numbers JSON cannot
represent (``1e400`` overflows to infinity, ``NaN``, ``Infinity``) are refused by JSON path.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from simulations.core.spec import DeviceSpec, unpublished_power_why

#: Key of errors that concern the document as a whole.
ROOT = "document"
#: Characters of names (scenario, systems) and roles.
MAX_NAME_LENGTH = 200
#: Largest price a document may quote for one device, USD.
MAX_PRICE_USD = 1e8
#: Largest board power a document may quote for one device, W: a megawatt is far above any
#: accelerator or whole-wafer system (tens of kW), so a unit slip (mW for W) is refused.
MAX_TDP_W = 1e6


#: Deepest nesting of arrays and objects accepted in JSON input. Documents need about 6
#: levels (a request body adds one or two); Python's parser recurses once per level.
MAX_JSON_DEPTH = 64

NUL_MESSAGE = "contains a NUL character (\\u0000), which cannot be stored"
KEY_NUL_MESSAGE = "has a key that contains a NUL character (\\u0000), which cannot be stored"
NON_FINITE_MESSAGE = (
    "must be a finite number (NaN, Infinity and overflowing numbers such as 1e400 are rejected)"
)


class JsonInputError(ValueError):
    """JSON input that cannot be accepted: ``problems`` maps JSON paths (``document`` for the
    text as a whole) to messages."""

    def __init__(self, problems: dict[str, list[str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{path}: {', '.join(msgs)}" for path, msgs in problems.items()))


#: A JSON string (possessive, so a long string is one linear match), a bracket, or a stray
#: quote that opens an unterminated string (the parser reports that one).
_DEPTH_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]|"')


def json_depth_error(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``text`` is nested too deeply to parse, or ``None``: one linear pass counting
    brackets outside strings (no parsing, so no recursion)."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8", errors="replace")
    depth = 0
    for match in _DEPTH_TOKEN.finditer(text):
        token = match.group()
        if len(token) > 1:
            continue  # a whole string: brackets inside it are text
        if token in "[{":
            depth += 1
            if depth > limit:
                return (
                    f"JSON nested deeper than {limit} levels (arrays and objects inside "
                    "each other) is not accepted"
                )
        elif token in "]}":
            depth -= 1
        elif token == '"':
            break  # an unterminated string: nothing after it is structure
    return None


def storable_problems(value: Any, path: str = "", *, finite: bool = True) -> dict[str, list[str]]:
    """Every value of a parsed JSON document that cannot be stored, by JSON path: NUL
    characters in strings and keys, non-finite numbers, and nesting deeper than
    :data:`MAX_JSON_DEPTH`. Iterative, so a deep Python value cannot exhaust the stack.
    ``finite=False`` leaves numbers to the caller (the document parsers name a non-finite
    value with their own field messages)."""
    problems: dict[str, list[str]] = {}
    stack: list[tuple[str, Any, int]] = [(path, value, 0)]
    while stack:
        where, v, depth = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                problems.setdefault(where or ROOT, []).append(NUL_MESSAGE)
        elif isinstance(v, float):
            if finite and not math.isfinite(v):
                problems.setdefault(where or ROOT, []).append(NON_FINITE_MESSAGE)
        elif isinstance(v, Mapping | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                problems.setdefault(where or ROOT, []).append(
                    f"is nested deeper than {MAX_JSON_DEPTH} levels"
                )
                continue
            if isinstance(v, Mapping):
                children = []
                for k, child in v.items():
                    key = str(k)
                    if "\x00" in key:
                        problems.setdefault(where or ROOT, []).append(KEY_NUL_MESSAGE)
                        continue
                    children.append((key_path(where, key), child, depth + 1))
            else:
                children = [(f"{where}[{i}]", child, depth + 1) for i, child in enumerate(v)]
            stack.extend(reversed(children))
    return problems


def _keep_constant(name: str) -> float:
    # NaN/Infinity literals become floats so storable_problems reports them by JSON path.
    return float(name)


def loads(text: str | bytes, *, path: str = "") -> Any:
    """Parse JSON ``text`` that is safe to store and walk: JsonInputError (keyed by JSON
    path, ``document`` for the text as a whole) for too-deep nesting (refused before
    parsing), invalid JSON, NUL characters and non-finite numbers."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonInputError({path or ROOT: [f"not UTF-8 text (byte {exc.start})"]}) from exc
    too_deep = json_depth_error(text)
    if too_deep:
        raise JsonInputError({path or ROOT: [too_deep]})
    try:
        value = json.loads(text, parse_constant=_keep_constant)
    except ValueError as exc:
        raise JsonInputError({path or ROOT: [f"not valid JSON: {exc}"]}) from exc
    problems = storable_problems(value, path)
    if problems:
        raise JsonInputError(problems)
    return value


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
    if "\x00" in value:
        errs.add(path, NUL_MESSAGE)
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


def read_power_quote(
    errs: Errors, path: str, value: Any, device: DeviceSpec | None
) -> tuple[float | None, bool]:
    """A placement's optional ``tdp_w`` (the board power per device the user measured or was
    quoted, W, finite, in ``(0, MAX_TDP_W]``, not below the device's idle power) as
    ``(quote, ok)``. Without a quote, a device whose catalog record has no published power
    is refused at ``path`` (scenarios and plans share the wording); ``device`` ``None``
    (unknown slug, reported elsewhere) checks the number alone."""
    if value is None:
        if device is not None and device.tdp_w is None:
            errs.add(path, unpublished_power_why(device.slug))
            return None, False
        return None, True
    quote = read_positive(errs, path, value, maximum=MAX_TDP_W)
    if quote is None:
        return None, False
    if device is not None and quote < device.idle_w:
        errs.add(
            path,
            f"must not be below {device.slug}'s idle power ({device.idle_w:g} W in the catalog)",
        )
        return None, False
    return quote, True


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
