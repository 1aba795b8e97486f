"""Neo's stage costs, profile table and tensor parallelism (§3.2, §4)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulations.core.devices.cpu import CpuModel
from simulations.core.devices.gpu import GpuModel
from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import prefill_graph
from simulations.core.policies.neo import GpuOnlyPolicy, NeoPolicy
from simulations.core.policies.neo.costs import ProfileTable, StageCosts
from simulations.core.policies.neo.policy import gpu_kv_pool
from simulations.core.policies.neo.tp import TensorParallelGpu, allreduce_layer_s, shard_model
from simulations.core.spec import LinkSpec, ModelSpec, RuntimeProfile
from tests.core.devices.gpu_doubles import KERNEL_PARAMS_DOUBLE
from tests.core.policies.neo_doubles import CPU_RT, GPU_RT, GQA8B, LLAMA7B, cpu, gpu, node, requests


def _costs(model=LLAMA7B, tp: int = 1, **gpu_kw: float) -> StageCosts:  # type: ignore[no-untyped-def]
    return StageCosts(GpuModel(gpu(**gpu_kw), GPU_RT), CpuModel(cpu(), CPU_RT), model, tp)


@pytest.mark.parametrize("rt", ["roofline", "kernels"])
@pytest.mark.parametrize(("batch", "cached"), [(1, 0), (7, 3000), (40, 20000)])
def test_stage_costs_add_up_to_the_gpu_models_decode_step(rt: str, batch: int, cached: int) -> None:
    big = {"mem_gb": 80.0, "bw": 2000.0, "tflops": 312.0}
    dm = GpuModel(gpu(**big), GPU_RT if rt == "roofline" else _KERNEL_RT)
    c = StageCosts(dm, CpuModel(cpu(), CPU_RT), LLAMA7B, 1)
    whole = dm.decode_step(LLAMA7B, batch, cached).seconds
    parts = LLAMA7B.n_layers * (
        c.linear_layer_s(batch) + c.gpu_decode_attn_layer_s(batch, cached)
    ) + c.pre_post_s(batch, batch)
    assert parts == pytest.approx(whole, rel=1e-12)


@pytest.mark.parametrize("rt", ["roofline", "kernels"])
@pytest.mark.parametrize("lens", [[16], [1500], [300, 900, 40]])
def test_stage_costs_add_up_to_the_gpu_models_prefill(rt: str, lens: list[int]) -> None:
    big = {"mem_gb": 80.0, "bw": 2000.0, "tflops": 312.0}
    dm = GpuModel(gpu(**big), GPU_RT if rt == "roofline" else _KERNEL_RT)
    c = StageCosts(dm, CpuModel(cpu(), CPU_RT), LLAMA7B, 1)
    whole = dm.prefill(LLAMA7B, lens).seconds
    tokens = sum(lens)
    parts = LLAMA7B.n_layers * (
        c.linear_layer_s(tokens) + c.prefill_attn_layer_s(lens)
    ) + c.pre_post_s(tokens, len(lens))
    assert parts == pytest.approx(whole, rel=1e-12)


_EAGER_RT = replace(
    GPU_RT, slug="test-gpu-eager", params={"fused_attention": 0, "power_wait_frac": 0.3}
)


def _layer_compute_s(dm: GpuModel, model: ModelSpec, tp: int, lens: list[int]) -> float:
    """One layer's compute seconds (FLOPs at the achieved rate) of prefilling ``lens`` in one
    packed pass on one shard, straight from the GPU model's per-operator roofline."""
    g = prefill_graph(
        shard_model(model, tp), lens, dm.precision, fused_attention=dm.fused_attention
    )
    return sum(t.compute_s for t in dm.op_times(g)[1:-2])  # the layer's operators


