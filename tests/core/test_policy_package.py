"""A policy package added from outside the core (``tests/core/toy/policy``: the policy and
its planner screen) is searched by the planner like any other: registering it is all it
takes — the planner screens its configurations with the package's bounds, confirms the
survivors on the engine and recommends the cheapest feasible one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from simulations.core.errors import ScenarioValidationError
from simulations.core.planner import Search
from simulations.core.policies import base
from simulations.core.policies.base import register, screened_policies
from tests.core.planner.helpers import every_config, exhaustive, parse, small_doc
from tests.core.toy.policy import ToyReplicasPolicy


@pytest.fixture
def toy_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy registered in a copy of the registry (the real one is put back after)."""
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    register(ToyReplicasPolicy)
    yield


def _doc() -> dict[str, Any]:
    doc = small_doc()
    doc["workload"]["arrival"]["rate_per_s"] = 0.6
    doc["targets"] = {"ttft_p90_ms": 3000, "tpot_p90_ms": 26, "min_throughput_tok_s": 40}
    doc["space"] = {
        "devices": [
            {"device": "a100-80gb", "max_count": 5},
            {"device": "v100s", "max_count": 5},
        ],
        "policies": [{"policy": ToyReplicasPolicy.name}],
    }
    return doc


@pytest.mark.usefixtures("toy_policy")
def test_a_registered_policy_package_is_screened_confirmed_and_recommended() -> None:
    assert ToyReplicasPolicy.name in screened_policies()
    search = Search(parse(_doc()))
    report = search.run()
    # Screened with the package's own bounds: the V100S's batch-1 decode step misses the
    # TPOT target alone, so none of its counts is simulated.
    assert report["space"]["screened_out"] == {"tpot_alone": 5}
    assert report["space"]["survivors"] == 5
    # Confirmed on the engine, cheapest first, and the cheapest feasible recommended.
    assert report["confirmation"]["engine_runs"] >= 1
    assert report["confirmation"]["complete"]
    results = exhaustive(search)
    feasible = sorted((cfg.capex_usd, key) for key, (cfg, ev) in results.items() if ev.feasible)
    assert feasible, "the space holds a feasible system"
    assert report["recommendation"]["key"] == feasible[0][1]
    assert report["recommendation"]["key"].startswith(f"{ToyReplicasPolicy.name}:")
    # The package's bounds are optimistic: what they rule out the engine finds infeasible.
    for cfg, verdict, i in every_config(search):
        if not verdict.possible[i]:
            assert not results[cfg.key][1].feasible, cfg.key


def test_an_unregistered_package_is_not_searchable() -> None:
    """The toy is registered only inside the fixture: the real registry never lists it."""
    assert ToyReplicasPolicy.name not in screened_policies()
    with pytest.raises(ScenarioValidationError, match="toy-replicas"):
        parse(_doc())
