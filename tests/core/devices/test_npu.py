"""The weight-stationary NPU model (simulations.core.devices.npu), HeteroLLM §3.2."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.npu import NpuModel
from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import Precision, decode_graph
from simulations.core.spec import DeviceSpec, MemoryKind, MemoryTier, ModelSpec, RuntimeProfile

CAT = builtin_catalog()
NPU: DeviceSpec = CAT.device("hexagon-npu")
QNN: RuntimeProfile = CAT.runtime("w4a16-qnn-hexagon")
LLAMA8: ModelSpec = CAT.model("llama3.1-8b")
INTERNLM: ModelSpec = CAT.model("internlm-1.8b")


def npu(**params: float) -> NpuModel:
    """The catalog NPU, optionally with some runtime params replaced."""
    rt = replace(QNN, params={**QNN.params, **params}) if params else QNN
    return NpuModel(NPU, rt)


def test_catalog_pair_builds_the_npu_model() -> None:
    assert isinstance(build_device_model(NPU, QNN), NpuModel)


def test_weight_first_order_is_about_six_times_faster() -> None:
    """HeteroLLM Fig. 5: [14336,4096]×[4096,K] ≈ 6× faster than [K,4096]×[4096,14336]."""
    m = npu()
    ratio = m.matmul(1024, 4096, 14336) / m.matmul(14336, 4096, 1024)
    assert ratio == pytest.approx(6.0, rel=0.25)


def test_order_sensitivity_comes_from_the_weight_stall() -> None:
    no_stall = npu(stall_per_depth=0.0)
    ratio = no_stall.matmul(1024, 4096, 14336) / no_stall.matmul(14336, 4096, 1024)
    assert ratio == pytest.approx(1.0, rel=0.01)
    fast, slow = npu().matmul_cost(14336, 4096, 1024), npu().matmul_cost(1024, 4096, 14336)
    assert slow.tiles == fast.tiles * 14336 // 1024
    assert slow.flops == fast.flops
    # the reversed order streams 1024 rows per stationary block instead of 14336
    assert slow.efficiency < fast.efficiency / 4


def test_array_efficiency_is_streamed_rows_over_rows_plus_stalled_depth() -> None:
    m = npu()
    alpha = QNN.params["stall_per_depth"]
    c = m.matmul_cost(14336, 4096, 1024)
    blocks = 1024 // 32  # one stationary block per column tile, spanning the whole depth
    assert c.efficiency == pytest.approx(
        blocks * 14336 / (blocks * 14336 + (blocks - 1) * alpha * 4096)
    )
    assert c.compute_s * c.efficiency == pytest.approx(c.compute_s - c.stall_s)


def test_only_swapped_blocks_stall() -> None:
    """HeteroLLM §3.2: the overhead is loading the stationary operand "more frequently"; a
    stationary operand that fits one block is loaded once, with no stall."""
    m = npu()
    one_block = m.matmul_cost(4096, 14336, 32)
    assert one_block.stall_s == 0.0 and one_block.efficiency == 1.0
    two_blocks = m.matmul_cost(4096, 14336, 64)
    assert two_blocks.stall_s > 0.0
    # the one swap of a two-block product costs α·K row-times at the array's rate
    row_time = 2.0 * 14336 * 32 / m.ops_rate
    assert two_blocks.stall_s == pytest.approx(QNN.params["stall_per_depth"] * 14336 * row_time)


def test_decode_matmuls_stream_at_the_npus_own_bandwidth_before_the_launch() -> None:
    """Fig. 6 / §3.3: one processor alone reaches 40–45 GB/s in decode: a one-token product
    is one stationary block, so only its graph launch keeps it below the NPU's bandwidth."""
    m = npu()
    for k, n in ((4096, 4096), (4096, 14336), (14336, 4096), (4096, 1024)):
        c = m.linear_cost(1, k, n)
        assert c.stall_s == 0.0
        assert c.bytes / (c.seconds - c.launch_s) / 1e9 == pytest.approx(m.achievable_gbps)


def test_efficiency_depends_on_the_shape_ratio_not_the_model_width() -> None:
    """HeteroLLM §3.2: 'the ratio between row and column sizes' sets the efficiency."""
    m = npu()
    wide = m.linear_cost(256, 4096, 14336).efficiency
    narrow = m.linear_cost(256, 2048, 7168).efficiency
    assert wide == pytest.approx(narrow, rel=1e-9)


