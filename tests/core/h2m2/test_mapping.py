"""H2M2 mapping decisions: capacities, optimality of the Oracle, greedy quality, FlexGen LP."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.greedy import greedy_mapping, peak_times
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import Mapping, MappingTables
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies.h2m2.mapping import (
    flexgen_lp,
    flexgen_lp_mapping,
    flexgen_static_mapping,
    major_mapping,
    oracle_mapping,
    run_system,
    sublayer_mapping,
)
from simulations.core.policies.h2m2.memory import AsymmetricMemory
from simulations.core.policies.h2m2.reproduction import CHINCHILLA, GPT3, LLAMA2
from simulations.core.spec import FfnKind, ModelSpec


def paper_model(slug: str) -> ModelSpec:
    """A model of the H2M2 evaluation, from the built-in catalog."""
    return builtin_catalog().model(slug)


# every point the reproduction evaluates (Figs. 7, 8, 12, 13, 15 and Table 3), plus GPT3 B16
STUDIES = {study.slug: (study.batch, study.seqs) for study in (GPT3, CHINCHILLA, LLAMA2)}
POINTS = [(slug, b, s) for slug, (b, seqs) in STUDIES.items() for s in seqs]
POINTS += [("gpt3-175b", 16, s) for s in (512, 1024, 2048)]
HW = H2M2Hardware.table1()


def shapes(slug: str) -> LayerShapes:
    return LayerShapes.of(paper_model(slug))


def _lay_out(s: LayerShapes, point: Point, m: Mapping, hw: H2M2Hardware) -> AsymmetricMemory:
    """Allocate every tensor of mapping ``m`` page by page (re-derived from the shapes, not
    from the cost model's footprint tables); raises CapacityError when a side overflows."""
    mem = AsymmetricMemory(hw.hbm.capacity_bytes, hw.lpddr.capacity_bytes)
    d, h, n_heads = s.hidden, s.head_dim, s.units
    act = point.batch * s.a_bytes * (2 * d + 3 * s.q_width + s.up_mult * s.ffn)
    for side in ("hbm", "lpddr"):
        mem.allocate(("act", side), side, act)
    kv_h = int(s.kv_heads_hbm(np.asarray(m.n_attn)))
    kv_l = int(s.kv_heads_lpddr(np.asarray(m.n_attn)))
    q_kv = {"hbm": int(s.kv_heads_hbm(np.asarray(m.n_qkv))), "lpddr": 0}
    q_kv["lpddr"] = int(s.kv_heads_lpddr(np.asarray(m.n_qkv)))
    heads = {"hbm": m.n_qkv, "lpddr": n_heads - m.n_qkv}
    kv = {"hbm": kv_h, "lpddr": kv_l}
    proj_h = round(m.n_fc * d / n_heads)
    up_h = round(m.n_fc * s.ffn / n_heads)
    cols = {
        "hbm": (proj_h, up_h),
        "lpddr": (d - proj_h, s.ffn - up_h),
    }
    for layer in range(s.n_layers):
        for side in ("hbm", "lpddr"):
            tensors = {
                "qkv": (heads[side] + 2 * q_kv[side]) * h * d * s.w_bytes,
                "k": point.kv_tokens * h * kv[side] * s.kv_bytes,
                "v": point.kv_tokens * h * kv[side] * s.kv_bytes,
                "proj": s.q_width * cols[side][0] * s.w_bytes,
                "up": d * cols[side][1] * s.w_bytes,
                "gate": d * cols[side][1] * s.w_bytes if s.gated else 0.0,
                "down": s.ffn * cols[side][0] * s.w_bytes,
            }
            for name, nbytes in tensors.items():
                if nbytes > 0:
                    mem.allocate((layer, side, name), side, nbytes)
    return mem


@pytest.mark.parametrize("variant", ["Original", "HBMcap-Less", "HBMcap-More"])
@pytest.mark.parametrize(("slug", "batch", "seq"), POINTS)
def test_greedy_never_exceeds_either_capacity(slug: str, batch: int, seq: int, variant: str):
    hw = HW.variant(variant)
    point = Point(batch, float(seq))
    try:
        m = greedy_mapping(shapes(slug), hw, point)
    except CapacityError:
        # nothing fits: then no mapping at all may fit (the Oracle agrees)
        tab = MappingTables(shapes(slug), hw, point)
        assert not tab.all_feasible().any()
        return
    tab = MappingTables(shapes(slug), hw, point)
    used_h, used_l = tab.footprint(m)
    assert used_h <= hw.hbm.capacity_bytes
    assert used_l <= hw.lpddr.capacity_bytes
    # an independent page-by-page layout of the same mapping fits as well
    _lay_out(shapes(slug), point, m, hw)


def test_the_page_layout_catches_a_mapping_that_overflows_hbm():
    s, point = shapes("gpt3-175b"), Point(32, 2048.0)
    with pytest.raises(CapacityError):
        _lay_out(s, point, Mapping(s.units, s.units, s.units), HW)


@pytest.mark.parametrize(("slug", "batch", "seq"), POINTS)
def test_oracle_is_never_beaten_by_any_other_mapping(slug: str, batch: int, seq: int):
    s = shapes(slug)
    point = Point(batch, float(seq))
    tab = MappingTables(s, HW, point)
    best = tab.layer_time(oracle_mapping(tab))
    others = [
        greedy_mapping(s, HW, point),
        sublayer_mapping(tab),
        flexgen_lp_mapping(s, HW, point, tab),
        flexgen_static_mapping(s, HW, [Point(batch, float(q)) for q in STUDIES[slug][1]]),
        *(major_mapping(tab, k) for k in ("qkv", "attn", "fc")),
    ]
    rng = np.random.default_rng(7)
    others += [Mapping(*map(int, rng.integers(0, s.units + 1, size=3))) for _ in range(300)]
    for m in others:
        if tab.feasible(m):
            assert best <= tab.layer_time(m) * (1 + 1e-12), m


def test_oracle_search_matches_a_brute_force_loop_on_a_small_model():
    small = dataclasses.replace(shapes("llama2-70b"), n_heads=8, n_kv_heads=2, n_layers=80)
    point = Point(128, 4096.0)
    hw = HW.variant("HBMcap-Less")
    tab = MappingTables(small, hw, point)
    times = [
        (tab.layer_time(Mapping(q, a, f)), (q, a, f))
        for q, a, f in itertools.product(range(9), repeat=3)
        if tab.feasible(Mapping(q, a, f))
    ]
    assert oracle_mapping(tab).as_tuple() == min(times)[1]


# Algorithm 1 is a fixed-order greedy (attention, then qkv-linear, then fc), each sublayer
# balanced on its own by min-max (§4.3.2). Llama2-70B at B128 S4096 (154 GB, HBM 96 GB) is
# the one point where that order costs more than 10 %: attention's own min-max takes 56 of
# 64 heads (7 of 8 KV heads) into HBM and qkv-linear its balanced half, so fc (compute-bound
# at B128) keeps only 17 of 64 columns slices in HBM and the LPDDR chip does ~3/4 of it;
# the Oracle gives up one KV head and qkv-linear's balance to hand fc that capacity. That
# is the algorithm as published, not a misreading (see reproduce note of Table 3), so the
# point keeps a bound just below its present ratio (0.850) so that it cannot get worse.
KNOWN_GAP = {("llama2-70b", 128, 4096): 0.84}


@pytest.mark.parametrize(("slug", "batch", "seq"), POINTS)
def test_greedy_is_within_ten_percent_of_the_oracle(slug: str, batch: int, seq: int):
    s = shapes(slug)
    point = Point(batch, float(seq))
    tab = MappingTables(s, HW, point)
    ratio = tab.layer_time(oracle_mapping(tab)) / tab.layer_time(greedy_mapping(s, HW, point))
    bound = KNOWN_GAP.get((slug, batch, seq), 0.90)
    assert ratio >= bound


def test_the_greedy_gap_at_llama2_s4096_is_algorithm_1_itself():
    """Replaying Algorithm 1's three steps on the full cost model gives the greedy's mapping:
    attention's own min-max, then qkv-linear's, then fc takes what HBM has left."""
    s, point = shapes("llama2-70b"), Point(128, 4096.0)
    tab = MappingTables(s, HW, point)
    t = {k: sum(np.maximum(th, tl) for th, tl, _ in tab.side_times(k)) for k in ("attn", "qkv")}
    units = range(s.units + 1)
    n_attn = min((n for n in units if tab.feasible(Mapping(0, n, 0))), key=lambda n: t["attn"][n])
    n_qkv = min(
        (n for n in units if tab.feasible(Mapping(n, n_attn, 0))), key=lambda n: t["qkv"][n]
    )
    n_fc = max(n for n in units if tab.feasible(Mapping(n_qkv, n_attn, n)))
    assert greedy_mapping(s, HW, point) == Mapping(n_qkv, n_attn, n_fc)
    assert n_fc < s.units // 2  # fc, last in the order, is the sublayer left short


@pytest.mark.parametrize(("slug", "batch", "seq"), POINTS)
def test_lp_mapping_satisfies_its_constraints(slug: str, batch: int, seq: int):
    s = shapes(slug)
    point = Point(batch, float(seq))
    x, k = flexgen_lp(s, HW, point)
    w, c, h, t = x
    for frac in (w, c, h):
        assert -1e-9 <= frac <= 1 + 1e-9
    assert w * k["W"] + c * k["KV"] + h * k["act"] <= HW.hbm.capacity_bytes * (1 + 1e-9)
    lp = (1 - w) * k["W"] + (1 - c) * k["KV"] + (1 - h) * k["act"]
    assert lp <= HW.lpddr.capacity_bytes * (1 + 1e-9)
    peak = HW.hbm.accel.mm_peak_ops
    assert t >= (w * k["w_ops"] + c * k["c_ops"]) / peak * (1 - 1e-9)
    assert t >= ((1 - w) * k["w_ops"] + (1 - c) * k["c_ops"]) / peak * (1 - 1e-9)
    # optimal: no feasible (w, c) on a grid (activations placed where they fit) does better
    hbm_cap, lp_cap = HW.hbm.capacity_bytes, HW.lpddr.capacity_bytes
    for w_ in np.linspace(0, 1, 41):
        for c_ in np.linspace(0, 1, 41):
            for h_ in (0.0, 1.0):
                on_h = w_ * k["W"] + c_ * k["KV"] + h_ * k["act"]
                on_l = k["W"] + k["KV"] + k["act"] - on_h
                if on_h <= hbm_cap and on_l <= lp_cap:
                    side_h = (w_ * k["w_ops"] + c_ * k["c_ops"]) / peak
                    side_l = ((1 - w_) * k["w_ops"] + (1 - c_) * k["c_ops"]) / peak
                    assert t <= max(side_h, side_l) * (1 + 1e-9)
    m = flexgen_lp_mapping(s, HW, point)
    assert abs(m.n_qkv - m.n_fc) <= 1  # one weight fraction (rounding to fit pages aside)
    assert MappingTables(s, HW, point).feasible(m)


def test_flexgen_plans_once_for_the_peak_and_keeps_the_plan():
    s = shapes("gpt3-175b")
    points = [Point(32, float(q)) for q in (256, 512, 1024, 2048)]
    plan = flexgen_static_mapping(s, HW, points)
    assert plan == flexgen_lp_mapping(s, HW, points[-1])
    for p in points:
        ev = run_system(s, HW, p, "flexgen-lp", decided=plan)
        assert ev.mapping == plan
    # re-solving at a small point would have chosen differently: the plan is static
    assert flexgen_lp_mapping(s, HW, points[0]) != plan


def test_a_decided_mapping_that_does_not_fit_is_refused():
    s = shapes("gpt3-175b")
    with pytest.raises(CapacityError):
        run_system(s, HW, Point(32, 2048.0), "flexgen-lp", decided=Mapping(96, 96, 96))


def test_the_baseline_is_lpddr_only_with_sublayer_granular_mapping():
    """§3.1: the baseline is the LPDDR-only memory (Fig. 4b) with sublayer-granular mapping
    (Fig. 5a): the same as Fig. 5a's naive mapping on a board whose two sides are both LPDDR,
    i.e. one chip at a time, slower than both chips splitting every kernel."""
    s, point = shapes("gpt3-175b"), Point(32, 1024.0)
    base = run_system(s, HW, point, "lpddr-only").seconds
    lpddr_twice = H2M2Hardware(HW.lpddr, HW.lpddr, HW.link_gbps)
    assert base == pytest.approx(run_system(s, lpddr_twice, point, "sublayer").seconds)
    pooled = H2M2Hardware(HW.lpddr_only_pooled(), HW.lpddr_only_pooled(), 1e6)
    both_chips = run_system(s, pooled, point, "sublayer").seconds
    assert both_chips < base


def test_gqa_shrinks_the_kv_footprint_by_the_group_size():
    gqa = shapes("llama2-70b")
    mha = dataclasses.replace(gqa, n_kv_heads=gqa.n_heads)
    assert gqa.group == 8
    assert mha.kv_bytes_per_token_layer() == pytest.approx(8 * gqa.kv_bytes_per_token_layer())
    point = Point(128, 2048.0)
    full = MappingTables(gqa, HW, point).raw_bytes["attn"][0][gqa.units]
    full_mha = MappingTables(mha, HW, point).raw_bytes["attn"][0][mha.units]
    assert full_mha == pytest.approx(8 * full)


@pytest.mark.parametrize("slug", ["gpt3-175b", "llama2-70b"])
def test_the_peak_execution_model_treats_both_sides_alike(slug: str):
    """On a board whose two sides are the same memory, n units on one side cost what n units
    on the other do: Algorithm 1's model has no side-specific terms. A slow memory keeps
    every kernel memory-bound, so every byte the model counts shows."""
    s = shapes(slug)
    slow = dataclasses.replace(HW.lpddr, bw_gbps=50.0)
    twin = H2M2Hardware(slow, slow, HW.link_gbps)
    for name, (th, tl) in peak_times(s, twin, Point(32, 1024.0)).items():
        assert th == pytest.approx(tl[::-1], rel=1e-12), name


def test_hierarchical_migrates_the_gqa_shrunk_kv_cache():
    gqa = shapes("llama2-70b")
    mha = dataclasses.replace(gqa, n_kv_heads=gqa.n_heads)
    point = Point(128, 4096.0)
    # an LPDDR large enough for the MHA footprint (Table 1's 512 GB is not)
    hw = dataclasses.replace(HW, lpddr=dataclasses.replace(HW.lpddr, capacity_gb=4096))
    moved = run_system(gqa, hw, point, "hierarchical").bytes_link
    moved_mha = run_system(mha, hw, point, "hierarchical").bytes_link
    # every byte of the footprint crosses once: MHA adds 7/8 of the KV cache and its K/V
    # weights, nothing else
    kv = gqa.n_layers * point.kv_tokens * gqa.kv_bytes_per_token_layer()
    extra = mha.total_bytes(point.kv_tokens) - gqa.total_bytes(point.kv_tokens)
    assert moved_mha - moved == pytest.approx(extra, rel=1e-3)
    assert extra > 7 * kv


def test_a_split_kv_group_keeps_its_kv_head_on_both_sides():
    s = shapes("llama2-70b")
    n = np.array([0, 1, 8, 9, 64])
    assert s.kv_heads_hbm(n).tolist() == [0, 1, 1, 2, 8]
    assert s.kv_heads_lpddr(n).tolist() == [8, 8, 7, 7, 0]


def test_head_aware_beats_sublayer_granularity_and_lpddr_only():
    s = shapes("gpt3-175b")
    point = Point(32, 1024.0)
    base = run_system(s, HW, point, "lpddr-only").seconds
    head = run_system(s, HW, point, "oracle").seconds
    sub = run_system(s, HW, point, "sublayer").seconds
    assert head < sub <= base * 1.05


def test_abstraction_makes_h2m2_slower_than_its_plain_mapping():
    ev = run_system(shapes("gpt3-175b"), HW, Point(32, 1024.0), "h2m2")
    assert ev.seconds > ev.extra["seconds_without_abstraction"]


def test_it_rejects_an_unknown_system():
    with pytest.raises(SpecError):
        run_system(shapes("gpt3-175b"), HW, Point(32, 512.0), "best-guess")


#: The published shapes of the three models of the H2M2 evaluation (§5.1): (layers, hidden,
#: heads, KV heads, head dim, FFN width, FFN kind). GPT-3: Brown et al. 2020, Table 2.1;
#: Chinchilla: Hoffmann et al. 2022, Table 4; Llama 2 70B: Touvron et al. 2023 and its
#: config.json (GQA with 8 KV heads, gated FFN).
PUBLISHED_SHAPES = {
    "gpt3-175b": (96, 12288, 96, 96, 128, 49152, FfnKind.PLAIN),
    "chinchilla-70b": (80, 8192, 64, 64, 128, 32768, FfnKind.PLAIN),
    "llama2-70b": (80, 8192, 64, 8, 128, 28672, FfnKind.GATED),
}


@pytest.mark.parametrize("slug", ["gpt3-175b", "chinchilla-70b", "llama2-70b"])
def test_the_paper_models_have_the_published_shapes(slug: str):
    m = paper_model(slug)
    fields = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "ffn_size")
    assert (*(getattr(m, f) for f in fields), m.ffn_kind) == PUBLISHED_SHAPES[slug]
    # INT8 decoder weights (§5.1): GPT3-175B ~174 GB, Chinchilla ~64 GB, Llama2 ~68 GB
    s = LayerShapes.of(m)
    expected = {"gpt3-175b": 174e9, "chinchilla-70b": 64.4e9, "llama2-70b": 68.5e9}[slug]
    assert s.n_layers * s.weight_bytes_per_layer == pytest.approx(expected, rel=0.01)