@pytest.mark.parametrize("rt", [GPU_RT, _EAGER_RT], ids=["fused", "eager"])
@pytest.mark.parametrize(("model", "tp"), [(LLAMA7B, 1), (GQA8B, 2)], ids=["7b", "8b-tp2"])
@pytest.mark.parametrize("prompt", [1, 17, 600, 4000])
def test_a_prompts_compute_share_is_its_layers_flops_at_the_achieved_rate(
    rt: RuntimeProfile, model: ModelSpec, tp: int, prompt: int
) -> None:
    dm = GpuModel(gpu(), rt)
    c = StageCosts(dm, CpuModel(cpu(), CPU_RT), model, tp)
    want = _layer_compute_s(dm, model, tp, [prompt])
    share = c.prompt_compute_layer_s(prompt)
    assert share == pytest.approx(want, rel=1e-9)
    # Compute only: never more than the stage times, which also wait on memory.
    assert share <= c.linear_layer_s(prompt) + c.prefill_attn_layer_s([prompt])
    if prompt == 1:  # one token streams the weights: far below the memory-bound stage
        assert share < 0.1 * c.linear_layer_s(1)


@pytest.mark.parametrize("rt", [GPU_RT, _EAGER_RT], ids=["fused", "eager"])
def test_prompt_compute_shares_add_up_to_the_packed_passes_compute(rt: RuntimeProfile) -> None:
    dm = GpuModel(gpu(), rt)
    c = StageCosts(dm, CpuModel(cpu(), CPU_RT), GQA8B, 1)
    lens = [300, 900, 40]
    shares = sum(c.prompt_compute_layer_s(s) for s in lens)
    assert shares == pytest.approx(_layer_compute_s(dm, GQA8B, 1, lens), rel=1e-9)


def test_cpu_attention_is_the_cpu_models() -> None:
    c = _costs()
    cm = CpuModel(cpu(), CPU_RT)
    assert c.cpu_attn_layer_s(12, 9000) == cm.attention_decode_layer(LLAMA7B, 12, 9000)
    assert c.cpu_attn_layer_s(0, 0) == 0.0