def test_decode_graphs_use_the_integer_path() -> None:
    """HeteroLLM §5.1 footnote 2: the NPU uses its TOPS (INT8) in decode."""
    m = npu(launch_us=0.0)
    assert m.is_decode_graph(1) and not m.is_decode_graph(32)
    one = m.linear_cost(1, 14336, 4096)
    ratio = NPU.peak_ops_per_s(8, 4) / NPU.peak_ops_per_s(16, 4)  # 73 TOPS / 36 TFLOPS
    assert one.compute_s == pytest.approx(m.linear_cost(32, 14336, 4096).compute_s / ratio)


def test_each_graph_execution_pays_the_launch_once() -> None:
    a, b = npu(launch_us=0.0), npu(launch_us=100.0)
    assert b.matmul(4096, 4096, 256) - a.matmul(4096, 4096, 256) == pytest.approx(1e-4)


def test_order_penalty_grows_as_the_streamed_operand_shrinks() -> None:
    m = npu()
    ratios = [m.matmul(k, 4096, 14336) / m.matmul(14336, 4096, k) for k in (256, 512, 1024)]
    assert ratios[0] > ratios[1] > ratios[2] > 1.0


def test_stage_performance_is_flat_within_a_tile_and_steps_at_its_edge() -> None:
    m = npu()
    inside = {m.matmul(14336, 4096, n) for n in range(993, 1025)}  # compute-bound
    assert len(inside) == 1
    assert m.matmul(14336, 4096, 1025) > m.matmul(14336, 4096, 1024)
    small = {m.matmul_cost(4096, 4096, n).compute_s for n in range(1, 33)}
    assert len(small) == 1  # below one tile the work costs a full tile
    assert m.matmul(14336, 4065, 1024) == m.matmul(14336, 4096, 1024)


def test_streamed_rows_are_padded_to_the_stacks_row_block() -> None:
    m = npu()
    assert m.matmul_cost(1, 4096, 1024).padded == (256, 4096, 1024)
    assert m.matmul_cost(1, 4096, 1024).compute_s == m.matmul_cost(256, 4096, 1024).compute_s
    assert m.matmul_cost(1, 4096, 1024).utilisation == pytest.approx(1 / 256)


def test_ffn_down_shape_is_slower_than_ffn_up_at_equal_flops() -> None:
    """HeteroLLM §3.2/§4.1.1: a wider reduction (larger stationary operand) is slower —
    FFN-down only 1.5–2.5× the GPU against ≈10 TFLOPS for FFN-up."""
    m = npu()
    up, down = m.linear_cost(1024, 4096, 14336), m.linear_cost(1024, 14336, 4096)
    assert up.flops == down.flops
    assert down.seconds > 3.0 * up.seconds


def test_permuting_the_linear_layer_helps_when_weights_dominate() -> None:
    m = npu()
    assert m.linear(256, 4096, 14336) < m.linear(256, 4096, 14336, permuted=False)


def test_padding_plan_uses_the_prepared_shapes() -> None:
    m = npu()
    assert m.static_shapes == (32, 64, 128, 256, 512, 1024)
    assert m.pad_plan(300) == (512,)
    assert m.pad_plan(1024) == (1024,)
    assert m.pad_plan(1500) == (1024, 512)
    assert m.static_shape_at_least(2000) is None


def test_cut_plan_takes_prepared_shapes_and_leaves_a_margin() -> None:
    m = npu()
    assert m.cut_plan(600) == ((512, 64), 24)
    assert m.cut_plan(525) == ((512,), 13)
    assert m.cut_plan(20) == ((), 20)


def test_prefill_latency_steps_with_padding() -> None:
    m = npu()
    assert m.prefill(LLAMA8, [300]).seconds == m.prefill(LLAMA8, [512]).seconds
    assert m.prefill(LLAMA8, [513]).seconds > m.prefill(LLAMA8, [512]).seconds


def test_graph_preparation_cost_grows_with_tensor_size() -> None:
    m = npu()
    costs = [m.graph_prepare_s(LLAMA8, s) for s in (32, 135, 525, 1000)]
    assert costs == sorted(costs) and costs[0] < costs[-1]
    assert m.graph_prepare_s(LLAMA8, 256) > m.graph_prepare_s(INTERNLM, 256)


def test_graph_preparation_reproduces_its_calibration_points() -> None:
    m = npu()
    assert m.graph_prepare_s(LLAMA8, 135) == pytest.approx(0.4084, rel=0.01)
    assert m.graph_prepare_s(LLAMA8, 1000) == pytest.approx(2.050, rel=0.01)


def test_calibration_script_rederives_the_catalog_parameters() -> None:
    from simulations.core.policies.heterollm.calibration.npu_w4a16 import calibrate

    params, rows = calibrate(CAT)
    stored = {**QNN.params, "compute_eff": QNN.compute_eff}
    for key, value in params.items():
        assert stored[key] == pytest.approx(value, rel=0.01), key
    soc = next(r for r in rows if r.id == "soc_gpu_npu_gbps")
    assert abs(soc.rel_err) < 0.05