def test_it_rejects_a_footprint_larger_than_hbm_plus_lpddr_under_hierarchical():
    s = shapes("gpt3-175b")
    room = HW.hbm.capacity_bytes + HW.lpddr.capacity_bytes
    big, streamed = Point(128, 2048.0), Point(32, 2048.0)
    assert s.total_bytes(big.kv_tokens) > room
    assert HW.hbm.capacity_bytes < s.total_bytes(streamed.kv_tokens) <= room
    with pytest.raises(CapacityError) as err:
        run_system(s, HW, big, "hierarchical")
    assert err.value.field == "model"
    assert run_system(s, HW, streamed, "hierarchical").extra["hit_fraction"] == 0.0


def test_llama2_attention_reads_each_kv_head_once_per_group_and_runs_mv_passes_per_query_head():
    """Hypothesis 3 (K/V reads per MV pass). Table 2's MV unit is 32 lanes of
    128-element dot products: a pass scores one query head against 32 cached keys of
    ``head_dim`` = 128, so the passes count every query head (64 for Llama2-70B). The K/V rows
    a pass reads come from the core's scratchpad (Table 2: 16 MB × 2 per core), which holds
    one request's KV head (K and V over the longest evaluated sequence, 1 MiB) many times
    over, so the group's 8 query heads reuse it there and DRAM serves the KV cache once per
    step — §5.2.3: GQA lets "multiple heads ... share the KV cache" and scales "the size of
    KV cache in attention" by 1/group. Re-reading it per query head is not what the text
    describes."""
    s = shapes("llama2-70b")
    point = Point(128, 4096.0)
    attn = MappingTables(s, HW, point).kernels["attn"][0]
    N = s.units
    kv_cache_layer = point.kv_tokens * s.kv_bytes_per_token_layer()
    # all heads on one side: that side's memory serves the layer's KV cache exactly once
    assert attn.bytes_hbm[N] == pytest.approx(kv_cache_layer)
    assert attn.bytes_lpddr[0] == pytest.approx(kv_cache_layer)
    # one KV head of one request (K and V, longest sequence) fits a core's scratchpad
    assert 2 * 4096 * s.head_dim * s.kv_bytes <= HW.hbm.accel.spm_bytes_per_core / 16
    # MV passes scale with query heads, not KV heads: compute-bound (no bytes), 64 query
    # heads take 8x the MV time of 8
    side = HW.hbm
    lat = float(side.latency_s)
    t64 = float(side.attention_s(64, 0.0, point.kv_tokens, s.head_dim)) - lat
    t8 = float(side.attention_s(8, 0.0, point.kv_tokens, s.head_dim)) - lat
    assert t64 == pytest.approx(8 * t8, rel=1e-6)
