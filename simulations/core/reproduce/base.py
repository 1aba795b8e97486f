"""Framework for reproducing the papers' published figures.

A *target* (:mod:`.targets`, read from the paper package's ``targets.toml``) is a figure
read from a paper with its tolerance. A *runner* is a function of the paper package's
``reproduction`` module, registered for the paper, that models the experiment with the core
and returns :class:`Check` rows pairing each simulated value with its target. The paper's
value is only ever compared against; it never feeds the model.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import math
import multiprocessing
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Self

from simulations.core.policies import get_paper, papers

from .basis import NO_EFFECT, basis_of, is_ratio
from .targets import Target, load_targets

#: The registered papers, in their order (``reproduce all``, the validation page).
PAPERS = tuple(p.name for p in papers())


@dataclass(frozen=True, slots=True)
class Check:
    """One reproduced figure beside the paper's.

    ``tolerance`` is relative (0.05 = ±5 %) unless ``abs_tolerance`` is true (then it is in
    ``unit``). ``note`` explains the assumptions behind the figure and, where it misses,
    why (what the paper leaves unstated, which choice was made). ``basis`` says what kind
    of evidence the check is (``"prediction"``, ``"calibration"`` or ``"input"``, see
    :mod:`.basis`) and ``basis_why`` on what fit or catalog value that rests.
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
    basis: str = "prediction"
    basis_why: str = ""

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

    @property
    def discriminating(self) -> bool:
        """False for a ratio check that would also pass at "no effect" (a simulated 1.0
        within its tolerance or bound): passing it does not show the mechanism."""
        return not (is_ratio(self.unit) and replace(self, simulated=NO_EFFECT).ok)

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
        unit, value, tolerance and basis); ``extra`` are a subclass's own fields."""
        basis, basis_why = basis_of(t)
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
            basis=basis,
            basis_why=basis_why,
            **extra,
        )

    def as_dict(self) -> dict[str, Any]:
        """The check as ``reproduce --format json`` prints it."""
        d = asdict(self)
        d["rel_err"] = self.rel_err
        d["ok"] = self.ok
        d["discriminating"] = self.discriminating
        return d


@dataclass(frozen=True, slots=True)
class BoundCheck(Check):
    """A check against a published bound ("below 60 %", "never below by more than a few
    %"): ok when the simulated value is at most (``upper``) or at least (``lower``) the
    paper's value."""

    bound: str = "upper"

    @property
    def ok(self) -> bool:
        """Whether the simulated value respects the bound."""
        if not math.isfinite(self.simulated):
            return False
        if self.bound == "upper":
            return self.simulated <= self.paper_value + 1e-12
        return self.simulated >= self.paper_value - 1e-12


Runner = Callable[[], list[Check]]
_RUNNERS: dict[str, list[Runner]] = {}


def runner(paper: str) -> Callable[[Runner], Runner]:
    """Decorator registering a function that returns checks for ``paper``."""
    get_paper(paper)  # KeyError for an unregistered paper

    def deco(fn: Runner) -> Runner:
        _RUNNERS.setdefault(paper, []).append(fn)
        return fn

    return deco


Prefetcher = Callable[[int], None]
_PREFETCHERS: dict[str, list[Prefetcher]] = {}


def prefetcher(paper: str) -> Callable[[Prefetcher], Prefetcher]:
    """Decorator registering a function that runs ``paper``'s independent simulations ahead
    in the given number of processes, for its runners to read (the runners' output must not
    depend on it). :func:`reproduce` calls it only when asked for more than one process."""
    get_paper(paper)

    def deco(fn: Prefetcher) -> Prefetcher:
        _PREFETCHERS.setdefault(paper, []).append(fn)
        return fn

    return deco


def check(
    paper: str,
    tid: str,
    simulated: float,
    /,
    *,
    details: dict[str, Any] | None = None,
    **values: Any,
) -> Check:
    """The check of target ``tid`` of ``paper``: ``simulated`` beside the published value
    (a :class:`BoundCheck` when the target is a bound), its note the target's template
    rendered with ``values``."""
    targets = load_targets(paper)
    t = targets[tid]
    note = targets.note(tid, **values)
    if t.bound:
        return BoundCheck.of_target(t, float(simulated), note, dict(details or {}), bound=t.bound)
    return Check.of_target(t, float(simulated), note, dict(details or {}))


def _load(paper: str) -> None:
    """Import ``paper``'s reproduction module (registering its runners and prefetchers)."""
    try:
        p = get_paper(paper)
    except KeyError:
        raise ValueError(
            f"unknown paper {paper!r}; choose from {', '.join(PAPERS)} or all"
        ) from None
    importlib.import_module(p.reproduction)


def reproduce(paper: str, *, jobs: int = 1) -> dict[str, Any]:
    """Run every registered runner for ``paper`` and return its document
    ``{"paper": ..., "checks": [...]}``. With ``jobs`` > 1 the paper's prefetchers first run
    its independent simulations in that many processes (forked: call it so only from a
    process that may fork, such as the ``reproduce`` command); the document is the same."""
    _load(paper)
    if jobs > 1:
        for pre in _PREFETCHERS.get(paper, []):
            pre(jobs)
    checks: list[Check] = []
    for fn in _RUNNERS.get(paper, []):
        checks.extend(fn())
    return {"paper": paper, "checks": [c.as_dict() for c in checks]}


def _documents(papers: Sequence[str]) -> list[dict[str, Any]]:
    return [reproduce(p) for p in papers]


def reproduce_many(papers: Sequence[str], *, jobs: int = 1) -> list[dict[str, Any]]:
    """:func:`reproduce` for each of ``papers``, the documents in the same order. With
    ``jobs`` > 1 the papers without a prefetcher run one after another in a forked process
    while this one runs the others (whose prefetchers use the ``jobs`` processes), so a
    small paper's runs fill the gaps of a long one's; the documents are the same."""
    for p in papers:
        _load(p)
    ahead = [p for p in papers if p in _PREFETCHERS]
    rest = [p for p in papers if p not in _PREFETCHERS]
    if jobs <= 1 or not ahead or not rest:
        return [reproduce(p, jobs=jobs) for p in papers]
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        side = pool.submit(_documents, rest)
        docs = {p: reproduce(p, jobs=jobs) for p in ahead}
        docs.update(zip(rest, side.result(), strict=True))
    return [docs[p] for p in papers]
