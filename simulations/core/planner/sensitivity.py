"""Sensitivity of the recommendation to the arrival rate: how far can the load grow before
the recommended system stops meeting the targets, and what would be recommended then?

The load factor ``λ`` scales the arrival rate: Poisson arrivals run at ``λ × rate``, trace
arrivals are compressed (``time_scale / λ``); lengths and the seed stay the same, so the
requests differ only in their arrival times. Closed workloads have no rate to scale.

1. The screen brackets the answer: above the largest ``λ`` at which the screen still lets
   the recommended configuration through, the engine cannot find it feasible either.
2. The engine bisects (on ``log λ``) between 1, where it is feasible, and that bracket,
   until the interval is narrower than ``load_tolerance``; each step is one simulation.
3. Just past the break, the cheapest configuration that is still feasible is looked for
   among the survivors that were not confirmed infeasible at the stated load, cheapest
   first, with the screen at the higher load pruning.

Assumption (stated in the result): feasibility is monotone in the load — a configuration
that misses a target at some rate misses it at every higher rate. Bisection and step 3
rely on it; request-level schedulers can in principle violate it by a hair.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from simulations.core.engine.requests import generate_requests
from simulations.core.policies.base import ProgressFn
from simulations.core.spec import ArrivalKind, WorkloadSpec

from .evaluate import Evaluation, evaluate_config, rank
from .screen import Screen
from .space import describe

if TYPE_CHECKING:
    from .search import Search

#: Most engine runs spent looking for the next recommendation past the break.
NEXT_BUDGET = 24


def scaled_workload(workload: WorkloadSpec, factor: float) -> WorkloadSpec | None:
    """The workload with its arrival rate multiplied by ``factor`` (None if closed)."""
    arrival = workload.arrival
    if arrival.kind is ArrivalKind.POISSON:
        assert arrival.rate_per_s is not None
        return replace(workload, arrival=replace(arrival, rate_per_s=arrival.rate_per_s * factor))
    if arrival.kind is ArrivalKind.TRACE:
        return replace(workload, arrival=replace(arrival, time_scale=arrival.time_scale / factor))
    return None


def base_rate_per_s(workload: WorkloadSpec) -> float | None:
    """Mean arrival rate of the workload's requests (requests per second)."""
    if workload.arrival.kind is ArrivalKind.POISSON:
        return workload.arrival.rate_per_s
    if workload.arrival.kind is ArrivalKind.TRACE:
        rs = generate_requests(workload)
        span = float(rs.arrival_s[-1] - rs.arrival_s[0])
        return (len(rs) - 1) / span if span > 0 else None
    return None


