"""H2M2 memory abstraction (§4.2), dynamic study (§5.3), accelerator model and policy."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.h2m2.accel import AcceleratorConfig, Side
from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import PAGE_BYTES, Mapping
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies import get_policy
from simulations.core.policies.h2m2.dynamic import dynamic_study
from simulations.core.policies.h2m2.memory import (
    AsymmetricMemory,
    eq2_fragmentation,
    lru_hit_fraction,
    migration_bytes,
    simulate_lru,
)
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    DeviceKind,
    DevicePlacement,
    DeviceSpec,
    LengthDist,
    LengthDistKind,
    LinkKind,
    LinkSpec,
    MemoryKind,
    MemoryTier,
    ModelSpec,
    RuntimeProfile,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)


def paper_model(slug: str) -> ModelSpec:
    """A model of the H2M2 evaluation, from the built-in catalog."""
    return builtin_catalog().model(slug)


MB2 = PAGE_BYTES


# --- memory abstraction -------------------------------------------------------------------


def test_pages_are_allocated_only_when_the_last_one_is_full():
    mem = AsymmetricMemory(10 * MB2, 10 * MB2)
    assert mem.allocate("k0", "hbm", 1.5 * MB2) == 2
    assert mem.grow("k0", 2.0 * MB2) == 0
    assert mem.grow("k0", 2.0 * MB2 + 1) == 1
    assert mem.used_pages("hbm") + mem.free_pages("hbm") == 10
    assert mem.internal_fragmentation() == pytest.approx(3 * MB2 - (2 * MB2 + 1))


def test_migration_keeps_virtual_pages_and_frees_the_source():
    mem = AsymmetricMemory(4 * MB2, 8 * MB2)
    mem.allocate("w", "hbm", 3 * MB2)
    vpages = sorted(mem.page_table["hbm"])
    assert mem.migrate("w", "lpddr") == 3 * MB2
    assert sorted(mem.page_table["lpddr"]) == vpages
    assert mem.used_pages("hbm") == 0 and mem.used_pages("lpddr") == 3
    frames = list(mem.page_table["lpddr"].values())
    assert len(set(frames)) == len(frames)


def test_it_refuses_to_allocate_beyond_a_side():
    mem = AsymmetricMemory(2 * MB2, 2 * MB2)
    mem.allocate("a", "hbm", 2 * MB2)
    with pytest.raises(CapacityError):
        mem.allocate("b", "hbm", 1)
    mem.free("a")
    assert mem.free_pages("hbm") == 2


def test_it_rejects_shrinking_a_region():
    mem = AsymmetricMemory(2 * MB2, 2 * MB2)
    mem.allocate("a", "lpddr", MB2)
    with pytest.raises(SpecError):
        mem.grow("a", 1)


def test_eq2_counts_the_remainder_of_every_tensor():
    s = LayerShapes.of(paper_model("gpt3-175b"))
    point = Point(32, 1024.0)
    m = Mapping(48, 82, 5)
    frag = eq2_fragmentation(s, point, m)
    d, h = s.hidden, s.head_dim
    qkv_h = 48 * 3 * h * d
    k_h = point.kv_tokens * h * 48 * 0 + point.kv_tokens * h * 82
    expected_qkv_and_k = (qkv_h % MB2) * s.n_layers + (k_h % MB2) * 2 * s.n_layers
    assert frag["eq2_bytes"] >= expected_qkv_and_k
    assert 0 < frag["eq2_bytes"] < 1e9  # hundreds of MB, as §4.2.1 (156 MB)


def test_migration_bytes_are_the_moved_heads_data():
    s = LayerShapes.of(paper_model("gpt3-175b"))
    from simulations.core.devices.h2m2.timing import MappingTables

    tab = MappingTables(s, H2M2Hardware.table1(), Point(32, 1024.0))
    one_head_kv = s.n_layers * 2 * 32 * 1024 * s.head_dim
    moved = migration_bytes(tab.raw_bytes, Mapping(10, 40, 5), Mapping(10, 41, 5))
    assert moved == pytest.approx(one_head_kv)
    assert migration_bytes(tab.raw_bytes, Mapping(1, 2, 3), Mapping(1, 2, 3)) == 0


def test_migration_copies_a_split_kv_group_to_the_side_that_gains_it():
    """GQA: query heads 52-55 leaving HBM split KV head 6, which HBM keeps (heads 48-51 still
    read it) and LPDDR must receive whole: the HBM side's footprint does not change, yet one
    KV head's cache crosses the interconnect."""
    s = LayerShapes.of(paper_model("llama2-70b"))
    from simulations.core.devices.h2m2.timing import MappingTables

    point = Point(128, 4096.0)
    tab = MappingTables(s, H2M2Hardware.table1(), point)
    one_kv_head = s.n_layers * 2 * point.kv_tokens * s.head_dim * s.kv_bytes
    moved = migration_bytes(tab.raw_bytes, Mapping(32, 56, 16), Mapping(32, 52, 16))
    assert moved == pytest.approx(one_kv_head)
    # and back: HBM already holds KV head 6, LPDDR just frees its copy
    assert migration_bytes(tab.raw_bytes, Mapping(32, 52, 16), Mapping(32, 56, 16)) == 0


