"""The search space: canonical keys, systems that parse as scenarios, and constraints that
are respected by everything the planner recommends or simulates."""

from __future__ import annotations

import math

import numpy as np

from simulations.core.catalog import builtin_catalog
from simulations.core.planner import Search, enumerate_space, system_document
from simulations.core.planner.space import CONSTRAINT_ORDER
from simulations.core.scenario import parse_scenario
from tests.core.planner.helpers import every_config, parse, small_doc


def test_keys_are_unique_canonical_and_name_counts_roles_and_options() -> None:
    plan = parse(small_doc())
    space = enumerate_space(plan)
    keys = [g.config(i, plan).key for g in space.groups for i in range(len(g))]
    assert len(keys) == len(set(keys)) == space.admitted
    assert "glitches:2xa100-80gb[prefill]+3xu280[decode]:prefetch_ratio=4" in keys
    assert "homogeneous:3xv100s:max_batch=1" in keys
    assert "glitches:1xv100s[prefill]:prefetch_ratio=4" in keys  # the decode role is optional


def test_every_configuration_is_a_valid_scenario_system_with_its_capex() -> None:
    plan = parse(small_doc())
    search = Search(plan)
    configs = [c for c, _, _ in every_config(search)]
    doc = {
        "name": "all",
        "model": "llama2-7b",
        "workload": small_doc()["workload"],
        "systems": [system_document(c, plan) for c in configs[:32]],
    }
    spec = parse_scenario(doc, builtin_catalog())
    for c, s in zip(configs, spec.systems, strict=False):
        prices = sum(p.device.price_usd * p.count for p in s.devices)
        assert math.isclose(prices, c.capex_usd)


def test_constraints_exclude_configurations_before_the_screen() -> None:
    doc = small_doc(
        constraints={"max_capex_usd": 40000, "max_power_w": 1200, "max_devices_per_node": 4}
    )
    plan = parse(doc)
    space = enumerate_space(plan)
    for g in space.groups:
        assert np.all(g.capex_usd <= 40000)
        assert np.all(g.power_w <= 1200)
        if g.signature.policy == "glitches":  # GLITCHES shares one host: one node
            assert np.all(g.counts.sum(axis=1) <= 4)
    assert sum(space.excluded.values()) == space.total - space.admitted > 0
    assert set(space.excluded) == set(CONSTRAINT_ORDER)


def test_data_parallel_systems_may_span_nodes_up_to_the_limit() -> None:
    doc = small_doc(constraints={"max_devices_per_node": 1, "max_nodes": 2})
    space = enumerate_space(parse(doc))
    sizes = {g.signature.policy: set(g.counts.sum(axis=1).tolist()) for g in space.groups}
    assert sizes["homogeneous"] == {1, 2}
    assert sizes["glitches"] == {1}


def test_nothing_simulated_or_recommended_violates_a_constraint() -> None:
    free = Search(parse(small_doc())).run()
    assert free["recommendation"] is not None
    cap = free["recommendation"]["capex_usd"]
    n = sum(d["count"] for d in free["recommendation"]["system"]["devices"])
    doc = small_doc(constraints={"max_devices_per_node": n - 1, "max_nodes": 1})
    search = Search(parse(doc))
    capped = search.run()
    for key in search.results:
        assert search.by_key[key].config.device_count <= n - 1
    assert capped["recommendation"] is None or capped["recommendation"]["capex_usd"] >= cap
    assert capped["space"]["excluded_by_constraints"]["max_devices_per_node"] > 0
    below = Search(parse(small_doc(constraints={"max_capex_usd": cap - 1}))).run()
    assert below["recommendation"] is None
    assert below["space"]["excluded_by_constraints"]["max_capex_usd"] > 0
    assert "misses a target" in below["why_no_recommendation"]
