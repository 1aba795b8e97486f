"""The two-stage search: screen everything, then confirm with the engine only what can
still matter, cheapest first, in rounds.

After the screen, the survivors are ordered by (capex, key). A round is the first
``round_size`` survivors that are still *needed* given the engine results so far; a
survivor is needed when it could still change an output:

* the recommendation and its runner-up — its capex is not above the second-cheapest
  feasible configuration confirmed so far;
* the cheapest feasible configuration per device type — it uses a device entry for which
  no feasible configuration of no higher capex is confirmed yet;
* either Pareto front — no confirmed feasible configuration of no higher capex covers its
  screen ceiling on throughput (its floor on energy per token) within
  ``pareto_tolerance``.

Needs only shrink as results come in, so confirming in capex order and stopping when
nothing is needed gives exactly the outputs an exhaustive engine search would (the
screen never rules out a configuration the engine would find feasible). Rounds make the
confirmation parallel: the Celery job fans a round out over its workers; the in-process
:meth:`Search.run` evaluates it serially or with a process pool. The set of configurations
confirmed depends on ``round_size`` (a round may include one that a smaller round would
have skipped) but never on timing, so a plan is deterministic for its document.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulations.core.engine.requests import generate_requests
from simulations.core.policies.base import ProgressFn
from simulations.core.tco import SECONDS_PER_YEAR

from .document import PlanSpec
from .evaluate import Evaluation, evaluate_config, objective_value, rank
from .screen import REASONS, CostCache, GroupScreen, Screen
from .space import Config, Group, Space, enumerate_space

EvaluateMany = Callable[[Sequence[Config]], Iterable[Evaluation]]


@dataclass
class Candidate:
    """A configuration that passed the screen, with its screen ceilings."""

    config: Config
    group: int
    row: int
    throughput_ub: float
    energy_lb: float


@dataclass
class _State:
    """What the confirmed results imply for the remaining candidates."""

    second_capex: float
    second_objective: float
    best_by_entry: dict[int, float]
    thr_capex: list[float]
    thr_prefix_max: list[float]
    en_capex: list[float]
    en_prefix_min: list[float]


class Search:
    """A plan's search: the screened space, the confirmed results and what is still needed.

    Construction runs the screen (progress 0 → ``screen_share``). Then either call
    :meth:`run`, or drive the rounds yourself with :meth:`next_round` and :meth:`record`
    (the Celery job does, across workers and processes; rebuilding a Search from the same
    plan and re-recording the stored results reproduces the state exactly).
    """

    screen_share = 0.1

    def __init__(self, plan: PlanSpec, *, progress: ProgressFn | None = None) -> None:
        t0 = time.perf_counter()
        self.plan = plan
        self.progress = progress
        self.requests = generate_requests(plan.workload, plan.model)
        self.cache = CostCache(plan, self.requests)
        self.space: Space = enumerate_space(plan)
        self.screen = Screen(plan, self.requests, self.cache)
        self.groups: list[Group] = self.space.groups
        self.verdicts: list[GroupScreen] = []
        candidates: list[Candidate] = []
        n_groups = max(len(self.groups), 1)
        for gi, group in enumerate(self.groups):
            gs = self.screen.evaluate(group)
            self.verdicts.append(gs)
            for i in np.flatnonzero(gs.possible):
                candidates.append(
                    Candidate(
                        group.config(int(i), plan),
                        gi,
                        int(i),
                        float(gs.throughput_ub[i]),
                        float(gs.energy_lb[i]),
                    )
                )
            if progress is not None:
                progress(self.screen_share * (gi + 1) / n_groups)
        candidates.sort(key=lambda c: (c.config.capex_usd, c.config.key))
        self.candidates = candidates
        self.by_key = {c.config.key: c for c in candidates}
        self.screen_seconds = time.perf_counter() - t0
        self.results: dict[str, Evaluation] = {}
        self.rounds = 0
        self.engine_seconds = 0.0

    # -- state -----------------------------------------------------------------------

    @property
    def admitted(self) -> int:
        """Configurations that satisfy the constraints (what the screen looked at)."""
        return self.space.admitted

    def screen_counts(self) -> dict[str, int]:
        """How many admitted configurations the screen ruled out, by reason."""
        counts: Counter[str] = Counter()
        for gs in self.verdicts:
            for code, n in zip(*np.unique(gs.reason, return_counts=True), strict=True):
                counts[REASONS[int(code)] or "possible"] += int(n)
        return dict(sorted(counts.items()))

    def screen_row(self, key: str) -> dict[str, Any]:
        """The screen's figures for a candidate."""
        c = self.by_key[key]
        return self.verdicts[c.group].row(c.row)

    def feasible(self) -> list[tuple[Candidate, Evaluation]]:
        """Confirmed feasible configurations, best first."""
        out = [(self.by_key[k], ev) for k, ev in self.results.items() if ev.feasible]
        objective = self.plan.objective
        out.sort(key=lambda x: rank(x[1], x[0].config.capex_usd, objective))
        return out

    def _state(self) -> _State:
        feas = self.feasible()
        second = feas[1][0].config.capex_usd if len(feas) >= 2 else math.inf
        second_obj = (
            objective_value(feas[1][1], feas[1][0].config.capex_usd, self.plan.objective)
            if len(feas) >= 2
            else math.inf
        )
        best: dict[int, float] = {}
        for cand, _ in feas:
            for e in cand.config.entries():
                best[e] = min(best.get(e, math.inf), cand.config.capex_usd)
        tol = self.plan.search.pareto_tolerance
        by_capex = sorted(feas, key=lambda x: x[0].config.capex_usd)
        thr_capex, thr_max, en_capex, en_min = [], [], [], []
        hi, lo = -math.inf, math.inf
        for cand, ev in by_capex:
            hi = max(hi, ev.throughput_tok_s)
            lo = min(lo, ev.energy_j_per_token)
            thr_capex.append(cand.config.capex_usd)
            thr_max.append(hi / (1 - tol) if tol < 1 else math.inf)
            en_capex.append(cand.config.capex_usd)
            en_min.append(lo / (1 + tol))
        return _State(second, second_obj, best, thr_capex, thr_max, en_capex, en_min)

    def objective_floor(self, c: Candidate) -> float:
        """A lower bound on a candidate's objective before the engine runs it (the
        recommendation and runner-up need every candidate whose floor is not above the
        second-best confirmed value). Capex is exact; energy per token is the screen's
        floor; a TCO is at least the capex share plus capex-proportional hosting (energy
        and per-device hosting at least 0), and per million tokens that over the screen's
        throughput ceiling; with cloud prices (a rented device has no capex share) 0."""
        objective = self.plan.objective
        capex = c.config.capex_usd
        if objective == "capex":
            return capex
        if objective == "energy_per_token":
            return c.energy_lb
        costs = self.plan.costs
        if costs is None or costs.cloud_usd_per_device_hour:
            return 0.0
        fixed = capex / costs.amortisation_years + capex * costs.hosting_fraction_of_capex
        # Rounding must never lift the floor over the value the engine run gives.
        fixed *= 1 - 1e-9
        if objective == "tco_per_year":
            return fixed
        tokens = c.throughput_ub * SECONDS_PER_YEAR * costs.utilisation
        return fixed / tokens * 1e6 if tokens > 0 else 0.0

    def _needed(self, c: Candidate, s: _State) -> bool:
        capex = c.config.capex_usd
        if self.plan.objective == "capex":
            if capex <= s.second_capex:
                return True
        elif self.objective_floor(c) <= s.second_objective:
            return True
        for e in c.config.entries():
            if e not in s.best_by_entry or capex <= s.best_by_entry[e]:
                return True
        i = bisect.bisect_right(s.thr_capex, capex) - 1
        if i < 0 or s.thr_prefix_max[i] < c.throughput_ub:
            return True
        j = bisect.bisect_right(s.en_capex, capex) - 1
        return j < 0 or s.en_prefix_min[j] > c.energy_lb

    def pending(self) -> list[Candidate]:
        """Candidates not yet confirmed that could still change an output, in order."""
        s = self._state()
        return [
            c for c in self.candidates if c.config.key not in self.results and self._needed(c, s)
        ]

    @property
    def budget_left(self) -> int:
        """Engine confirmations the plan still allows."""
        return max(0, self.plan.search.max_confirmations - len(self.results))

    def next_round(self) -> list[Config]:
        """The next round of configurations to confirm (empty: the search is complete, or
        the confirmation budget is spent)."""
        n = min(self.plan.search.round_size, self.budget_left)
        if n <= 0:
            return []
        out = []
        for c in self.pending():
            out.append(c.config)
            if len(out) == n:
                break
        return out

    def record(self, ev: Evaluation) -> None:
        """Add an engine result (of a candidate; repeated keys are ignored)."""
        if ev.key not in self.by_key:
            raise KeyError(f"{ev.key!r} is not a candidate of this plan")
        if ev.key not in self.results:
            self.results[ev.key] = ev
            self.engine_seconds += ev.seconds

    def report_progress(self, lo: float, hi: float) -> None:
        """Progress of the confirmation stage, mapped into ``[lo, hi]``."""
        if self.progress is None:
            return
        done = len(self.results)
        left = len(self.pending()) if self.budget_left else 0
        frac = done / (done + left) if done + left else 1.0
        self.progress(lo + (hi - lo) * frac)

    # -- driving ---------------------------------------------------------------------

    def confirm(self, evaluate_many: EvaluateMany | None = None) -> None:
        """Run rounds until nothing is needed (or the budget is spent)."""
        plan = self.plan
        run = evaluate_many or (lambda cs: [evaluate_config(plan, c) for c in cs])
        while True:
            batch = self.next_round()
            if not batch:
                break
            self.rounds += 1
            for ev in run(batch):
                self.record(ev)
            self.report_progress(self.screen_share, 0.85)

    def run(self, evaluate_many: EvaluateMany | None = None) -> dict[str, Any]:
        """Confirm, analyse the sensitivity to the load (if asked) and return the plan's
        result document (see :mod:`.report`)."""
        from .report import build_report
        from .sensitivity import load_sensitivity

        self.confirm(evaluate_many)
        sens = None
        if self.plan.search.sensitivity:
            sens = load_sensitivity(self, progress=self._sub(0.85, 0.99))
        doc = build_report(self, sens)
        if self.progress is not None:
            self.progress(1.0)
        return doc

    def _sub(self, lo: float, hi: float) -> ProgressFn | None:
        if self.progress is None:
            return None
        outer = self.progress

        def sub(frac: float) -> None:
            outer(lo + (hi - lo) * min(max(frac, 0.0), 1.0))

        return sub


def plan_search(
    plan: PlanSpec,
    *,
    progress: ProgressFn | None = None,
    evaluate_many: EvaluateMany | None = None,
) -> dict[str, Any]:
    """Search ``plan``'s space and return its result document (in this process)."""
    return Search(plan, progress=progress).run(evaluate_many)


__all__ = ["Candidate", "EvaluateMany", "Search", "plan_search", "rank"]