@pytest.mark.parametrize(("footprint", "capacity"), [(50, 64), (64, 64), (65, 64), (200, 64)])
def test_lru_hit_fraction_matches_a_simulated_cyclic_scan(footprint: int, capacity: int):
    cycles = 30
    trace = list(itertools.chain.from_iterable(range(footprint) for _ in range(cycles)))
    simulated = simulate_lru(trace, capacity)
    # the first scan misses in any cache; the steady state is what lru_hit_fraction gives
    steady = lru_hit_fraction(footprint, capacity) * (cycles - 1) / cycles
    assert simulated == pytest.approx(steady, abs=1e-9)


# --- dynamic study ------------------------------------------------------------------------


def test_the_dynamic_study_is_deterministic_for_a_seed():
    s = LayerShapes.of(paper_model("gpt3-175b"))
    hw = H2M2Hardware.table1()
    a = dynamic_study(s, hw, np.random.default_rng(3), iterations=6)
    b = dynamic_study(s, hw, np.random.default_rng(3), iterations=6)
    c = dynamic_study(s, hw, np.random.default_rng(4), iterations=6)
    assert a.h2m2 == b.h2m2 and a.kv_cache_gb == b.kv_cache_gb
    assert a.kv_cache_gb != c.kv_cache_gb
    assert all(o >= h * (1 - 1e-9) for o, h in zip(a.oracle, a.h2m2, strict=True))


# --- accelerator ----------------------------------------------------------------------------


def test_small_batch_gemm_is_bound_by_shifting_weights_into_the_array():
    fast = Side(MemoryKind.HBM, 96, 3000.0)
    faster = Side(MemoryKind.HBM, 96, 30000.0)
    t32 = float(fast.gemm_s(32, 12288, 12288))
    assert float(faster.gemm_s(32, 12288, 12288)) == pytest.approx(t32, rel=1e-6)
    # 128 rows fill the array: the same tiles, the same time, four times the work
    assert float(fast.gemm_s(128, 12288, 12288)) == pytest.approx(t32, rel=0.05)
    weights_per_s = 12288 * 12288 / t32
    assert weights_per_s == pytest.approx(AcceleratorConfig().mm_weight_bytes_per_s, rel=0.01)


def test_a_gemm_streams_its_weights_at_their_width():
    lp = Side(MemoryKind.LPDDR, 512, 544.0)
    # batch 1 on the MV unit is bound by LPDDR: 16-bit weights take twice as long
    int8 = float(lp.gemm_s(1, 12288, 12288))
    fp16 = float(lp.gemm_s(1, 12288, 12288, weight_bytes=2.0))
    assert int8 == pytest.approx(12288 * 12288 / 544e9, rel=0.01)
    assert fp16 == pytest.approx(2 * int8, rel=0.01)


def test_16_bit_weights_slow_the_memory_bound_baseline_by_their_bytes():
    s8 = LayerShapes.of(paper_model("chinchilla-70b"))
    s16 = dataclasses.replace(s8, w_bytes=2.0)
    hw = H2M2Hardware.table1()
    from simulations.core.policies.h2m2.mapping import run_system

    point = Point(1, 128.0)
    t8 = run_system(s8, hw, point, "lpddr-only").seconds
    t16 = run_system(s16, hw, point, "lpddr-only").seconds
    weights = s8.n_layers * s8.weight_bytes_per_layer
    assert t16 - t8 == pytest.approx(weights / 544e9, rel=0.05)


