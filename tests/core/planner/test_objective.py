"""A plan's ``objective`` (capex, TCO per year, $/M tokens, energy per token) and its
``costs``: the recommendation is the feasible configuration an exhaustive engine search
finds best for the objective, and the documents are validated naming the field."""

from __future__ import annotations

import math
from typing import Any

import pytest

from simulations.core.errors import ScenarioValidationError
from simulations.core.planner import Search
from simulations.core.planner.evaluate import objective_value

from .helpers import exhaustive, parse, small_doc

COSTS = {
    "electricity_usd_per_kwh": 0.6,
    "pue": 1.5,
    "amortisation_years": 6,
    "utilisation": 0.9,
    "hosting_fraction_of_capex": 0.05,
}


def _best_by(results: dict[str, Any], objective: str) -> str:
    feas = [(c, ev) for c, ev in results.values() if ev.feasible]
    feas.sort(
        key=lambda x: (
            objective_value(x[1], x[0].capex_usd, objective),
            x[0].capex_usd,
            x[1].energy_j_per_token,
            x[0].key,
        )
    )
    return str(feas[0][0].key)


@pytest.mark.parametrize(
    "objective", ["tco_per_year", "usd_per_million_tokens", "energy_per_token"]
)
def test_the_recommendation_is_the_exhaustive_best_for_the_objective(objective: str) -> None:
    plan = parse(small_doc(costs=COSTS, objective=objective))
    search = Search(plan)
    report = search.run()
    rec = report["recommendation"]
    assert rec is not None and rec["exact"] is True
    assert rec["key"] == _best_by(exhaustive(search), objective)
    assert rec["objective"]["name"] == objective
    assert math.isfinite(rec["objective"]["value"])
    # Each confirmed configuration carries its TCO under the plan's costs.
    assert rec["metrics"]["tco_usd_per_year"] > 0
    assert report["scenario"]["costs"]["electricity_usd_per_kwh"] == 0.6


def test_a_cost_objective_can_recommend_other_than_the_cheapest_to_buy() -> None:
    by_capex = Search(parse(small_doc(costs=COSTS))).run()["recommendation"]
    by_energy = Search(parse(small_doc(costs=COSTS, objective="energy_per_token"))).run()[
        "recommendation"
    ]
    assert by_capex["objective"]["name"] == "capex"
    assert by_energy["metrics"]["energy_j_per_token"] <= by_capex["metrics"]["energy_j_per_token"]


def test_without_costs_or_objective_the_recommendation_has_no_objective_block() -> None:
    rec = Search(parse(small_doc())).run()["recommendation"]
    assert "objective" not in rec and "tco_usd_per_year" not in rec["metrics"]


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"objective": "cheapest"}, "objective"),
        ({"objective": "tco_per_year"}, "objective"),
        ({"objective": "usd_per_million_tokens"}, "objective"),
        ({"costs": {**COSTS, "pue": 0.5}}, "costs.pue"),
        ({"costs": {"pue": 1.2}}, "costs.electricity_usd_per_kwh"),
    ],
)
def test_it_refuses_a_bad_objective_or_costs_naming_the_field(
    over: dict[str, Any], field: str
) -> None:
    with pytest.raises(ScenarioValidationError) as info:
        parse(small_doc(**over))
    assert field in info.value.errors
