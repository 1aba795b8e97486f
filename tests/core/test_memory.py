"""Memory tiers, links and the shared SoC memory (simulations.core.memory)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import CapacityError, SpecError
from simulations.core.memory import (
    LinkPath,
    SharedMemoryBus,
    UnifiedMemorySync,
    nvlink_c2c_link,
    pcie_bw_gbps,
    pcie_link,
    require_fits,
    tier_read_s,
    transfer_s,
)
from simulations.core.spec import (
    DeviceKind,
    LinkKind,
    LinkSpec,
    MemoryKind,
    MemoryTier,
    RuntimeProfile,
)

SOC_PEAK = 68.0  # HeteroLLM §3.3
GPU_ALONE = 43.3  # HeteroLLM §5.3
NPU_ALONE = 42.5  # HeteroLLM §3.3, middle of 40–45 GB/s


def test_transfer_time_is_latency_plus_bytes_over_bandwidth() -> None:
    link = LinkSpec(LinkKind.PCIE, bw_gbps=25.0, latency_us=10.0)
    assert transfer_s(link, 5e9) == pytest.approx(10e-6 + 5e9 / 25e9)
    assert transfer_s(link, 0) == 0.0


def test_pcie_bandwidth_follows_the_standard() -> None:
    assert pcie_bw_gbps(4, 16) == pytest.approx(16 * 16 * 128 / 130 / 8)
    assert pcie_bw_gbps(5, 16) == pytest.approx(2 * pcie_bw_gbps(4, 16))
    assert pcie_link(3, 8).bw_gbps == pytest.approx(pcie_bw_gbps(3, 16) / 2)
    assert nvlink_c2c_link().bw_gbps == 450.0


def test_it_rejects_unknown_pcie_generation_naming_the_field() -> None:
    with pytest.raises(SpecError) as exc:
        pcie_link(7)
    assert exc.value.field == "link.pcie_gen"


def test_two_hop_path_store_and_forward_adds_both_hops() -> None:
    gpu_host = LinkSpec(LinkKind.PCIE, 25.0, latency_us=5.0)
    host_fpga = LinkSpec(LinkKind.PCIE, 12.5, latency_us=8.0)
    path = LinkPath((gpu_host, host_fpga))
    n = 1e9
    assert path.transfer_s(n) == pytest.approx(5e-6 + n / 25e9 + 8e-6 + n / 12.5e9)
    assert path.bottleneck_gbps == 12.5


def test_pipelined_path_is_paced_by_the_slowest_hop() -> None:
    path = LinkPath((LinkSpec(LinkKind.PCIE, 25.0), LinkSpec(LinkKind.PCIE, 12.5)))
    n = 1e9
    pipelined = path.transfer_s(n, chunk_bytes=1e6)
    assert path.transfer_s(n) > pipelined > n / 12.5e9
    assert pipelined == pytest.approx(n / 12.5e9 + 1e6 / 25e9)


def test_empty_path_is_rejected() -> None:
    with pytest.raises(SpecError):
        LinkPath(())


def test_negative_or_nonfinite_bytes_raise_spec_error() -> None:
    link = LinkSpec(LinkKind.PCIE, 25.0)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(SpecError) as exc:
            transfer_s(link, bad)
        assert exc.value.field == "nbytes"


def test_it_rejects_model_larger_than_memory() -> None:
    with pytest.raises(CapacityError) as exc:
        require_fits("t4.memory", 20e9, 16e9, "LLaMA2-13B weights")
    assert exc.value.field == "t4.memory"
    require_fits("t4.memory", 15e9, 16e9, "fits")


def test_tier_read_time_scales_with_efficiency() -> None:
    tier = MemoryTier(MemoryKind.HBM, 80, 2000)
    assert tier_read_s(tier, 2e9) == pytest.approx(1e-3)
    assert tier_read_s(tier, 2e9, 0.5) == pytest.approx(2e-3)
    with pytest.raises(SpecError):
        tier_read_s(tier, 1e9, 1.5)


def test_one_processor_alone_reaches_only_its_own_rate() -> None:
    bus = SharedMemoryBus(SOC_PEAK)
    assert bus.combined_gbps([GPU_ALONE]) == pytest.approx(GPU_ALONE)
    assert bus.combined_gbps([GPU_ALONE]) < SOC_PEAK


def test_gpu_and_npu_together_land_near_heterollm_measurement() -> None:
    """HeteroLLM §5.3 measures 59.1 GB/s for GPU+NPU; the model is not fitted to it."""
    together = SharedMemoryBus(SOC_PEAK).combined_gbps([GPU_ALONE, NPU_ALONE])
    assert GPU_ALONE < together < SOC_PEAK
    assert together == pytest.approx(59.1, rel=0.03)


def test_catalog_phone_stacks_give_the_alone_rates_heterollm_cites() -> None:
    cat = builtin_catalog()
    bus = SharedMemoryBus.of(cat.device("snapdragon-8-gen-3"))
    gpu = bus.alone_gbps(cat.device("adreno-750"), cat.runtime("w4a16-opencl-adreno"))
    npu = bus.alone_gbps(cat.device("hexagon-npu"), cat.runtime("w4a16-qnn-hexagon"))
    assert bus.peak_gbps == SOC_PEAK
    assert gpu == pytest.approx(GPU_ALONE, rel=1e-3)
    assert 40.0 <= npu <= 45.0


def test_shares_sum_to_the_combined_bandwidth_and_keep_proportions() -> None:
    bus = SharedMemoryBus(SOC_PEAK)
    shares = bus.shares_gbps({"gpu": GPU_ALONE, "npu": NPU_ALONE})
    assert sum(shares.values()) == pytest.approx(bus.combined_gbps([GPU_ALONE, NPU_ALONE]))
    assert shares["gpu"] / shares["npu"] == pytest.approx(GPU_ALONE / NPU_ALONE)
    assert shares["gpu"] < GPU_ALONE


def test_alone_rate_above_peak_is_rejected_naming_the_processor() -> None:
    with pytest.raises(SpecError) as exc:
        SharedMemoryBus(SOC_PEAK).shares_gbps({"gpu": 70.0})
    assert exc.value.field == "soc-memory.alone_gbps.gpu"


def test_balanced_split_finishes_both_streams_together() -> None:
    bus = SharedMemoryBus(SOC_PEAK)
    frac = bus.balanced_fraction(GPU_ALONE, NPU_ALONE)
    total = 4e9
    res = bus.stream({"gpu": (frac * total, GPU_ALONE), "npu": ((1 - frac) * total, NPU_ALONE)})
    assert res.finish_s["gpu"] == pytest.approx(res.finish_s["npu"], rel=1e-9)
    assert res.achieved_gbps == pytest.approx(bus.combined_gbps([GPU_ALONE, NPU_ALONE]))


def test_unbalanced_streams_finish_alone_at_the_leftover_rate() -> None:
    bus = SharedMemoryBus(SOC_PEAK)
    res = bus.stream({"gpu": (3e9, GPU_ALONE), "npu": (1e9, NPU_ALONE)})
    shares = bus.shares_gbps({"gpu": GPU_ALONE, "npu": NPU_ALONE})
    t_npu = 1e9 / (shares["npu"] * 1e9)
    left = 3e9 - shares["gpu"] * 1e9 * t_npu
    assert res.finish_s["npu"] == pytest.approx(t_npu)
    assert res.seconds == pytest.approx(t_npu + left / (GPU_ALONE * 1e9))


def test_unified_memory_sync_costs_from_runtime_params() -> None:
    rt = RuntimeProfile(
        "rt",
        "rt",
        DeviceKind.GPU,
        4,
        16,
        16,
        0.5,
        0.5,
        params={"sync_copy_latency_us": 400, "sync_empty_queue_submit_us": 75},
    )
    sync = UnifiedMemorySync.from_runtime(rt)
    assert sync.conventional_s() == pytest.approx(475e-6)
    assert sync.fast_s(gpu_dominant=True) == 0.0
    assert sync.fast_s(gpu_dominant=False) == pytest.approx(75e-6)
    bare = RuntimeProfile("bare", "bare", DeviceKind.GPU, 4, 16, 16, 0.5, 0.5)
    with pytest.raises(SpecError) as exc:
        UnifiedMemorySync.from_runtime(bare)
    assert exc.value.field == "bare.params.sync_copy_latency_us"


rates = st.floats(min_value=0.1, max_value=SOC_PEAK, allow_nan=False)


@given(st.lists(rates, min_size=1, max_size=4))
def test_shared_bandwidth_never_exceeds_peak_nor_falls_below_the_best_processor(
    alone: list[float],
) -> None:
    total = SharedMemoryBus(SOC_PEAK).combined_gbps(alone)
    assert max(alone) - 1e-9 <= total <= SOC_PEAK + 1e-9


@given(rates, rates, rates)
def test_more_bandwidth_for_one_processor_never_lowers_the_total(
    a: float, b: float, extra: float
) -> None:
    bus = SharedMemoryBus(SOC_PEAK)
    hi = min(SOC_PEAK, a + extra)
    assert bus.combined_gbps([hi, b]) >= bus.combined_gbps([a, b]) - 1e-9


@given(
    st.floats(min_value=0, max_value=1e12, allow_nan=False),
    st.floats(min_value=1, max_value=1e4),
    st.floats(min_value=1, max_value=1e4),
)
def test_more_link_bandwidth_never_slows_a_transfer(n: float, bw: float, extra: float) -> None:
    slow = LinkPath((LinkSpec(LinkKind.PCIE, bw, latency_us=1.0),))
    fast = LinkPath((LinkSpec(LinkKind.PCIE, bw + extra, latency_us=1.0),))
    assert fast.transfer_s(n) <= slow.transfer_s(n)


@given(st.floats(min_value=0, max_value=1e12), st.floats(min_value=0, max_value=1e12))
def test_transfer_time_is_monotone_in_bytes(a: float, b: float) -> None:
    link = LinkSpec(LinkKind.PCIE, 25.0, latency_us=3.0)
    lo, hi = sorted((a, b))
    assert transfer_s(link, lo) <= transfer_s(link, hi)