def test_a_full_array_runs_gemms_at_the_table2_peak():
    hbm = Side(MemoryKind.HBM, 96, 3000.0)
    # 128 rows fill every 128x128 array: 4 cores x 16384 MACs x 2 ops x 1 GHz = 131 TOPS
    t = float(hbm.gemm_s(128, 8192, 28672))
    ops = 2 * 128 * 8192 * 28672
    assert ops / t == pytest.approx(AcceleratorConfig().mm_peak_ops, rel=0.01)
    assert AcceleratorConfig().mm_peak_ops == pytest.approx(131.072e12)


def test_gqa_attention_reads_each_kv_head_once_for_its_query_group():
    """Llama2: 64 query heads over 8 KV heads. The MV units reuse every K/V element for the
    group's 8 heads, so LPDDR streams only the 8 heads' cache, and on HBM the MV units, not
    the memory, set the pace (their dot products do not shrink with the group)."""
    tokens, head_dim, heads, kv_heads = 128 * 4096, 128, 64, 8
    kv = 2.0 * tokens * head_dim * kv_heads
    lp = Side(MemoryKind.LPDDR, 512, 544.0)
    assert float(lp.attention_s(heads, kv, tokens, head_dim)) == pytest.approx(kv / 544e9, rel=0.01)
    hbm = Side(MemoryKind.HBM, 96, 3000.0)
    dots_per_s = 4 * 32 * 1e9  # 32 lanes x 4 cores, one 128-wide dot product per cycle
    assert float(hbm.attention_s(heads, kv, tokens, head_dim)) == pytest.approx(
        2 * heads * tokens / dots_per_s, rel=0.01
    )


def test_attention_is_bandwidth_bound_on_lpddr():
    lp = Side(MemoryKind.LPDDR, 512, 544.0)
    nbytes = 2 * 32 * 1024 * 128 * 96
    t = float(lp.attention_s(96, nbytes, 32 * 1024, 128))
    assert t == pytest.approx(nbytes / 544e9, rel=0.01)


# --- policy ---------------------------------------------------------------------------------


def _board() -> DeviceSpec:
    return DeviceSpec(
        slug="h2m2-board",
        name="H2M2 board",
        kind=DeviceKind.MEMORY_ACCEL,
        vendor="paper",
        memory=(MemoryTier(MemoryKind.HBM, 96, 3000), MemoryTier(MemoryKind.LPDDR, 512, 544)),
        tdp_w=700,
        idle_w=100,
        peer_link=LinkSpec(LinkKind.C2C, 960),
    )


def _runtime() -> RuntimeProfile:
    return RuntimeProfile("h2m2-int8", "int8", DeviceKind.MEMORY_ACCEL, 8, 8, 8, 1.0, 1.0)


def _run(mapping: str, **workload: int) -> dict:
    policy = get_policy("h2m2")()
    system = SystemSpec(
        mapping,
        "h2m2",
        (DevicePlacement(_board(), 1, _runtime()),),
        {"mapping": mapping, "max_batch": 32},
    )
    wl = WorkloadSpec(
        requests=workload.get("requests", 32),
        input_tokens=LengthDist(LengthDistKind.FIXED, value=workload.get("inp", 512)),
        output_tokens=LengthDist(LengthDistKind.UNIFORM, low=32, high=64),
        arrival=ArrivalSpec(ArrivalKind.CLOSED),
    )
    return policy.run(
        system, paper_model("gpt3-175b"), wl, SloSpec(), np.random.default_rng(0), None
    )


def test_the_policy_returns_a_result_entry_and_orders_the_systems():
    res = {m: _run(m) for m in ("h2m2", "oracle", "lpddr-only")}
    for r in res.values():
        for key in ("throughput_tok_s", "ttft_ms", "tpot_ms", "e2e_s", "energy_j_per_token"):
            assert key in r
        assert r["tpot_ms"]["p50"] > 0
    assert res["oracle"]["tpot_ms"]["mean"] <= res["h2m2"]["tpot_ms"]["mean"]
    assert res["h2m2"]["tpot_ms"]["mean"] < res["lpddr-only"]["tpot_ms"]["mean"]
    assert "generation phase" in res["h2m2"]["h2m2"]["notes"]


def test_the_policy_rejects_an_unknown_mapping():
    with pytest.raises(SpecError):
        get_policy("h2m2").resolve_options({"mapping": "random"})


def test_hardware_needs_both_tiers():
    hbm_only = DeviceSpec(
        "x", "x", DeviceKind.MEMORY_ACCEL, "v", (MemoryTier(MemoryKind.HBM, 96, 3000),), 1, 0
    )
    with pytest.raises(SpecError):
        H2M2Hardware.from_devices([hbm_only])
