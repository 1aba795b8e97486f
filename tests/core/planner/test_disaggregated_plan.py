"""The planner on disaggregated systems: it picks the device of each pool and the P:D
counts as an exhaustive engine search does, and says which phase binds and what the KV
transfer costs."""

from __future__ import annotations

from typing import Any

from simulations.core.planner import Search
from tests.core.planner.helpers import best_feasible, exhaustive, parse, small_doc


def _doc() -> dict[str, Any]:
    doc = small_doc()
    doc["space"]["devices"] = [
        {"device": "a100-80gb", "max_count": 3},
        {"device": "v100s", "max_count": 3},
    ]
    doc["space"]["policies"] = [
        {"policy": "disaggregated", "options": {"kv_link": ["", "nvlink3"]}},
    ]
    doc["targets"] = {"ttft_p90_ms": 400, "tpot_p90_ms": 32}
    doc["search"]["pareto_tolerance"] = 0
    return doc


def test_the_plan_is_the_exhaustive_optimum_and_explains_the_split() -> None:
    search = Search(parse(_doc()))
    report = search.run()
    feasible = best_feasible(exhaustive(search))
    rec = report["recommendation"]
    assert feasible and rec is not None
    assert rec["key"] == feasible[0][0].key
    roles = {d["role"] for d in rec["system"]["devices"]}
    assert roles == {"prefill", "decode"}
    reasons = " ".join(rec["reasons"])
    prefill, decode = (
        sum(d["count"] for d in rec["system"]["devices"] if d["role"] == r)
        for r in ("prefill", "decode")
    )
    assert f"Disaggregated, P:D = {prefill}:{decode} devices" in reasons
    assert "busier" in reasons or "decode binds" in reasons
    assert "KV transfer:" in reasons and "ms on the wire" in reasons