def load_sensitivity(search: Search, *, progress: ProgressFn | None = None) -> dict[str, Any]:
    """How far the load can grow before the recommendation changes (see the module notes)."""
    plan = search.plan
    feas = search.feasible()
    if not feas:
        return {"applicable": False, "why": "no configuration meets the targets"}
    winner, _ = feas[0]
    config = winner.config
    if scaled_workload(plan.workload, 2.0) is None:
        return {"applicable": False, "why": "closed arrivals have no rate to scale"}
    opts = plan.search
    max_f = opts.max_load_factor
    tol = opts.load_tolerance
    screens: dict[float, Screen] = {}
    engine: dict[float, Evaluation] = {}

    def workload(f: float) -> WorkloadSpec:
        wl = scaled_workload(plan.workload, f)
        assert wl is not None
        return wl

    def screen_at(f: float) -> Screen:
        s = screens.get(f)
        if s is None:
            s = Screen(plan, generate_requests(workload(f), plan.model), search.cache)
            screens[f] = s
        return s

    def screen_ok(f: float) -> bool:
        return bool(screen_at(f).evaluate_config(config)["verdict"] == "possible")

    def engine_ok(f: float) -> bool:
        ev = engine.get(f)
        if ev is None:
            ev = evaluate_config(plan, config, workload=workload(f))
            engine[f] = ev
            if progress is not None:
                progress(min(0.7, 0.1 * len(engine)))
        return ev.feasible

    # 1. Screen bracket (cheap): largest factor the screen lets through.
    lo, hi = 1.0, max_f
    if screen_ok(max_f):
        screen_limit = max_f
    else:
        while math.log(hi / lo) > math.log1p(tol) / 4:
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if screen_ok(mid) else (lo, mid)
        screen_limit = lo
    # 2. Engine bisection between the stated load and the bracket.
    lo = 1.0
    hi_known_bad: float | None = None if screen_limit >= max_f else hi
    if engine_ok(screen_limit):
        lo = screen_limit
    else:
        hi_known_bad = screen_limit
        while math.log(hi_known_bad / lo) > math.log1p(tol):
            mid = math.sqrt(lo * hi_known_bad)
            if engine_ok(mid):
                lo = mid
            else:
                hi_known_bad = mid
    rate = base_rate_per_s(plan.workload)
    out: dict[str, Any] = {
        "applicable": True,
        "recommendation": config.key,
        "stated_rate_per_s": rate,
        "holds_up_to_load_factor": lo,
        "holds_up_to_rate_per_s": rate * lo if rate is not None else None,
        "screen_limit_load_factor": screen_limit,
        "max_load_factor_searched": max_f,
        "tolerance": tol,
        "engine_checks": [
            {"load_factor": f, "feasible": ev.feasible, "why": ev.first_miss()}
            for f, ev in sorted(engine.items())
        ],
        "assumes": "feasibility is monotone in the arrival rate",
    }
    if hi_known_bad is None:
        out["summary"] = (
            f"The recommendation still meets every target at {lo:g}× the stated load "
            f"(the largest factor searched)."
        )
        return out
    bad = engine.get(hi_known_bad)
    out["breaks_at_load_factor"] = hi_known_bad
    out["breaks_at_rate_per_s"] = rate * hi_known_bad if rate is not None else None
    if bad is not None:
        out["breaks_because"] = bad.first_miss()
        out["breaks_misses"] = bad.misses
    else:
        out["breaks_because"] = "the screen rules it out at that load"
    nxt = _next_recommendation(search, hi_known_bad, workload(hi_known_bad), screen_at)
    out["next_recommendation"] = nxt
    if progress is not None:
        progress(1.0)
    head = (
        f"The recommendation meets the targets up to {lo:.3g}× the stated load"
        + (f" ({rate * lo:.3g} requests/s)" if rate is not None else "")
        + f"; at {hi_known_bad:.3g}× it fails ({out['breaks_because']})."
    )
    if nxt.get("key"):
        head += (
            f" Then the cheapest that holds is {nxt['description']} at ${nxt['capex_usd']:,.0f}."
        )
    out["summary"] = head
    return out


def _next_recommendation(
    search: Search, factor: float, wl: WorkloadSpec, screen_at: Any
) -> dict[str, Any]:
    """Cheapest configuration still feasible at ``factor`` (monotonicity assumed: a survivor
    the engine found infeasible at the stated load is skipped)."""
    plan = search.plan
    winner = search.feasible()[0][0]
    screen = screen_at(factor)
    spent = 0
    found: list[tuple[tuple[float, float, float, str], Any, Evaluation]] = []
    for cand in search.candidates:
        if found and cand.config.capex_usd > found[0][0][0]:
            break
        if cand.config.key == winner.config.key:
            continue
        ev0 = search.results.get(cand.config.key)
        if ev0 is not None and not ev0.feasible:
            continue
        if screen.evaluate_config(cand.config)["verdict"] != "possible":
            continue
        if spent >= NEXT_BUDGET:
            break
        spent += 1
        ev = evaluate_config(plan, cand.config, workload=wl)
        if ev.feasible:
            found.append((rank(ev, cand.config.capex_usd, plan.objective), cand, ev))
            found.sort(key=lambda x: x[0])
    if not found:
        exhausted = spent >= NEXT_BUDGET
        return {
            "key": None,
            "engine_runs": spent,
            "why": (
                f"none found within {NEXT_BUDGET} engine runs"
                if exhausted
                else "no configuration of the space meets the targets at that load"
            ),
        }
    _, cand, ev = found[0]
    return {
        "key": cand.config.key,
        "description": describe(cand.config, plan),
        "capex_usd": cand.config.capex_usd,
        "load_factor": factor,
        "metrics": ev.metrics,
        "engine_runs": spent,
    }


__all__ = ["base_rate_per_s", "load_sensitivity", "scaled_workload"]
