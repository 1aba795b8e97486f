"""The kernel-class GPU model (simulations.core.devices.gpu_kernels) inside GpuModel."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.gpu import GpuModel
from simulations.core.devices.gpu_kernels import KERNEL_PARAMS, KernelClass, op_class
from simulations.core.errors import SpecError
from simulations.core.graph import OpKind, Phase, decode_graph, prefill_graph
from simulations.core.spec import DeviceSpec, MemoryTier, ModelSpec, RuntimeProfile
from tests.core.devices.gpu_doubles import KERNEL_PARAMS_DOUBLE

CAT = builtin_catalog()
A100: DeviceSpec = CAT.device("a100-80gb")
EAGER: RuntimeProfile = CAT.runtime("hf-eager-fp16")
LLAMA2_7B: ModelSpec = CAT.model("llama2-7b")

KPARAMS = KERNEL_PARAMS_DOUBLE
STACK = RuntimeProfile(
    slug="test-kernels",
    name="test kernel-class stack",
    device_kind="gpu",  # type: ignore[arg-type]
    weight_bits=16,
    act_bits=16,
    kv_bits=16,
    compute_eff=0.7,
    bw_eff=0.75,
    kernels_per_layer=10,
    params=KPARAMS,
)


def with_params(**changes: float) -> RuntimeProfile:
    return replace(STACK, params={**KPARAMS, **changes})


def gemm_s(gm: GpuModel, tokens: int) -> float:
    g = prefill_graph(LLAMA2_7B, [tokens], gm.precision, fused_attention=True)
    up = next(t for t in gm.op_times(g) if t.name == "up_proj")
    return up.seconds


def test_a_profile_without_kernel_params_keeps_the_plain_roofline() -> None:
    gm = GpuModel(A100, EAGER)
    assert gm.kernels is None
    assert gm.kernel_floor_s == 0.0
    g = prefill_graph(LLAMA2_7B, [1536])
    # The roofline of GLITCHES §III-A: every operator at one compute and one bandwidth rate.
    for op, t in zip(g.ops, gm.op_times(g), strict=True):
        assert t.compute_s == op.flops / (A100.fp16_tflops * 1e12 * EAGER.compute_eff)  # type: ignore[operator]
        assert t.memory_s == op.bytes / (A100.mem_bw_gbps * 1e9 * EAGER.bw_eff)


def test_setting_any_kernel_param_opts_in_and_every_required_one_is_named() -> None:
    rt = replace(STACK, params={"fused_attention": 1.0, "gemm_n_half": 64.0})
    with pytest.raises(SpecError) as exc:
        GpuModel(A100, rt)
    assert exc.value.field == "test-kernels.params.norm_bw_eff"
    assert GpuModel(A100, STACK).kernels is not None


def test_it_rejects_the_kernel_model_with_eager_attention() -> None:
    with pytest.raises(SpecError) as exc:
        GpuModel(A100, with_params(fused_attention=0.0))
    assert exc.value.field == "test-kernels.params.fused_attention"


@pytest.mark.parametrize(("name", "value"), [("copy_bw_eff", 1.2), ("kernel_floor_us", -1.0)])
def test_it_rejects_an_unphysical_kernel_param(name: str, value: float) -> None:
    with pytest.raises(SpecError) as exc:
        GpuModel(A100, with_params(**{name: value}))
    assert exc.value.field == f"test-kernels.params.{name}"


def test_optional_params_default_to_no_cost() -> None:
    assert {n for n, s in KERNEL_PARAMS.items() if s.default is not None} == {
        "layer_fixed_us",
        "host_step_us",
        "host_step_per_seq_us",
    }


def test_gemm_efficiency_saturates_with_the_tokens_in_the_batch() -> None:
    gm = GpuModel(A100, STACK)
    peak = A100.peak_ops_per_s(16, 16)
    flops_per_token = 2 * LLAMA2_7B.hidden_size * LLAMA2_7B.ffn_size
    # Memory-bound at few tokens: streaming the weights, flat in the token count.
    assert gemm_s(gm, 32) == pytest.approx(gemm_s(gm, 1), rel=0.02)
    # Compute-bound from a few hundred: achieved fraction compute_eff · n / (n + n_half).
    for n in (512, 2048, 8192):
        achieved = flops_per_token * n / gemm_s(gm, n) / peak
        assert achieved == pytest.approx(0.7 * n / (n + 64.0), rel=1e-12)
    assert flops_per_token * 8192 / gemm_s(gm, 8192) / peak < 0.7


def test_small_elementwise_kernels_take_the_floor_and_large_ones_stream() -> None:
    gm = GpuModel(A100, STACK)
    for tokens, want in ((1, 4e-6), (8192, None)):
        g = prefill_graph(LLAMA2_7B, [tokens], gm.precision, fused_attention=True)
        norm = next(op for op in g.ops if op.name == "attn_norm")
        b = gm.breakdown(g)
        per_layer = next(k for k in b.kernels if k.name == "input_layernorm").per_layer_s
        if want is not None:
            assert per_layer == pytest.approx(want)
        else:
            assert per_layer == pytest.approx(norm.bytes / (A100.mem_bw_gbps * 1e9 * 0.4))


def test_decode_attention_pays_its_fixed_latency_once_per_kernel() -> None:
    gm = GpuModel(A100, STACK)

    def attn(batch: int, ctx: int) -> float:
        g = decode_graph(LLAMA2_7B, batch, batch * ctx, gm.precision, fused_attention=True)
        return next(t.memory_s for t in gm.op_times(g) if t.name == "attention")

    kv_per_pos = 2 * LLAMA2_7B.n_kv_heads * LLAMA2_7B.head_dim * 2
    bw = A100.mem_bw_gbps * 1e9 * 0.8
    # 32 sequences of 1024 cost one fixed latency plus 32x the bytes, not 32 latencies.
    slope = attn(32, 1024) - attn(1, 1024)
    assert attn(1, 1024) == pytest.approx(10e-6 + 1025 * kv_per_pos / bw, rel=1e-3)
    assert slope == pytest.approx(31 * 1025 * kv_per_pos / bw, rel=1e-3)


def test_prefill_attention_efficiency_grows_with_the_prompt() -> None:
    gm = GpuModel(A100, STACK)
    peak = A100.peak_ops_per_s(16, 16)

    def achieved(n: int) -> float:
        g = prefill_graph(LLAMA2_7B, [n], gm.precision, fused_attention=True)
        op = next(op for op in g.ops if op.kind is OpKind.ATTENTION)
        return op.flops / gm.op_times(g)[g.ops.index(op)].compute_s / peak

    for n in (256, 1024, 8192):
        assert achieved(n) == pytest.approx(0.3 * (n + 1) / (n + 1 + 512.0), rel=1e-9)


def test_times_transfer_through_the_datasheet() -> None:
    tier = A100.memory[0]
    fast = replace(A100, memory=(MemoryTier(tier.kind, tier.capacity_gb, 2 * tier.bw_gbps),))
    slow, quick = GpuModel(A100, STACK), GpuModel(fast, STACK)
    g = decode_graph(LLAMA2_7B, 1, 1024, slow.precision, fused_attention=True)
    a, b = slow.breakdown(g), quick.breakdown(g)
    kernels_a = {k.name: k.seconds for k in a.kernels}
    kernels_b = {k.name: k.seconds for k in b.kernels}
    # A weight-streaming GEMM takes half the time at twice the bandwidth ...
    assert kernels_b["mlp_up_proj"] == pytest.approx(kernels_a["mlp_up_proj"] / 2, rel=1e-12)
    # ... a kernel at the floor does not get faster, and the host's step does not move.
    assert kernels_b["input_layernorm"] == kernels_a["input_layernorm"]
    assert b.extras["host"] == a.extras["host"]


@pytest.mark.parametrize("rt", [STACK, EAGER], ids=["kernels", "eager"])
@pytest.mark.parametrize(("phase", "n"), [("prefill", 1024), ("decode", 1), ("decode", 32)])
def test_the_breakdown_adds_up_to_what_the_pass_costs(
    rt: RuntimeProfile, phase: str, n: int
) -> None:
    gm = GpuModel(A100, rt)
    fused = gm.fused_attention
    if phase == "prefill":
        g = prefill_graph(LLAMA2_7B, [n], gm.precision, fused_attention=fused)
        seconds = gm.prefill(LLAMA2_7B, [n]).seconds
    else:
        g = decode_graph(LLAMA2_7B, n, n * 1024, gm.precision, fused_attention=fused)
        seconds = gm.decode_step(LLAMA2_7B, n, n * 1024).seconds
    b = gm.breakdown(g)
    assert b.phase == phase
    assert b.seconds == seconds
    assert b.kernels_s + b.extras_s == pytest.approx(seconds, rel=1e-12)
    doc = b.as_dict()
    assert doc["total_ms"] == pytest.approx(seconds * 1e3)


def test_the_kernel_breakdown_names_the_stacks_kernels_and_the_extras() -> None:
    gm = GpuModel(A100, STACK)
    g = decode_graph(LLAMA2_7B, 8, 8 * 512, gm.precision, fused_attention=True)
    b = gm.breakdown(g)
    names = [k.name for k in b.kernels]
    assert names[:3] == ["input_layernorm", "attn_pre_proj", "attn_rope"]
    assert "attn_decode" in names and "attn_prefill" not in names
    assert next(k for k in b.kernels if k.name == "attn_pre_proj").ops == (
        "q_proj",
        "k_proj",
        "v_proj",
    )
    assert set(b.extras) == {
        "embedding",
        "final_norm",
        "lm_head",
        "unmeasured:attn_residual",
        "sampler",
        "bookkeeping",
        "layer_fixed",
        "host",
    }
    assert b.extras["host"] == pytest.approx(300e-6 + 8 * 50e-6)
    assert b.extras["layer_fixed"] == pytest.approx(LLAMA2_7B.n_layers * 2e-6)
    assert b.extras["bookkeeping"] == pytest.approx(6 * 4e-6)


def test_operator_kinds_map_to_kernel_classes() -> None:
    g = prefill_graph(LLAMA2_7B, [8], fused_attention=True)
    classes = {op.name: op_class(op, decode=False) for op in g.ops}
    assert classes["q_proj"] is KernelClass.GEMM
    assert classes["attention"] is KernelClass.ATTN_PREFILL
    assert classes["ffn_act"] is KernelClass.ACT
    assert classes["attn_residual"] is KernelClass.COPY
    assert classes["embedding"] is KernelClass.COPY
    d = decode_graph(LLAMA2_7B, 1, 8, fused_attention=True)
    assert d.phase is Phase.DECODE
    attention = next(op for op in d.ops if op.name == "attention")
    assert op_class(attention, decode=True) is KernelClass.ATTN_DECODE
    eager = prefill_graph(LLAMA2_7B, [8])
    with pytest.raises(SpecError):
        op_class(next(op for op in eager.ops if op.name == "softmax"), decode=False)


def test_the_screens_rates_bound_every_kernel_from_below() -> None:
    gm = GpuModel(A100, STACK)
    for g in (
        prefill_graph(LLAMA2_7B, [4096], gm.precision, fused_attention=True),
        decode_graph(LLAMA2_7B, 64, 64 * 2048, gm.precision, fused_attention=True),
    ):
        for op, t in zip(g.ops, gm.op_times(g), strict=True):
            assert op.flops / gm.ops_rate <= t.seconds * (1 + 1e-12)
            assert op.bytes / gm.bw <= t.seconds * (1 + 1e-12)
