"""The search's mechanics: deterministic rounds, progress, budget, replay from stored
results, and the load sensitivity."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simulations.core.planner import Search, evaluate_config
from simulations.core.planner.sensitivity import base_rate_per_s, scaled_workload
from tests.core.planner.helpers import parse, small_doc

TIMING = ("seconds", "configurations_per_s", "cost_tables_seconds", "engine_seconds")


def _strip(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k not in TIMING}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def test_the_same_document_gives_the_same_result() -> None:
    doc = small_doc(search={"sensitivity": True, "round_size": 3})
    one = Search(parse(doc)).run()
    two = Search(parse(doc)).run()
    assert json.dumps(_strip(one), sort_keys=True) == json.dumps(_strip(two), sort_keys=True)


def test_progress_rises_to_one() -> None:
    seen: list[float] = []
    Search(parse(small_doc()), progress=seen.append).run()
    assert seen[-1] == 1.0
    assert all(0.0 <= x <= 1.0 for x in seen)
    assert seen == sorted(seen)


def test_a_replayed_search_asks_for_the_same_rounds() -> None:
    plan = parse(small_doc())
    live = Search(plan)
    replay_log: list[list[str]] = []
    while batch := live.next_round():
        replay_log.append([c.key for c in batch])
        for c in batch:
            live.record(evaluate_config(plan, c))
    # A fresh search fed the stored results round by round asks for exactly the same.
    fresh = Search(plan)
    for keys in replay_log:
        assert [c.key for c in fresh.next_round()] == keys
        for k in keys:
            fresh.record(live.results[k])
    assert fresh.next_round() == []


def test_a_spent_budget_is_reported_and_exactness_is_not_claimed() -> None:
    doc = small_doc(search={"sensitivity": False, "round_size": 2, "max_confirmations": 2})
    report = Search(parse(doc)).run()
    assert report["confirmation"]["engine_runs"] == 2
    assert report["confirmation"]["complete"] is False
    assert report["pareto"]["exact"] is False
    rec = report["recommendation"]
    assert rec is None or rec["exact"] is False or rec["cheaper"]["not_confirmed"] == 0


def test_recording_a_configuration_outside_the_candidates_is_refused() -> None:
    search = Search(parse(small_doc()))
    pruned = next(
        g.config(i, search.plan)
        for g, v in zip(search.groups, search.verdicts, strict=True)
        for i in range(len(g))
        if v.reason[i]
    )
    with pytest.raises(KeyError):
        search.record(evaluate_config(search.plan, pruned))


def test_rates_scale_for_poisson_and_trace_arrivals_and_not_for_closed_ones() -> None:
    plan = parse(small_doc())
    wl = scaled_workload(plan.workload, 2.0)
    assert wl is not None and wl.arrival.rate_per_s == 3.0
    assert base_rate_per_s(plan.workload) == 1.5
    closed = small_doc()
    closed["workload"]["arrival"] = {"kind": "closed"}
    assert scaled_workload(parse(closed).workload, 2.0) is None
    report = Search(parse({**closed, "search": {"sensitivity": True}})).run()
    sens = report["sensitivity"]
    assert sens is not None and sens["applicable"] is False


def test_the_sensitivity_brackets_the_break_with_engine_runs() -> None:
    doc = small_doc(search={"sensitivity": True, "load_tolerance": 0.05})
    report = Search(parse(doc)).run()
    sens = report["sensitivity"]
    assert sens["applicable"]
    checks = {c["load_factor"]: c for c in sens["engine_checks"]}
    if "breaks_at_load_factor" in sens:
        assert checks[sens["breaks_at_load_factor"]]["feasible"] is False
        assert sens["breaks_at_load_factor"] <= sens["screen_limit_load_factor"] * 1.0001
        assert sens["summary"].startswith("The recommendation meets the targets up to")
    holds = sens["holds_up_to_load_factor"]
    assert holds >= 1.0
    if holds > 1.0:
        assert checks[holds]["feasible"] is True