def test_calibration_leave_one_out_predicts_each_observation_within_a_factor_two() -> None:
    """The array fit (two values, four observations) and the launch fit (one value, three
    decode speed-ups) each predict the observation left out."""
    from simulations.core.policies.heterollm.calibration.npu_w4a16 import calibrate

    _, rows = calibrate(CAT)
    loo = [r for r in rows if r.role == "loo"]
    assert len(loo) == 7
    for r in loo:
        assert 0.5 < r.model / r.paper < 2.0, r.id
    decode = [r for r in loo if r.id.startswith("loo_decode_gain")]
    for r in decode:
        assert abs(r.rel_err) < 0.15, r.id


def test_decode_is_never_faster_than_weights_over_the_npus_bandwidth() -> None:
    m = npu()
    cost = m.decode_step(LLAMA8, 1, 256)
    g = decode_graph(LLAMA8, 1, 256, Precision.of(QNN))
    assert cost.seconds >= g.weight_bytes / (m.achievable_gbps * 1e9)
    assert cost.joules == pytest.approx(cost.seconds * QNN.params["active_power_w"])


def test_decode_streams_weights_at_most_at_the_npus_own_bandwidth() -> None:
    """Fig. 6: one processor alone reaches 40–45 GB/s in decode, never above it."""
    m = npu()
    for k, n in ((4096, 4096), (4096, 14336), (14336, 4096)):
        c = m.linear_cost(1, k, n)
        assert c.bytes / c.seconds / 1e9 <= m.achievable_gbps * (1 + 1e-9)


def test_it_rejects_model_larger_than_memory() -> None:
    tiny = replace(NPU, memory=(MemoryTier(MemoryKind.LPDDR, 2, 68),))
    m = NpuModel(tiny, QNN)
    with pytest.raises(CapacityError) as exc:
        m.prefill(LLAMA8, [128])
    assert exc.value.field == "hexagon-npu.memory[0].capacity_gb"


def test_bad_matmul_shape_raises_spec_error_naming_the_dimension() -> None:
    with pytest.raises(SpecError) as exc:
        npu().matmul(0, 4096, 32)
    assert exc.value.field == "matmul.m"
    with pytest.raises(SpecError) as exc:
        npu().matmul(32, 4096, 32, a_bits=-4)
    assert exc.value.field == "matmul.a_bits"


def test_missing_or_unknown_runtime_params_are_named() -> None:
    bare = replace(QNN, params={"row_block": 256})
    with pytest.raises(SpecError) as exc:
        NpuModel(NPU, bare)
    assert exc.value.field == "w4a16-qnn-hexagon.params.stall_per_depth"
    typo = replace(QNN, params={**QNN.params, "stall_per_dept": 1.0})
    with pytest.raises(SpecError) as exc:
        NpuModel(NPU, typo)
    assert exc.value.field == "w4a16-qnn-hexagon.params.stall_per_dept"
    with pytest.raises(SpecError) as exc:
        NpuModel(NPU, replace(QNN, params={**QNN.params, "stall_per_depth": -1.0}))
    assert exc.value.field == "w4a16-qnn-hexagon.params.stall_per_depth"
    with pytest.raises(SpecError) as exc:
        NpuModel(NPU, replace(QNN, params={**QNN.params, "launch_us": float("nan")}))
    assert exc.value.field == "w4a16-qnn-hexagon.params.launch_us"


def test_device_without_array_shape_is_rejected_naming_the_field() -> None:
    with pytest.raises(SpecError) as exc:
        params = {k: v for k, v in NPU.params.items() if k != "array_rows"}
        NpuModel(replace(NPU, params=params), QNN)
    assert exc.value.field == "hexagon-npu.params.array_rows"


dims = st.integers(min_value=1, max_value=20000)


@settings(max_examples=60, deadline=None)
@given(dims, dims, dims, st.sampled_from(["m", "k", "n"]), st.integers(1, 5000))
def test_matmul_time_is_monotone_in_every_dimension(
    m: int, k: int, n: int, which: str, extra: int
) -> None:
    model = npu()
    bigger = {"m": (m + extra, k, n), "k": (m, k + extra, n), "n": (m, k, n + extra)}[which]
    assert model.matmul(*bigger) >= model.matmul(m, k, n)


