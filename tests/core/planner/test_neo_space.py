"""Neo-style nodes in the search space: the GPU count is a tensor-parallel degree, the host
CPU is a searched choice with count 1 that takes no device slot, and prices the catalog
lacks come from the plan document."""

from __future__ import annotations

import math

import numpy as np

from simulations.core.catalog import builtin_catalog
from simulations.core.planner import Search, enumerate_space, evaluate_config, system_document
from simulations.core.planner import document as plan_spec
from simulations.core.scenario import parse_scenario
from tests.core.planner.helpers import every_config, neo_doc, parse


def _keys(doc: dict) -> set[str]:
    plan = parse(doc)
    space = enumerate_space(plan)
    return {g.config(i, plan).key for g in space.groups for i in range(len(g))}


def test_the_host_cpu_is_a_searched_choice_with_one_per_node() -> None:
    plan = parse(neo_doc())
    space = enumerate_space(plan)
    assert space.total == plan_spec.count_configurations(plan.devices, plan.policies)
    # (3 + 2) GPU counts x 2 host CPUs under each policy: gpu-only's idle host is still
    # bought, so it is never left out while there is one to choose.
    assert space.total == 3 * 10
    keys = _keys(neo_doc())
    assert "neo:3xa10g@vllm-fp16[gpu]+1xg5-16xlarge-cpu[cpu]" in keys
    assert "gpu-only:2xh100-sxm@vllm-fp16[gpu]+1xg5-4xlarge-cpu[cpu]" in keys
    assert "gpu-only:2xh100-sxm@vllm-fp16[gpu]" not in keys
    # Without a host CPU among its devices, gpu-only runs (and is priced) without one.
    doc = neo_doc()
    doc["space"]["policies"] = [{"policy": "gpu-only", "devices": ["a10g", "h100-sxm"]}]
    plan = parse(doc)
    assert (
        enumerate_space(plan).total
        == plan_spec.count_configurations(plan.devices, plan.policies)
        == 5
    )
    assert "gpu-only:2xh100-sxm@vllm-fp16[gpu]" in _keys(doc)
    for g in space.groups:
        roles = [r for r, _ in g.signature.roles]
        if "cpu" in roles:
            assert np.all(g.counts[:, roles.index("cpu")] == 1)


def test_the_host_cpu_takes_no_device_slot_and_the_node_is_one() -> None:
    doc = neo_doc(constraints={"max_devices_per_node": 2, "max_nodes": 4})
    space = enumerate_space(parse(doc))
    for g in space.groups:
        gpus = g.counts[:, [r for r, _ in g.signature.roles].index("gpu")]
        assert set(gpus.tolist()) <= {1, 2}
    keys = _keys(doc)
    assert "neo:2xa10g@vllm-fp16[gpu]+1xg5-4xlarge-cpu[cpu]" in keys
    assert not any(k.startswith("neo:3x") for k in keys)


def test_configurations_are_scenario_systems_priced_from_the_plan_document() -> None:
    plan = parse(neo_doc())
    search = Search(plan)
    configs = [c for c, _, _ in every_config(search)]
    quoted = {d.device.slug: d.price_usd for d in plan.devices}
    doc = {
        "name": "all",
        "model": "llama3.1-8b",
        "workload": neo_doc()["workload"],
        "systems": [system_document(c, plan) for c in configs[:32]],
    }
    spec = parse_scenario(doc, builtin_catalog())
    for c, s in zip(configs, spec.systems, strict=False):
        assert math.isclose(sum(quoted[p.device.slug] * p.count for p in s.devices), c.capex_usd)


def test_a_tensor_parallel_degree_that_does_not_divide_the_heads_is_invalid_in_both_stages() -> (
    None
):
    plan = parse(neo_doc())
    search = Search(plan)
    search.run()
    verdicts = {c.key: (c, v, i) for c, v, i in every_config(search)}
    cfg, v, i = verdicts["neo:3xa10g@vllm-fp16[gpu]+1xg5-4xlarge-cpu[cpu]"]
    row = v.row(i)
    assert row["verdict"] == "invalid" and "divisible" in row["detail"]
    _, v2, i2 = verdicts["neo:1xa10g@vllm-fp16[gpu]+1xg5-4xlarge-cpu[cpu]"]
    assert "detail" not in v2.row(i2)
    ev = evaluate_config(plan, cfg)
    assert not ev.feasible and "divisible" in ev.error


def test_the_report_says_where_each_price_came_from_and_uses_it() -> None:
    plan = parse(neo_doc())
    report = Search(plan).run()
    sources = {d["device"]: d["price_source"] for d in report["per_device_type"]}
    assert sources["a10g"] == "plan document (space.devices[0].price_usd)"
    assert sources["h100-sxm"].startswith("catalog (")
    rec = report["recommendation"]
    assert rec is not None
    assert rec["metrics"]["capex_usd"] == rec["capex_usd"]
    for e in report["evaluated"]:
        assert e["metrics"].get("capex_usd", e["capex_usd"]) == e["capex_usd"]
