"""``simulate`` computes identical systems of a scenario once and reuses the result."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.policies.homogeneous import HomogeneousPolicy
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate

DOC: dict[str, Any] = {
    "name": "twins",
    "model": "llama2-7b",
    "workload": {"requests": 30, "input_tokens": 512, "output_tokens": 64, "seed": 1},
    "systems": [
        {"name": "a", "policy": "homogeneous", "devices": [{"device": "a100-80gb", "count": 2}]},
        {"name": "b", "policy": "homogeneous", "devices": [{"device": "a100-80gb", "count": 2}]},
        {
            "name": "c",
            "policy": "homogeneous",
            "devices": [{"device": "a100-80gb", "count": 2}],
            "options": {"max_batch": 8},
        },
    ],
}


def test_identical_systems_are_simulated_once_and_named_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    original = HomogeneousPolicy.simulate

    def counting(self: Any, system: Any, *args: Any, **kw: Any) -> Any:
        calls.append(system.name)
        return original(self, system, *args, **kw)

    monkeypatch.setattr(HomogeneousPolicy, "simulate", counting)
    doc = simulate(parse_scenario(DOC, builtin_catalog()))
    assert calls == ["a", "c"]
    a, b, c = doc["systems"]
    assert (a["name"], b["name"], c["name"]) == ("a", "b", "c")
    assert {**b, "name": "a"} == a
    assert c["ttft_ms"] != a["ttft_ms"]


def test_a_reused_result_equals_a_fresh_simulation() -> None:
    doc = simulate(parse_scenario(DOC, builtin_catalog()))
    alone = copy.deepcopy(DOC)
    alone["systems"] = [DOC["systems"][1]]
    fresh = simulate(parse_scenario(alone, builtin_catalog()))
    assert doc["systems"][1] == fresh["systems"][0]


def test_a_policy_that_draws_from_its_generator_is_simulated_for_every_system(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    original = HomogeneousPolicy.simulate

    def counting(self: Any, system: Any, *args: Any, **kw: Any) -> Any:
        calls.append(system.name)
        return original(self, system, *args, **kw)

    monkeypatch.setattr(HomogeneousPolicy, "simulate", counting)
    monkeypatch.setattr(HomogeneousPolicy, "uses_rng", True)
    simulate(parse_scenario(DOC, builtin_catalog()))
    assert calls == ["a", "b", "c"]
