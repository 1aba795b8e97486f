"""The bandwidth-bound host-CPU model (simulations.core.devices.cpu), Neo §2.2."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.cpu import CpuModel
from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import Precision, decode_graph
from simulations.core.spec import DeviceSpec, MemoryTier, ModelSpec, RuntimeProfile

CAT = builtin_catalog()
RT: RuntimeProfile = CAT.runtime("ispc-paged-attention-cpu")
G5_4X: DeviceSpec = CAT.device("g5-4xlarge-cpu")
LLAMA8: ModelSpec = CAT.model("llama3.1-8b")
LLAMA70: ModelSpec = CAT.model("llama3.1-70b")


def cpu(slug: str = "g5-4xlarge-cpu", **changes: object) -> CpuModel:
    """A catalog CPU, optionally with some of its ``params`` replaced (None: left out)."""
    return CpuModel(with_params(CAT.device(slug), **changes), RT)


def with_params(device: DeviceSpec, **changes: object) -> DeviceSpec:
    params = {**device.params, **changes}
    return replace(device, params={k: v for k, v in params.items() if v is not None})


def with_bw(device: DeviceSpec, bw: float) -> DeviceSpec:
    t = device.memory[0]
    return replace(device, memory=(MemoryTier(t.kind, t.capacity_gb, bw),))


def test_cpu_is_the_default_stack_of_catalog_cpus() -> None:
    assert CAT.default_runtime(G5_4X).slug == "ispc-paged-attention-cpu"
    assert isinstance(build_device_model(G5_4X, RT), CpuModel)


def test_decode_attention_reads_the_kv_cache_at_the_achieved_bandwidth() -> None:
    m = cpu()
    batch, kv = 16, 16 * 1000
    kv_bytes = (kv + batch) * LLAMA8.kv_bytes_per_token(16)
    t = m.attention_decode(LLAMA8, batch, kv)
    assert t >= kv_bytes / (m.bandwidth_gbps * 1e9)
    assert t == pytest.approx(kv_bytes / (m.bandwidth_gbps * 1e9), rel=0.02)
    assert m.bandwidth_gbps == pytest.approx(G5_4X.mem_bw_gbps * RT.bw_eff)


def test_attention_time_follows_bandwidth_not_cores() -> None:
    """Neo §5.5: g5.2xlarge ≈ g5.4xlarge; twice the bandwidth halves the time."""
    args = (LLAMA8, 32, 32 * 2000)
    assert cpu("g5-2xlarge-cpu").attention_decode(*args) == pytest.approx(
        cpu("g5-4xlarge-cpu").attention_decode(*args)
    )
    assert cpu("g5-8xlarge-cpu").attention_decode(*args) == pytest.approx(
        2 * cpu("g5-16xlarge-cpu").attention_decode(*args)
    )


def test_cores_and_simd_width_set_the_compute_roof() -> None:
    fast_mem = with_bw(G5_4X, 1e6)
    narrow = CpuModel(with_params(fast_mem, simd_width_bits=128), RT)
    wide = CpuModel(fast_mem, RT)
    more = CpuModel(with_params(fast_mem, cores=16), RT)
    args = (LLAMA8, 64, 64 * 4000)
    assert narrow.attention_decode(*args) == pytest.approx(2 * wide.attention_decode(*args))
    assert more.attention_decode(*args) == pytest.approx(wide.attention_decode(*args) / 2)
    assert wide.peak_flops == pytest.approx(2 * 8 * 3.3e9 * 8)


def test_per_layer_attention_sums_to_the_model() -> None:
    m = cpu()
    per = m.attention_decode_layer(LLAMA8, 8, 8000)
    assert m.attention_decode(LLAMA8, 8, 8000) == pytest.approx(LLAMA8.n_layers * per)
    cost = m.attention_decode_cost(LLAMA8, 8, 8000)
    assert cost.seconds == pytest.approx(LLAMA8.n_layers * per)
    assert cost.joules == pytest.approx(cost.seconds * G5_4X.tdp_w)


def test_gemv_streams_the_weights_once() -> None:
    m = cpu()
    t = m.gemv(4096, 14336)
    assert t == pytest.approx(4096 * 14336 * 2 / (m.bandwidth_gbps * 1e9), rel=0.01)
    assert m.gemv(4096, 14336, weight_bits=4) < t


def test_kv_capacity_counts_tokens_that_fit() -> None:
    m = cpu()
    per = LLAMA8.kv_bytes_per_token(16)
    assert m.kv_capacity_tokens(LLAMA8) == int(64e9 // per)
    assert m.kv_capacity_tokens(LLAMA8, reserved_bytes=63.9e9) == int(0.1e9 // per)


def test_it_rejects_model_larger_than_memory() -> None:
    with pytest.raises(CapacityError) as exc:
        cpu("g5-2xlarge-cpu").decode_step(LLAMA70, 1, 0)
    assert exc.value.field == "g5-2xlarge-cpu.memory[0].capacity_gb"


def test_whole_model_decode_is_bounded_by_streaming_the_weights() -> None:
    m = cpu("g5-16xlarge-cpu")
    cost = m.decode_step(LLAMA8, 1, 512)
    streamed = decode_graph(LLAMA8, 1, 512, Precision.of(RT)).weight_bytes
    assert cost.seconds >= streamed / (m.bandwidth_gbps * 1e9)
    assert m.prefill(LLAMA8, [512]).seconds > cost.seconds


def test_missing_datasheet_field_is_named() -> None:
    with pytest.raises(SpecError) as exc:
        cpu(simd_width_bits=None)
    assert exc.value.field == "g5-4xlarge-cpu.params.simd_width_bits"


def test_unknown_runtime_param_is_named() -> None:
    with pytest.raises(SpecError) as exc:
        CpuModel(G5_4X, replace(RT, params={"bw_efff": 0.5}))
    assert exc.value.field == "ispc-paged-attention-cpu.params.bw_efff"


def test_bad_gemv_input_is_named() -> None:
    with pytest.raises(SpecError) as exc:
        cpu().gemv(0, 10)
    assert exc.value.field == "gemv.rows"
    with pytest.raises(SpecError) as exc:
        cpu().kv_capacity_tokens(LLAMA8, reserved_bytes=float("nan"))
    assert exc.value.field == "reserved_bytes"


def test_calibration_checks_hold() -> None:
    from simulations.core.policies.neo.calibration.cpu_attention import check

    for row in check(CAT):
        assert abs(row.rel_err) < 0.01, row.id


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 256), st.integers(0, 10**6), st.integers(1, 10**5))
def test_attention_time_is_monotone_in_cached_tokens(batch: int, kv: int, extra: int) -> None:
    m = cpu()
    assert m.attention_decode(LLAMA8, batch, kv + extra) >= m.attention_decode(LLAMA8, batch, kv)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 256), st.integers(0, 10**6), st.floats(min_value=1.0, max_value=20.0))
def test_more_bandwidth_never_makes_attention_slower(batch: int, kv: int, f: float) -> None:
    slow = cpu()
    fast = CpuModel(with_bw(G5_4X, G5_4X.mem_bw_gbps * f), RT)
    assert fast.attention_decode(LLAMA8, batch, kv) <= slow.attention_decode(LLAMA8, batch, kv)