def test_linear_stage_is_flat_below_its_saturation_width_and_grows_above() -> None:
    c = _costs()
    s = c.saturation_tokens
    assert 30 < s < 400  # the roofline ridge of a T4-like GPU, in tokens
    assert c.linear_layer_s(s // 2) < 1.05 * c.linear_layer_s(1)
    assert c.linear_layer_s(8 * s) > 3 * c.linear_layer_s(1)


def test_profile_table_is_exact_at_profiled_points_and_interpolates_between() -> None:
    c = _costs()
    t = ProfileTable(
        c,
        max_tokens=3072,
        max_prompt=4096,
        max_gpu_tokens=4096,
        max_cpu_tokens=100000,
        max_batch=256,
    )
    for s in (1, 64, 96, 2048):
        assert s in t.lin_x
        assert t.linear(s) == c.linear_layer_s(s)
    a, b = 1024, 1536
    assert a in t.pref_x and b in t.pref_x
    mid = t.prefill_attn((a + b) // 2)
    assert mid == pytest.approx((c.prefill_attn_layer_s([a]) + c.prefill_attn_layer_s([b])) / 2)
    # Prefill attention is convex in the prompt: the chord over-estimates between points.
    assert mid >= c.prefill_attn_layer_s([(a + b) // 2])
    # CPU attention is bandwidth-bound, i.e. affine: bilinear interpolation is exact.
    for batch, att in ((3, 900), (50, 60000), (200, 99000)):
        assert t.cpu_attn(batch, att) == pytest.approx(
            c.cpu_attn_layer_s(batch, att - batch), rel=1e-9
        )
    assert t.linear(0) == 0.0 and t.cpu_attn(0, 0) == 0.0


def test_tensor_parallelism_halves_per_gpu_weight_bytes_and_kv() -> None:
    dm = GpuModel(gpu(mem_gb=80), GPU_RT)
    whole = dm.weights_bytes(GQA8B)
    half = dm.weights_bytes(shard_model(GQA8B, 2))
    norms = (2 * GQA8B.n_layers + 1) * GQA8B.hidden_size * 2  # replicated FP16 norms
    assert half == pytest.approx((whole - norms) / 2 + norms, rel=1e-12)
    assert shard_model(GQA8B, 2).kv_bytes_per_token(16) == GQA8B.kv_bytes_per_token(16) / 2
    group = TensorParallelGpu(dm, 2)
    assert group.weights_bytes(GQA8B) == pytest.approx(2 * half)
    assert group.kv_bytes_per_token(GQA8B) == GQA8B.kv_bytes_per_token(16)
    assert group.memory_capacity_bytes == 2 * dm.memory_capacity_bytes


def test_neo_gpu_units_hold_half_the_weights_under_tensor_parallelism() -> None:
    big = gpu("h-like", mem_gb=40, bw=2000, tflops=312)
    one = NeoPolicy().build(node("neo", gpu_spec=big), GQA8B, requests(8))
    two = NeoPolicy().build(node("neo", gpu_spec=big, gpus=2), GQA8B, requests(8))
    norms = (2 * GQA8B.n_layers + 1) * GQA8B.hidden_size * 2
    assert two.gpus[0].weights == pytest.approx((one.gpus[0].weights - norms) / 2 + norms)
    assert two.gpu_pool > 2 * one.gpu_pool  # the freed weights become KV cache


def test_shard_rejects_a_degree_that_does_not_divide_the_kv_heads() -> None:
    with pytest.raises(SpecError, match="n_kv_heads"):
        shard_model(GQA8B, 16)
    with pytest.raises(SpecError, match="tensor-parallel degree"):
        shard_model(GQA8B, 0)


def test_all_reduce_costs_only_over_a_peer_link() -> None:
    free = gpu()
    assert allreduce_layer_s(free, GQA8B, 2, 512) == 0.0
    linked = replace(free, peer_link=LinkSpec("nvlink", 450.0))
    t = allreduce_layer_s(linked, GQA8B, 2, 512)
    assert t == pytest.approx(2 * (512 * GQA8B.hidden_size * 2) / 450e9)
    assert allreduce_layer_s(linked, GQA8B, 1, 512) == 0.0
    c2 = StageCosts(GpuModel(linked, GPU_RT), None, GQA8B, 2)
    c1 = StageCosts(GpuModel(free, GPU_RT), None, GQA8B, 2)
    assert c2.linear_layer_s(512) == pytest.approx(c1.linear_layer_s(512) + t)


def test_gpu_only_baseline_gets_neos_gpu_cache() -> None:
    reqs = requests(30, rate=2.0)
    out = GpuOnlyPolicy().simulate(node("gpu-only"), LLAMA7B, reqs)
    neo = NeoPolicy().build(node("neo"), LLAMA7B, reqs)
    neo_gpu = NeoPolicy().build(node("neo", cpu_offload=False), LLAMA7B, reqs)
    assert out.extra["kv_pool_blocks"] == [neo_gpu.gpu_pool]
    dm = GpuModel(gpu(), GPU_RT)
    full = gpu_kv_pool(dm, LLAMA7B, utilization=0.99, tokens=3072, block_size=16)
    assert neo_gpu.gpu_pool == full
    # Offloading Neo gives one layer in L + 1 of every block to staging CPU-bound prefills.
    assert neo.gpu_pool == full * LLAMA7B.n_layers // (LLAMA7B.n_layers + 1) < full


def test_gpu_only_baseline_serves_a_tensor_parallel_group_as_one_unit() -> None:
    big = gpu("h-like", mem_gb=40, bw=2000, tflops=312)
    out = GpuOnlyPolicy().simulate(node("gpu-only", gpu_spec=big, gpus=2), GQA8B, requests(40))
    assert len(out.units) == 1
    assert out.extra["tensor_parallel"] == 2
    assert int(out.generated.sum()) == int(out.requests.output_tokens.sum())


def test_a_gpu_block_override_sizes_every_policys_gpu_cache() -> None:
    # The authors' harness passes one --num-gpu-blocks-override to vLLM, SwiftLLM and Neo;
    # Neo keeps L of every L + 1 layers (its staging layer), the baselines the full count.
    reqs = requests(20, inp=(100, 200), out=(10, 20), rate=2.0)
    out = GpuOnlyPolicy().simulate(node("gpu-only", gpu_blocks=54), LLAMA7B, reqs)
    assert out.extra["kv_pool_blocks"] == [54]
    neo_gpu = NeoPolicy().build(node("neo", cpu_offload=False, gpu_blocks=54), LLAMA7B, reqs)
    assert neo_gpu.gpu_pool == 54
    neo = NeoPolicy().build(node("neo", gpu_blocks=54), LLAMA7B, reqs)
    assert neo.gpu_pool == 54 * LLAMA7B.n_layers // (LLAMA7B.n_layers + 1)


def test_a_gpu_block_override_past_the_memory_is_rejected() -> None:
    # 16 GB less 13.5 GB of weights holds about 4,000 tokens: 1,000 blocks would not fit.
    reqs = requests(4)
    with pytest.raises(CapacityError, match="gpu_blocks"):
        NeoPolicy().build(node("neo", gpu_blocks=1000), LLAMA7B, reqs)
    with pytest.raises(CapacityError, match="gpu_blocks"):
        GpuOnlyPolicy().simulate(node("gpu-only", gpu_blocks=1000), LLAMA7B, reqs)


#: GPU_RT costed by kernel classes (round numbers: the form matters here, not the fit).
_KERNEL_RT = replace(
    GPU_RT, slug="test-gpu-kernels", params={**GPU_RT.params, **KERNEL_PARAMS_DOUBLE}
)


def test_a_second_sub_batch_pays_the_host_step_without_its_fixed_share() -> None:
    dm = GpuModel(gpu(), _KERNEL_RT)
    c = StageCosts(dm, CpuModel(cpu(), CPU_RT), LLAMA7B, 1)
    assert c.pre_post_s(8, 8) - c.pre_post_s(8, 8, step=False) == pytest.approx(300e-6)
    eager = _costs()
    assert eager.pre_post_s(8, 8) == eager.pre_post_s(8, 8, step=False)


def test_runs_on_one_node_share_its_stage_costs_and_their_memos_match_fresh_costs() -> None:
    """``stage_costs`` gives the runs of one node (same device models, model, degree and
    link) one :class:`StageCosts`; after a run has filled its memos, every memoised value
    equals a fresh, never-memoised computation at random widths, and another model or
    degree gets its own costs."""
    import numpy as np

    from simulations.core.policies.neo.policy import stage_costs

    pol = NeoPolicy()
    system = node("neo")
    a = pol.build(system, LLAMA7B, requests(40, seed=11))
    pol.simulate(system, LLAMA7B, requests(60, seed=12))
    b = NeoPolicy().build(system, LLAMA7B, requests(10, seed=13))
    assert a.costs is b.costs
    assert a.costs._lin_memo and a.costs._prepost_memo
    fresh = StageCosts(a.costs.gpu, a.costs.cpu, LLAMA7B, 1, None)
    rng = np.random.default_rng(5)
    for s in [*a.costs._lin_memo, *(int(x) for x in rng.integers(1, 5000, 50))]:
        assert a.costs.linear_layer_s(s) == fresh._linear_layer_s(s)
    for tokens, seqs, step in list(a.costs._prepost_memo)[:50]:
        assert a.costs.pre_post_s(tokens, seqs, step=step) == fresh.pre_post_s(
            tokens, seqs, step=step
        )
    gpu_m, cpu_m = a.costs.gpu, a.costs.cpu
    assert stage_costs(gpu_m, cpu_m, GQA8B, 1, None) is not a.costs
    assert stage_costs(gpu_m, cpu_m, LLAMA7B, 2, None) is not stage_costs(
        gpu_m, cpu_m, LLAMA7B, 1, None
    )
