"""Exceptions raised by the simulation core.

Every error that comes from bad input names the offending field (a dotted path or a JSON
path such as ``systems[0].devices[1].count``) so the API, the CLI and the pages can show it
next to the field.
"""

from __future__ import annotations


class CoreError(Exception):
    """Base class of every error the simulation core raises on purpose."""


class SpecError(CoreError, ValueError):
    """An input value is invalid (non-positive, non-finite, unknown, out of bounds).

    ``field`` is the path of the offending value; ``message`` says what is wrong with it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ScenarioValidationError(CoreError, ValueError):
    """A scenario document has one or more invalid fields.

    ``errors`` maps JSON paths (``systems[0].devices[1].count``) to lists of messages.
    """

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        summary = "; ".join(f"{path}: {', '.join(msgs)}" for path, msgs in errors.items())
        super().__init__(summary or "invalid scenario")


class CapacityError(SpecError):
    """A model (weights, or weights plus KV cache) does not fit the memory it is placed in."""


class UnknownPolicyError(CoreError, LookupError):
    """The scenario names a policy that is not implemented in the core's registry."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(
            f"policy {name!r} is not implemented in the simulation core "
            f"(available: {', '.join(sorted(known)) or 'none'})"
        )
        self.name = name
