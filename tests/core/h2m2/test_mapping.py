"""H2M2 mapping decisions: capacities, optimality of the Oracle, greedy quality, FlexGen LP."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from simulations.core.errors import SpecError
from simulations.core.policies.h2m2.evaluate import Mapping, MappingTables
from simulations.core.policies.h2m2.hardware import H2M2Hardware
from simulations.core.policies.h2m2.kernels import LayerShapes
from simulations.core.policies.h2m2.mapping import (
    flexgen_lp,
    flexgen_lp_mapping,
    greedy_mapping,
    major_mapping,
    oracle_mapping,
    run_system,
    sublayer_mapping,
)
from simulations.core.policies.h2m2.models import paper_model
from simulations.core.policies.h2m2.workload import Point

STUDIES = {
    "gpt3-175b": (32, (256, 512, 1024, 2048)),
    "chinchilla-70b": (64, (256, 512, 1024, 2048)),
    "llama2-70b": (128, (512, 1024, 2048, 4096)),
}
POINTS = [(slug, b, s) for slug, (b, seqs) in STUDIES.items() for s in seqs]
HW = H2M2Hardware.table1()


def shapes(slug: str) -> LayerShapes:
    return LayerShapes.of(paper_model(slug))


@pytest.mark.parametrize("variant", ["Original", "HBMcap-Less", "HBMcap-More"])
@pytest.mark.parametrize(("slug", "batch", "seq"), POINTS)
def test_greedy_never_exceeds_either_capacity(slug: str, batch: int, seq: int, variant: str):
    hw = HW.variant(variant)
    point = Point(batch, float(seq))
    m = greedy_mapping(shapes(slug), hw, point)
    tab = MappingTables(shapes(slug), hw, point)
    used_h, used_l = tab.footprint(m)
    assert used_h <= hw.hbm.capacity_bytes
    assert used_l <= hw.lpddr.capacity_bytes


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


# Llama2-70B at S4096 is the one point where Algorithm 1's fixed order (attention, qkv, fc)
# strands fc on LPDDR while HBM is short; the Oracle gives that capacity to fc instead. The
# reproduction reports it (Table 3); here it is held to a looser bound so it cannot grow.
KNOWN_GAP = {("llama2-70b", 128, 4096): 0.80}


@pytest.mark.parametrize(("slug", "batch", "seq"), POINTS)
def test_greedy_is_within_ten_percent_of_the_oracle(slug: str, batch: int, seq: int):
    s = shapes(slug)
    point = Point(batch, float(seq))
    tab = MappingTables(s, HW, point)
    ratio = tab.layer_time(oracle_mapping(tab)) / tab.layer_time(greedy_mapping(s, HW, point))
    bound = KNOWN_GAP.get((slug, batch, seq), 0.90)
    assert ratio >= bound


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
    m = flexgen_lp_mapping(s, HW, point)
    assert abs(m.n_qkv - m.n_fc) <= 1  # one weight fraction (rounding to fit pages aside)
    assert MappingTables(s, HW, point).feasible(m)


def test_gqa_shrinks_the_kv_footprint_by_the_group_size():
    gqa = shapes("llama2-70b")
    mha = dataclasses.replace(gqa, n_kv_heads=gqa.n_heads)
    assert gqa.group == 8
    assert mha.kv_bytes_per_token_layer() == pytest.approx(8 * gqa.kv_bytes_per_token_layer())
    point = Point(128, 2048.0)
    full = MappingTables(gqa, HW, point).raw_bytes["attn"][0][gqa.units]
    full_mha = MappingTables(mha, HW, point).raw_bytes["attn"][0][mha.units]
    assert full_mha == pytest.approx(8 * full)


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
