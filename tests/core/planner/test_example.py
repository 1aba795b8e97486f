"""The fixed example plan (examples/plan-llama2-7b-conv.json): LLaMA2-7B, the Azure
conversation trace's lengths at 1 request/s, p90 TTFT ≤ 1 s and p90 TPOT ≤ 50 ms, the
catalog's priced GPUs and the U280 under ``homogeneous`` and ``glitches``.

The recommended system meets the targets in the engine, and an exhaustive engine search
of the same space (every configuration the constraints admit, no screen) finds nothing
cheaper that is feasible.
"""

from __future__ import annotations

from simulations.core.catalog import builtin_catalog
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from tests.core.planner.helpers import (
    EXAMPLE,
    best_feasible,
    every_config,
    example_exhaustive,
    example_search,
)


def test_the_recommended_system_meets_the_targets_when_simulated_again() -> None:
    _, report = example_search()
    rec = report["recommendation"]
    assert rec is not None
    scenario = parse_scenario(report["scenario"], builtin_catalog(), trace_dir=EXAMPLE.parent)
    result = simulate(scenario)["systems"][0]
    assert result["name"] == rec["key"]
    assert result["ttft_ms"]["p90"] <= 1000
    assert result["tpot_ms"]["p90"] <= 50
    assert result["slo_met"] is True
    assert result["capex_usd"] == rec["capex_usd"]


def test_no_cheaper_configuration_of_the_space_is_feasible_in_an_exhaustive_search() -> None:
    search, report = example_search()
    truth = example_exhaustive()
    rec = report["recommendation"]
    assert len(truth) == search.admitted == report["space"]["admitted"]
    cheaper = {k: ev for k, (c, ev) in truth.items() if c.capex_usd < rec["capex_usd"]}
    assert cheaper, "the space must hold cheaper configurations for this to mean anything"
    assert [k for k, ev in cheaper.items() if ev.feasible] == []
    feas = best_feasible(truth)
    assert feas[0][0].key == rec["key"]
    assert feas[1][0].key == rec["runner_up"]["key"]


def test_the_search_simulated_a_fraction_of_the_space() -> None:
    search, report = example_search()
    runs = report["confirmation"]["engine_runs"]
    assert report["confirmation"]["complete"]
    assert runs < search.admitted / 2
    pruned = sum(1 for _, verdict, i in every_config(search) if verdict.reason[i])
    assert pruned == search.admitted - len(search.candidates) > 0


def test_the_example_is_heterogeneous_and_says_why_it_wins() -> None:
    _, report = example_search()
    rec = report["recommendation"]
    roles = {d.get("role") for d in rec["system"]["devices"]}
    assert rec["system"]["policy"] == "glitches" and roles == {"prefill", "decode"}
    text = " ".join(rec["reasons"])
    assert "Binding target" in text and "Runner-up" in text
    assert rec["binding"]["target"] in ("ttft_p90_ms", "tpot_p90_ms")
    assert rec["cheaper"]["configurations"] > 0
    assert rec["cheaper"]["not_confirmed"] == 0


def test_the_load_sensitivity_is_confirmed_by_the_engine_on_both_sides() -> None:
    _, report = example_search()
    sens = report["sensitivity"]
    assert sens["applicable"]
    checks = {c["load_factor"]: c["feasible"] for c in sens["engine_checks"]}
    assert checks[sens["breaks_at_load_factor"]] is False
    holds = sens["holds_up_to_load_factor"]
    assert holds == 1.0 or checks[holds] is True
    assert holds < sens["breaks_at_load_factor"] <= holds * (1 + sens["tolerance"]) ** 2
    nxt = sens["next_recommendation"]
    assert nxt["key"] is None or nxt["capex_usd"] >= report["recommendation"]["capex_usd"]
