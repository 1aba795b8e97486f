"""The FlightLLM FPGA model (simulations.core.devices.fpga): GLITCHES Table I, §IV, Fig. 5/9."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.fpga import FpgaModel
from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import decode_graph, gemm_params
from simulations.core.spec import DeviceSpec, MemoryTier, ModelSpec, RuntimeProfile

#: The prefetch ratios GLITCHES Fig. 9 sweeps.
FIG9_RATIOS = (1, 2, 4, 8, 16)

CAT = builtin_catalog()
U280: DeviceSpec = CAT.device("u280")
FLIGHT: RuntimeProfile = CAT.runtime("flightllm-w4a8")
LLAMA2_7B: ModelSpec = CAT.model("llama2-7b")


def fpga(prefetch: int | None = None, **params: float) -> FpgaModel:
    rt = replace(FLIGHT, params={**FLIGHT.params, **params}) if params else FLIGHT
    return FpgaModel(U280, rt, prefetch)


def speedup(fm: FpgaModel, m: int, seq: int) -> float:
    one = fm.with_prefetch(1).decode_step(LLAMA2_7B, 1, seq).seconds
    return one / fm.with_prefetch(m).decode_step(LLAMA2_7B, 1, seq).seconds


def test_catalog_pair_builds_the_fpga_model_with_the_default_prefetch_ratio() -> None:
    fm = build_device_model(U280, FLIGHT)
    assert isinstance(fm, FpgaModel)
    assert fm.prefetch_ratio == 4
    assert CAT.default_runtime(U280) == FLIGHT


def test_it_matches_glitches_table1_on_u280() -> None:
    fm = fpga()
    assert fm.prefill(LLAMA2_7B, [1536]).seconds == pytest.approx(5.0012, rel=0.05)
    mean = sum(fm.decode_step(LLAMA2_7B, 1, 1536 + i).seconds for i in range(512)) / 512
    assert mean * 1e3 == pytest.approx(21.50, rel=0.05)


def test_decode_hbm_traffic_is_weights_metadata_and_kv() -> None:
    mean = sum(fpga().decode_step(LLAMA2_7B, 1, 1536 + i).bytes for i in range(512)) / 512
    assert mean / 1e9 == pytest.approx(3.96, rel=0.10)


@pytest.mark.parametrize(("seq", "paper"), [(128, 1.20), (1024, 1.16)])
def test_prefetch_ratio_four_speeds_decode_as_in_fig9(seq: int, paper: float) -> None:
    assert speedup(fpga(), 4, seq) == pytest.approx(paper, rel=0.05)


def test_short_sequences_gain_more_from_prefetching() -> None:
    assert speedup(fpga(), 4, 128) > speedup(fpga(), 4, 1024)


@pytest.mark.parametrize("seq", [128, 1024])
def test_ratio_four_is_the_best_of_fig9(seq: int) -> None:
    fm = fpga()
    times = {m: fm.with_prefetch(m).decode_step(LLAMA2_7B, 1, seq).seconds for m in FIG9_RATIOS}
    assert min(times, key=lambda m: times[m]) == 4


def test_too_large_prefetch_stops_pipelining_only_when_the_buffer_is_full() -> None:
    """The mechanism, not a knob: with a buffer twice as large, M = 8 overtakes M = 4."""
    big = fpga(buffer_kb_per_channel=144)
    assert speedup(big, 8, 128) > speedup(big, 4, 128)
    assert speedup(fpga(), 8, 128) < speedup(fpga(), 4, 128)


def test_without_instruction_overhead_prefetching_does_not_help() -> None:
    """Only the pipeline fill of the larger prefetch remains: no gain, a small loss."""
    free = fpga(ld_overhead_cycles=0)
    assert 0.95 < speedup(free, 4, 128) <= 1.0


def test_bandwidth_utilisation_rises_with_bytes_per_instruction_and_saturates() -> None:
    """GLITCHES Fig. 5: small LDs waste bandwidth on decode and issue; > 32 KB nearly full."""
    fm = fpga()
    u = [fm.ld_utilisation(b) for b in (256, 1024, 8192, 32768, 1 << 20)]
    assert u == sorted(u)
    assert u[0] < 0.25 * FLIGHT.bw_eff
    assert u[-1] == pytest.approx(FLIGHT.bw_eff, rel=0.01)
    assert u[3] > 0.9 * FLIGHT.bw_eff


def test_q_proj_and_up_proj_per_layer_speedups_are_reported() -> None:
    fm = fpga()
    g = decode_graph(LLAMA2_7B, 1, 128, fm.precision)
    one, four = fm.with_prefetch(1).op_seconds(g), fm.with_prefetch(4).op_seconds(g)
    for layer in ("q_proj", "up_proj"):
        assert one[layer] / four[layer] > 1.1


def test_with_prefetch_returns_cached_siblings() -> None:
    fm = build_device_model(U280, FLIGHT)
    assert isinstance(fm, FpgaModel)
    assert fm.with_prefetch(8) is fm.with_prefetch(8)
    assert fm.with_prefetch(8).with_prefetch(4) is fm
    assert FpgaModel(U280, FLIGHT, prefetch_ratio=2).prefetch_ratio == 2


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_invalid_prefetch_ratio_is_rejected_by_name(bad: object) -> None:
    with pytest.raises(SpecError) as exc:
        fpga().with_prefetch(bad)  # type: ignore[arg-type]
    assert exc.value.field == "prefetch_ratio"


def test_kv_bytes_per_token_are_the_quantised_cache() -> None:
    assert fpga().kv_bytes_per_token(LLAMA2_7B) == 2 * 32 * 32 * 128 * 1


def test_weights_include_quantisation_metadata() -> None:
    fm = fpga()
    meta = gemm_params(LLAMA2_7B) * 0.5 * 256 / 8192
    assert fm.weights_bytes(LLAMA2_7B) == pytest.approx(
        (32 * (4 * 4096**2 + 3 * 4096 * 11008) + 2 * 32000 * 4096) * 0.5 + 65 * 4096 * 2 + meta
    )


def test_it_rejects_model_larger_than_hbm() -> None:
    with pytest.raises(CapacityError) as exc:
        fpga().decode_step(CAT.model("llama2-70b"), 1, 10)
    assert exc.value.field == "u280.memory[0].capacity_gb"


def test_fpga_without_design_clock_is_rejected_by_name() -> None:
    with pytest.raises(SpecError) as exc:
        params = {k: v for k, v in U280.params.items() if k != "clock_mhz"}
        FpgaModel(replace(U280, params=params), FLIGHT)
    assert exc.value.field == "u280.params.clock_mhz"


def test_missing_design_parameter_is_rejected_by_name() -> None:
    params = {k: v for k, v in FLIGHT.params.items() if k != "design_peak_tops"}
    with pytest.raises(SpecError) as exc:
        FpgaModel(U280, replace(FLIGHT, params=params))
    assert exc.value.field == "flightllm-w4a8.params.design_peak_tops"


def test_power_is_the_design_power_in_both_phases() -> None:
    fm = fpga()
    assert fm.prefill(LLAMA2_7B, [64]).avg_power_w == pytest.approx(46.0)
    assert fm.decode_step(LLAMA2_7B, 1, 64).avg_power_w == pytest.approx(46.0)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FIG9_RATIOS), st.integers(1, 4), st.integers(0, 3000))
def test_decode_is_never_faster_than_weight_bytes_over_peak_bandwidth(
    m: int, batch: int, ctx: int
) -> None:
    cost = fpga(m).decode_step(LLAMA2_7B, batch, batch * ctx)
    assert cost.seconds >= gemm_params(LLAMA2_7B) * 0.5 / (U280.mem_bw_gbps * 1e9)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FIG9_RATIOS), st.integers(0, 3000), st.floats(1.0, 4.0))
def test_more_bandwidth_never_makes_decode_slower(m: int, ctx: int, factor: float) -> None:
    tier = U280.memory[0]
    fast = replace(U280, memory=(MemoryTier(tier.kind, tier.capacity_gb, tier.bw_gbps * factor),))
    slow_s = fpga(m).decode_step(LLAMA2_7B, 1, ctx).seconds
    assert FpgaModel(fast, FLIGHT, m).decode_step(LLAMA2_7B, 1, ctx).seconds <= slow_s * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FIG9_RATIOS), st.integers(1, 3000), st.integers(1, 500))
def test_latency_is_monotone_in_sequence_length(m: int, n: int, extra: int) -> None:
    fm = fpga(m)
    assert (
        fm.decode_step(LLAMA2_7B, 1, n + extra).seconds >= fm.decode_step(LLAMA2_7B, 1, n).seconds
    )
    assert fm.prefill(LLAMA2_7B, [n + extra]).seconds >= fm.prefill(LLAMA2_7B, [n]).seconds


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(sorted(CAT.models.values(), key=lambda m: m.slug)),
    st.sampled_from([1, 2, 3, 4, 8, 16]),
    st.integers(1, 64),
    st.integers(0, 40_000),
)
def test_decode_step_equals_the_per_operator_cost_of_its_graph_exactly(
    model: ModelSpec, prefetch: int, batch: int, kv: int
) -> None:
    # decode_step costs the operators around attention once per batch; it must give the
    # same bits as costing the step's whole graph operator by operator.
    fm = fpga(prefetch)
    g = decode_graph(model, batch, kv, fm.precision)
    try:
        fm._check_fits(model, kv + batch)
    except CapacityError as exc:
        with pytest.raises(CapacityError) as fast:
            fm.decode_step(model, batch, kv)
        assert str(fast.value) == str(exc)
        return
    seconds = sum(fm.op_seconds(g).values())
    assert fm.decode_step(model, batch, kv) == fm._phase_cost(g, seconds, decode=True)