@settings(max_examples=30, deadline=None)
@given(dims, dims, dims, st.floats(min_value=1.0, max_value=10.0))
def test_more_bandwidth_never_makes_a_matmul_slower(m: int, k: int, n: int, f: float) -> None:
    slow = npu()
    tier = NPU.memory[0]
    fast_dev = replace(NPU, memory=(MemoryTier(tier.kind, tier.capacity_gb, tier.bw_gbps * f),))
    assert NpuModel(fast_dev, QNN).matmul(m, k, n) <= slow.matmul(m, k, n)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 3000))
def test_prefill_latency_is_monotone_in_sequence_length(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    m = npu()
    assert m.prefill(INTERNLM, [lo]).seconds <= m.prefill(INTERNLM, [hi]).seconds


def test_prefill_graphs_read_fp16_weights_the_host_dequantised() -> None:
    """HeteroLLM §4/§6: the CPU dequantises W4A16 weights for the NPU's FP16 prefill graphs:
    the graph reads 2 bytes a weight and the host's pass reads 0.5 and writes 2 beside it."""
    m = npu()
    k = n = 4096
    c = m.linear_cost(256, k, n)
    acts = (256 * k + 256 * n) * 2
    assert c.bytes == pytest.approx(k * n * (2 + 0.5 + 2) + acts)
    # all of it crosses the shared memory while the host and the NPU both stream: two
    # processors alone at 42.5 of 68 GB/s get 68 · (1 − (1 − 0.625)²) together (§3.3, §5.3)
    two_streams = 68e9 * (1 - (1 - 42.5 / 68) ** 2)
    assert c.memory_s >= c.bytes / two_streams * (1 - 1e-12)
    # and at 32 tokens that traffic is what bounds the graph
    short = m.linear_cost(32, k, n)
    assert short.memory_s == pytest.approx(short.bytes / two_streams)


def test_decode_graphs_read_the_stored_int4_weights_without_a_host_pass() -> None:
    """§5.1 footnote 2: decode graphs run the integer path on the stored weights."""
    c = npu().linear_cost(1, 4096, 4096)
    assert c.bytes == pytest.approx(4096 * 4096 * 0.5 + (4096 + 4096) * 2)


def test_short_prefill_graphs_are_memory_bound_on_their_weights_long_ones_compute_bound() -> None:
    """§4.1.1: at short sequence lengths the NPU performs like the GPU (bandwidth-bound)."""
    m = npu()
    short, long = m.linear_cost(32, 4096, 14336), m.linear_cost(1024, 4096, 14336)
    assert short.memory_s > short.compute_s
    assert long.compute_s > long.memory_s


def test_a_stack_whose_graphs_take_the_stored_width_pays_no_conversion() -> None:
    m = npu(prefill_weight_bits=4.0)
    c = m.linear_cost(256, 4096, 4096)
    assert c.bytes == pytest.approx(4096 * 4096 * 0.5 + (256 * 4096 * 2) * 2)
    # at 32 tokens the graph is memory-bound, so reading INT4 beats reading FP16
    assert m.linear_cost(32, 4096, 4096).seconds < npu().linear_cost(32, 4096, 4096).seconds


@pytest.mark.parametrize("bits", [0.0, -16.0, 65.0, float("nan"), float("inf")])
def test_an_impossible_prefill_weight_width_is_rejected_naming_it(bits: float) -> None:
    with pytest.raises(SpecError) as exc:
        npu(prefill_weight_bits=bits)
    assert exc.value.field == "w4a16-qnn-hexagon.params.prefill_weight_bits"


def test_the_conversion_buffer_counts_against_the_shared_memory_in_prefill() -> None:
    """Two layers' FP16 Matmul weights are held while the host converts them (§4, §6)."""
    m = npu()
    per_layer = sum(
        k * n
        for k, n in (
            (4096, 4096),
            (4096, 1024),
            (4096, 1024),
            (4096, 4096),
            (4096, 14336),
            (4096, 14336),
            (14336, 4096),
        )
    )
    assert m.conversion_buffer_bytes(LLAMA8) == pytest.approx(2 * per_layer * 2)
    assert npu(prefill_weight_bits=4.0).conversion_buffer_bytes(LLAMA8) == 0.0
    # a memory that holds the INT4 weights but not the buffer beside them
    need = m.weights_bytes(LLAMA8) + 0.5 * m.conversion_buffer_bytes(LLAMA8)
    small = replace(NPU, memory=(replace(NPU.memory[0], capacity_gb=need / 1e9),))
    NpuModel(small, QNN).decode_step(LLAMA8, 1, 0)
    with pytest.raises(CapacityError) as exc:
        NpuModel(small, QNN).prefill(LLAMA8, [32])
    assert "workspace" in str(exc.value)
