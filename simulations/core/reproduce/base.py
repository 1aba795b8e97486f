"""Framework for reproducing the papers' published figures.

A *target* (``targets.py`` beside this file) is a figure read from a paper with its
tolerance. A *runner* is a function registered for a paper that models the experiment with
the core and returns :class:`Check` rows pairing each simulated value with its target. The
paper's value is only ever compared against; it never feeds the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Self

from .targets import Target

PAPERS = ("glitches", "neo", "heterollm", "h2m2")


@dataclass(frozen=True, slots=True)
class Check:
    """One reproduced figure beside the paper's.

    ``tolerance`` is relative (0.05 = ±5 %) unless ``abs_tolerance`` is true (then it is in
    ``unit``). ``note`` explains the assumptions behind the figure and, where it misses,
    why (what the paper leaves unstated, which choice was made).
    """

    id: str
    quantity: str
    unit: str
    paper_value: float
    simulated: float
    tolerance: float
    abs_tolerance: bool = False
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def rel_err(self) -> float:
        """(simulated − paper) / paper."""
        if self.paper_value == 0:
            return math.inf if self.simulated else 0.0
        return (self.simulated - self.paper_value) / abs(self.paper_value)

    @property
    def ok(self) -> bool:
        """Whether the simulated value is within tolerance of the paper's."""
        if not math.isfinite(self.simulated):
            return False
        if self.abs_tolerance:
            return abs(self.simulated - self.paper_value) <= self.tolerance + 1e-12
        return abs(self.rel_err) <= self.tolerance + 1e-12

    @classmethod
    def of_target(
        cls,
        t: Target,
        simulated: float,
        note: str = "",
        details: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Self:
        """The check of ``simulated`` against the published figure ``t`` (its id, quantity,
        unit, value and tolerance); ``extra`` are a subclass's own fields."""
        return cls(
            id=t.id,
            quantity=t.quantity,
            unit=t.unit,
            paper_value=t.value,
            simulated=simulated,
            tolerance=t.tolerance,
            abs_tolerance=t.abs_tolerance,
            note=note,
            details={} if details is None else details,
            **extra,
        )

    def as_dict(self) -> dict[str, Any]:
        """The check as DESIGN.md §6 prints it."""
        d = asdict(self)
        d["rel_err"] = self.rel_err
        d["ok"] = self.ok
        return d


Runner = Callable[[], list[Check]]
_RUNNERS: dict[str, list[Runner]] = {p: [] for p in PAPERS}


def runner(paper: str) -> Callable[[Runner], Runner]:
    """Decorator registering a function that returns checks for ``paper``."""
    if paper not in _RUNNERS:
        raise ValueError(f"unknown paper {paper!r}")

    def deco(fn: Runner) -> Runner:
        _RUNNERS[paper].append(fn)
        return fn

    return deco


def reproduce(paper: str) -> dict[str, Any]:
    """Run every registered runner for ``paper`` and return the DESIGN.md §6 document."""
    from . import load_all

    load_all()
    if paper not in _RUNNERS:
        raise ValueError(f"unknown paper {paper!r}; choose from {', '.join(PAPERS)} or all")
    checks: list[Check] = []
    for fn in _RUNNERS[paper]:
        checks.extend(fn())
    return {"paper": paper, "checks": [c.as_dict() for c in checks]}
