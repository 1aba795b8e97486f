"""The GPU cost model (simulations.core.devices.gpu): GLITCHES Table I and properties."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.gpu import GpuModel
from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import decode_graph, gemm_params
from simulations.core.spec import DeviceSpec, MemoryTier, ModelSpec, RuntimeProfile

CAT = builtin_catalog()
A100: DeviceSpec = CAT.device("a100-80gb")
V100S: DeviceSpec = CAT.device("v100s")
EAGER: RuntimeProfile = CAT.runtime("hf-eager-fp16")
VLLM: RuntimeProfile = CAT.runtime("vllm-fp16")
LLAMA2_7B: ModelSpec = CAT.model("llama2-7b")
LLAMA31_8B: ModelSpec = CAT.model("llama3.1-8b")
GPUS = [d for d in CAT.devices.values() if d.kind.value == "gpu" and d.fp16_tflops]


def mean_decode_s(gm: GpuModel) -> float:
    return sum(gm.decode_step(LLAMA2_7B, 1, 1536 + i).seconds for i in range(512)) / 512


def with_bw(dev: DeviceSpec, bw: float) -> DeviceSpec:
    tier = dev.memory[0]
    return replace(dev, memory=(MemoryTier(tier.kind, tier.capacity_gb, bw), *dev.memory[1:]))


def test_catalog_pair_builds_the_gpu_model() -> None:
    assert isinstance(build_device_model(A100, EAGER), GpuModel)
    assert CAT.default_runtime(A100) == EAGER


@pytest.mark.parametrize(
    ("dev", "prefill_ms", "decode_ms"), [(A100, 175.85, 24.26), (V100S, 398.80, 29.52)]
)
def test_one_eager_profile_matches_glitches_table1_on_both_gpus(
    dev: DeviceSpec, prefill_ms: float, decode_ms: float
) -> None:
    gm = GpuModel(dev, EAGER)
    assert gm.prefill(LLAMA2_7B, [1536]).seconds * 1e3 == pytest.approx(prefill_ms, rel=0.05)
    assert mean_decode_s(gm) * 1e3 == pytest.approx(decode_ms, rel=0.05)


def test_it_rejects_model_larger_than_memory() -> None:
    gm = GpuModel(A100, EAGER)
    with pytest.raises(CapacityError) as exc:
        gm.decode_step(CAT.model("llama2-70b"), 1, 10)
    assert exc.value.field == "a100-80gb.memory[0].capacity_gb"


def test_it_rejects_kv_cache_that_outgrows_memory() -> None:
    gm = GpuModel(CAT.device("t4"), EAGER)
    gm.decode_step(LLAMA2_7B, 1, 1000)
    with pytest.raises(CapacityError):
        gm.decode_step(LLAMA2_7B, 8, 8 * 4000)  # 16.8 GB of FP16 KV on a 16 GB card


def test_batched_decode_amortises_the_weights() -> None:
    gm = GpuModel(A100, VLLM)
    one = gm.decode_step(LLAMA31_8B, 1, 1000).seconds
    many = gm.decode_step(LLAMA31_8B, 32, 32 * 1000).seconds
    assert one < many < 32 * one / 4


def test_large_batches_turn_gemms_compute_bound_while_attention_stays_memory_bound() -> None:
    gm = GpuModel(A100, VLLM)
    g1 = decode_graph(LLAMA31_8B, 1, 1000, gm.precision, fused_attention=True)
    g2 = decode_graph(LLAMA31_8B, 1024, 1024 * 1000, gm.precision, fused_attention=True)
    bound = lambda g, name: next(t.bound for t in gm.op_times(g) if t.name == name)  # noqa: E731
    assert bound(g1, "down_proj") == "memory"
    assert bound(g2, "down_proj") == "compute"
    assert bound(g2, "attention") == "memory"


def test_cuda_graph_stack_has_no_host_overhead() -> None:
    eager, vllm = GpuModel(A100, EAGER), GpuModel(A100, VLLM)
    assert eager.timeline(decode_graph(LLAMA2_7B, 1, 100))["host_wait_s"] > 0
    assert (
        vllm.decode_step(LLAMA2_7B, 1, 100).seconds < eager.decode_step(LLAMA2_7B, 1, 100).seconds
    )


def test_phase_power_lies_between_wait_power_and_tdp() -> None:
    gm = GpuModel(A100, EAGER)
    for cost in (gm.prefill(LLAMA2_7B, [1536]), gm.decode_step(LLAMA2_7B, 1, 1536)):
        assert gm.idle_power_w <= cost.avg_power_w <= A100.tdp_w


def test_unknown_runtime_parameter_is_rejected_by_name() -> None:
    rt = replace(EAGER, params={**EAGER.params, "kernels_per_pas": 3})
    with pytest.raises(SpecError) as exc:
        GpuModel(A100, rt)
    assert exc.value.field == "hf-eager-fp16.params.kernels_per_pas"


def test_power_fraction_out_of_range_is_rejected() -> None:
    rt = replace(EAGER, params={**EAGER.params, "power_wait_frac": 1.5})
    with pytest.raises(SpecError) as exc:
        GpuModel(A100, rt)
    assert exc.value.field == "hf-eager-fp16.params.power_wait_frac"


def test_device_model_cache_tells_profiles_with_different_params_apart() -> None:
    other = replace(EAGER, params={**EAGER.params, "kernels_per_pass": 500})
    a, b = build_device_model(A100, EAGER), build_device_model(A100, other)
    assert a is not b
    assert b.decode_step(LLAMA2_7B, 1, 10).seconds > a.decode_step(LLAMA2_7B, 1, 10).seconds


def test_gpu_without_compute_peak_is_rejected_by_name() -> None:
    bare = replace(A100, fp16_tflops=None, bf16_tflops=None, int8_tops=None, fp32_tflops=None)
    with pytest.raises(SpecError) as exc:
        GpuModel(bare, EAGER)
    assert exc.value.field == "a100-80gb.fp16_tflops"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda gm: gm.prefill(LLAMA2_7B, []), "seq_lens"),
        (lambda gm: gm.prefill(LLAMA2_7B, [0]), "seq_lens[0]"),
        (lambda gm: gm.decode_step(LLAMA2_7B, 0, 1), "batch"),
        (lambda gm: gm.decode_step(LLAMA2_7B, 1, -5), "kv_tokens"),
        (lambda gm: gm.decode_step(LLAMA2_7B, 1.5, 3), "batch"),
    ],
)
def test_bad_input_raises_spec_error_naming_the_field(call: object, field: str) -> None:
    with pytest.raises(SpecError) as exc:
        call(GpuModel(A100, EAGER))  # type: ignore[operator]
    assert exc.value.field == field


# --- properties ------------------------------------------------------------------------------

_gpu = st.sampled_from(GPUS)
_rt = st.sampled_from([EAGER, VLLM])


@settings(max_examples=80, deadline=None)
@given(_gpu, _rt, st.integers(1, 16), st.integers(0, 4000))
def test_decode_is_never_faster_than_weight_bytes_over_peak_bandwidth(
    dev: DeviceSpec, rt: RuntimeProfile, batch: int, ctx: int
) -> None:
    model = CAT.model("llama3.2-3b")
    gm = GpuModel(dev, rt)
    try:
        cost = gm.decode_step(model, batch, batch * ctx)
    except CapacityError:
        return
    streamed = gemm_params(model) * rt.weight_bits / 8  # every GEMM weight, once per step
    assert cost.seconds >= streamed / (dev.mem_bw_gbps * 1e9)


@settings(max_examples=80, deadline=None)
@given(_gpu, _rt, st.integers(1, 32), st.integers(0, 4000), st.floats(1.0, 8.0))
def test_more_bandwidth_never_makes_decode_slower(
    dev: DeviceSpec, rt: RuntimeProfile, batch: int, ctx: int, factor: float
) -> None:
    model = CAT.model("llama3.2-3b")
    try:
        slow = GpuModel(dev, rt).decode_step(model, batch, batch * ctx).seconds
    except CapacityError:
        return
    fast = GpuModel(with_bw(dev, dev.mem_bw_gbps * factor), rt)
    assert fast.decode_step(model, batch, batch * ctx).seconds <= slow * (1 + 1e-12)


@settings(max_examples=80, deadline=None)
@given(_gpu, _rt, st.integers(1, 3000), st.integers(1, 1000))
def test_latency_is_monotone_in_sequence_length(
    dev: DeviceSpec, rt: RuntimeProfile, n: int, extra: int
) -> None:
    model = CAT.model("llama3.2-3b")
    gm = GpuModel(dev, rt)
    assert gm.prefill(model, [n + extra]).seconds >= gm.prefill(model, [n]).seconds
    assert gm.decode_step(model, 1, n + extra).seconds >= gm.decode_step(model, 1, n).seconds


_stacks = st.sampled_from(
    sorted(
        {
            (d.slug, r.slug)
            for d in GPUS
            for r in CAT.runtimes.values()
            if r.slug in {"hf-eager-fp16", "vllm-fp16"} or CAT.default_runtime(d).slug == r.slug
        }
    )
)
_any_model = st.sampled_from(sorted(CAT.models.values(), key=lambda m: m.slug))


@settings(max_examples=150, deadline=None)
@given(_stacks, _any_model, st.integers(1, 128), st.integers(0, 40_000))
def test_decode_step_equals_the_per_operator_roofline_of_its_graph_exactly(
    stack: tuple[str, str], model: ModelSpec, batch: int, kv: int
) -> None:
    # decode_step replays the operators around attention from a per-batch plan; it must
    # give the same bits as costing the step's whole graph operator by operator.
    gm = GpuModel(CAT.device(stack[0]), CAT.runtime(stack[1]))
    g = decode_graph(model, batch, kv, gm.precision, fused_attention=gm.fused_attention)
    try:
        gm._check_fits(model, g, kv + batch)
    except CapacityError as exc:
        with pytest.raises(CapacityError) as fast:
            gm.decode_step(model, batch, kv)
        assert str(fast.value) == str(exc)
        return
    assert gm.decode_step(model, batch, kv) == gm._cost(g)
