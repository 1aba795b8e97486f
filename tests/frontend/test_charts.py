"""Chart builders and the core-derived figures behind them (no database)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from frontend import analysis
from frontend.charts.papers import heterollm_placement_figure
from frontend.charts.sweep import pareto_front
from frontend.charts.timeline import MAX_INTERVALS, timeline_figure
from simulations.core.catalog import builtin_catalog
from simulations.core.policies import get_policy
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
H2M2_EXAMPLE = Path(__file__).resolve().parents[2] / "frontend" / "examples" / "h2m2-gpt3-175b.json"


def test_the_pareto_front_is_exactly_the_non_dominated_points() -> None:
    rng = random.Random(5)
    points = [
        {"capex_usd": rng.choice([1e4, 2e4, 3e4, 4e4]), "throughput_tok_s": rng.uniform(0, 100)}
        for _ in range(60)
    ] + [{"capex_usd": None, "throughput_tok_s": 1e9}]
    front = pareto_front(points)
    usable = [p for p in points if p["capex_usd"] is not None]

    def dominated(p: dict) -> bool:
        return any(
            q["capex_usd"] <= p["capex_usd"]
            and q["throughput_tok_s"] >= p["throughput_tok_s"]
            and (q["capex_usd"] < p["capex_usd"] or q["throughput_tok_s"] > p["throughput_tok_s"])
            for q in usable
        )

    assert {id(p) for p in front} == {id(p) for p in usable if not dominated(p)}


def test_the_gantt_chart_bins_the_whole_run_past_its_budget_of_bars() -> None:
    intervals = [
        {"start_s": i * 1.0, "end_s": i + 0.5, "kind": "decode", "request": i, "batch": 1}
        for i in range(MAX_INTERVALS + 500)
    ]
    system = {
        "name": "s",
        "timeline": [
            {"device": "d", "index": 0, "role": "", "intervals": intervals, "transfers": []}
        ],
    }
    fig = timeline_figure(system)
    assert sum(len(t.x) for t in fig.data) <= MAX_INTERVALS
    assert f"{MAX_INTERVALS + 500:,} intervals shown in" in fig.layout.title.text
    end = max(b + x for t in fig.data for b, x in zip(t.base, t.x, strict=True))
    assert end == pytest.approx(MAX_INTERVALS + 499.5)  # the last interval's end


def test_the_h2m2_footprint_breaks_the_hbm_down_by_sublayer() -> None:
    spec = parse_scenario(json.loads(H2M2_EXAMPLE.read_text()), builtin_catalog())
    h2m2 = next(s for s in spec.systems if s.options["mapping"] == "h2m2")
    policy = get_policy(h2m2.policy)
    assert "hbm-footprint" in policy.figures
    lengths = analysis.representative_lengths(spec)
    data = policy.figure_data("hbm-footprint", h2m2, spec, *lengths)
    rows, note = data.rows, data.note
    assert note is None and len(rows) >= 2
    assert data.title.endswith("as H2M2 Fig. 14)")
    for r in rows:
        assert r["hbm_total_gb"] == pytest.approx(sum(r["hbm_gb"].values()))
        assert r["hbm_total_gb"] <= r["hbm_capacity_gb"]  # the mapping fits the HBM
    # H2M2 §5.2.2: attention takes more of the HBM as sequences grow, fc less
    attn = [r["hbm_gb"]["attn"] for r in rows]
    fc = [r["hbm_gb"]["fc"] for r in rows]
    assert attn == sorted(attn) and fc == sorted(fc, reverse=True)
    baseline = next(s for s in spec.systems if s.options["mapping"] == "lpddr-only")
    data = policy.figure_data("hbm-footprint", baseline, spec, *lengths)
    assert data.rows == [] and data.note


def test_the_heterollm_placement_chart_holds_every_kernel_of_both_passes() -> None:
    doc = json.loads((EXAMPLES / "heterollm-modes-snapdragon.json").read_text())
    doc["workload"]["requests"] = 2
    doc["systems"] = [s for s in doc["systems"] if s["name"] == "Hetero-tensor"]
    result = simulate(parse_scenario(doc, builtin_catalog()))
    placement = result["systems"][0]["heterollm"]["placement"]
    fig = heterollm_placement_figure(placement, "t")
    kernels = {r["kernel"] for r in placement["prefill"]}
    gpu_prefill = next(t for t in fig.data if t.name == "GPU time" and t.xaxis == "x")
    assert set(gpu_prefill.y) == kernels
    npu = [t for t in fig.data if t.name == "NPU time"]
    assert any(v > 0 for t in npu for v in t.x)  # the tensor-level mode uses the NPU


def test_model_facts_count_llama2_7b_parameters() -> None:
    facts = analysis.model_facts(builtin_catalog().model("llama2-7b"))
    assert facts.parameters == 6_738_415_616  # meta-llama/Llama-2-7b-hf
    assert facts.kv_bytes_per_token_fp16 == 2 * 32 * 32 * 128 * 2


def test_a_new_familys_device_gets_the_roofs_of_its_runtime_profiles() -> None:
    from dataclasses import replace

    from tests.core.toy import device_family as toy

    with toy.registered():
        cat = toy.catalog()
        device = replace(cat.devices["toy-accel-1"], fp16_tflops=100.0)
        # a kind equal to the device's but not the same string object (a new family's kind
        # is a plain string, compared by value)
        runtime = replace(cat.runtimes["toy-fp16"], device_kind="".join(["toy-", "accel"]))
        assert len(analysis.device_roofs(device, [runtime])) == 1
