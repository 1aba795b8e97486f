"""The planner searches expert offloading (``moe-offload``) like the other engine policies:
the offload split (routed experts kept on the GPU), the way the offloaded experts run and
the GPU count with one host CPU beside each GPU; the plan document names what it refuses,
and the shipped example recommends a system and says why."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest

from simulations.core.errors import ScenarioValidationError
from simulations.core.planner import Search, enumerate_space
from tests.core.planner.helpers import REPO, parse

EXAMPLE = REPO / "examples" / "plan-qwen3-30b-a3b-l40s-offload.json"

SMALL: dict[str, Any] = {
    "name": "Qwen3-30B-A3B offloading, small",
    "model": "qwen3-30b-a3b",
    "workload": {
        "requests": 30,
        "input_tokens": 512,
        "output_tokens": 64,
        "arrival": {"kind": "poisson", "rate_per_s": 0.5},
        "seed": 0,
    },
    "targets": {"ttft_p90_ms": 3000, "tpot_p90_ms": 150},
    "space": {
        "devices": [
            {"device": "l40s", "max_count": 3, "runtime": "vllm-fp16", "price_usd": 8000},
            {"device": "epyc-9575f", "max_count": 2, "price_usd": 4000},
        ],
        "policies": [
            {"policy": "moe-offload", "options": {"max_batch": [16], "gpu_experts": [0, 32]}}
        ],
    },
    "search": {"sensitivity": False},
}


def _doc(**options: Any) -> dict[str, Any]:
    doc = copy.deepcopy(SMALL)
    doc["space"]["policies"][0]["options"].update(options)
    return doc


def _errors(doc: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(ScenarioValidationError) as info:
        parse(doc)
    return info.value.errors


@cache
def _example() -> dict[str, Any]:
    plan = parse(json.loads(EXAMPLE.read_text()), trace_dir=EXAMPLE.parent)
    return Search(plan).run()


def test_a_gpu_has_exactly_one_host_beside_it_within_the_hosts_own_count_range() -> None:
    plan = parse(_doc())
    counts = set()
    for group in enumerate_space(plan).groups:
        roles = [r for r, _ in group.signature.roles]
        if roles == ["gpu", "host"]:
            counts |= {tuple(int(c) for c in row) for row in group.counts}
    # three GPUs would need three hosts; the plan lists at most two
    assert counts == {(1, 1), (2, 2)}


def test_the_offload_split_is_searched_and_each_is_judged_in_the_engine() -> None:
    report = Search(parse(_doc(offload_mode=["auto", "stream"]))).run()
    splits = {
        (k.split("gpu_experts=")[1].split(",")[0], k.split("offload_mode=")[1].split(",")[0])
        for k in (e["key"] for e in report["evaluated"])
        if "[host]" in k
    }
    assert splits == {("0", "auto"), ("32", "auto"), ("0", "stream"), ("32", "stream")}
    for e in report["evaluated"]:
        m, s = e["metrics"], e["screen"]
        if m:
            assert s["ttft_floor_ms"] <= m["ttft_p90_ms"]
            assert s["tpot_floor_ms"] <= m["tpot_p90_ms"]
            assert s["throughput_ceiling_tok_s"] >= m["throughput_tok_s"]


def test_a_split_beyond_the_models_experts_is_refused_naming_the_value() -> None:
    errs = _errors(_doc(gpu_experts=[0, 200]))
    assert list(errs) == ["space.policies[0].options.gpu_experts[1]"]
    assert "128 routed experts" in errs["space.policies[0].options.gpu_experts[1]"][0]


def test_offloading_a_dense_model_is_refused_naming_the_policy() -> None:
    doc = _doc()
    doc["model"] = "llama2-7b"
    errs = _errors(doc)
    assert "not a mixture of experts" in errs["space.policies[0].policy"][0]


def test_the_example_recommends_offloading_and_says_which_phase_binds_and_the_split() -> None:
    report = _example()
    rec = report["recommendation"]
    assert rec is not None and rec["exact"]
    assert rec["key"].startswith("moe-offload:1xl40s")
    why = " ".join(rec["reasons"])
    assert "routed experts per MoE layer on the GPU" in why
    assert "decode binds" in why
    assert "computed by the host CPU" in why
    # beyond the load it holds, the cheapest that holds is more L40S without offloading
    sens = report["sensitivity"]
    assert sens["breaks_at_load_factor"] > 1
    assert sens["next_recommendation"]["key"].startswith("homogeneous:2xl40s")


def test_each_cold_tier_fills_only_the_roles_its_systems_have() -> None:
    doc = _doc(cold_tier=["host", "lpddr"], offload_mode=["auto"])
    doc["space"]["devices"].append(
        {"device": "h2m2", "max_count": 1, "runtime": "h2m2-int8", "price_usd": 10000}
    )
    plan = parse(doc)
    layouts = set()
    for group in enumerate_space(plan).groups:
        tier = dict(group.signature.options)["cold_tier"]
        labels = tuple((r, plan.devices[e].device.slug) for r, e in group.signature.roles)
        layouts.add((tier, labels))
    # GPUs never go without a host nor boards with one; no GPU under the board's tier
    assert layouts == {
        ("host", (("gpu", "l40s"), ("host", "epyc-9575f"))),
        ("lpddr", (("gpu", "h2m2"),)),
    }


def test_a_cold_tier_without_a_device_for_its_roles_is_refused_naming_the_devices() -> None:
    doc = _doc(cold_tier=["lpddr"])
    errs = _errors(doc)
    assert "with cold_tier lpddr needs a device for its role 'gpu'" in errs["space.devices"][0]
