"""HeteroLLM's modes, decider and synchronisation (§4, §4.2, §5): padding bound, SoC
bandwidth bound, fast vs conventional sync, baselines, determinism."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulations.core.catalog import Catalog
from simulations.core.devices.gpu import GpuModel
from simulations.core.errors import CapacityError
from simulations.core.policies.heterollm import Decider, HeteroSoc
from simulations.core.policies.heterollm.plan import KernelRun, handovers
from simulations.core.spec import DeviceSpec, ModelSpec

MISALIGNED = (7, 45, 100, 135, 200, 300, 525, 600, 777, 1000, 1100)


@pytest.mark.parametrize("fast", [True, False])
def test_misaligned_lengths_never_cost_more_than_padding(
    soc: HeteroSoc, llama8b: ModelSpec, fast: bool
) -> None:
    # plans made for the synchronisation in use (the w/o-fast-sync *ablation* runs a plan
    # made for fast sync, which is not meant to be optimal)
    tensor = Decider(soc, llama8b, "hetero-tensor", fast_sync=fast, plan_for_fast_sync=fast)
    padding = [
        Decider(
            soc, llama8b, mode, static_graphs="padding", fast_sync=fast, plan_for_fast_sync=fast
        )
        for mode in ("npu-only", "hetero-layer")
    ]
    for s in MISALIGNED:
        t = tensor.prefill(s).seconds
        for d in padding:
            assert t <= d.prefill(s).seconds * (1 + 1e-12), (s, d.mode)


def test_hetero_tensor_is_never_slower_than_hetero_layer_or_gpu_only(
    soc: HeteroSoc, internlm: ModelSpec
) -> None:
    deciders = {m: Decider(soc, internlm, m) for m in ("gpu-only", "hetero-layer", "hetero-tensor")}
    for s in (1, 32, 64, 129, 256, 1024):
        t = deciders["hetero-tensor"].prefill(s).seconds
        assert t <= deciders["hetero-layer"].prefill(s).seconds * (1 + 1e-12)
        assert t <= deciders["gpu-only"].prefill(s).seconds * (1 + 1e-12)
    d = deciders["hetero-tensor"].decode(1, 256).seconds
    assert d <= deciders["gpu-only"].decode(1, 256).seconds * (1 + 1e-12)


@pytest.mark.parametrize("mode", ["gpu-only", "npu-only", "hetero-layer", "hetero-tensor"])
def test_decode_bandwidth_never_exceeds_the_soc_peak(
    soc: HeteroSoc, llama8b: ModelSpec, internlm: ModelSpec, mode: str
) -> None:
    peak = soc.bus.peak_gbps * 1e9
    for model in (llama8b, internlm):
        for kv in (1, 256, 4000):
            run = Decider(soc, model, mode).decode(1, kv)
            assert run.matmul_gbps * 1e9 <= peak * (1 + 1e-12)
            assert run.bytes / run.seconds <= peak
            for k in run.kernels:
                if k.seconds > 0:
                    assert k.bytes / k.seconds <= peak * (1 + 1e-12), k.name


def test_row_cut_decode_draws_more_bandwidth_than_the_gpu_alone(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    run = Decider(soc, llama8b, "hetero-tensor").decode(1, 256)
    split = [k for k in run.kernels if k.procs == "gpu+npu"]
    assert split
    gbps = sum(k.bytes for k in split) / sum(k.seconds for k in split) / 1e9
    assert soc.gpu_alone_gbps < gbps < soc.bus.peak_gbps


@pytest.mark.parametrize("mode", ["npu-only", "hetero-layer", "hetero-tensor"])
@pytest.mark.parametrize("replan", [False, True])
def test_fast_sync_is_never_slower_than_conventional_sync(
    soc: HeteroSoc, llama8b: ModelSpec, mode: str, replan: bool
) -> None:
    fast = Decider(soc, llama8b, mode)
    slow = Decider(soc, llama8b, mode, fast_sync=False, plan_for_fast_sync=not replan)
    for s in (32, 64, 135, 256, 1024):
        assert fast.prefill(s).seconds <= slow.prefill(s).seconds
    for kv in (16, 256, 2048):
        assert fast.decode(1, kv).seconds <= slow.decode(1, kv).seconds


def test_conventional_sync_pays_a_copy_per_handover_and_a_refill_before_gpu_kernels(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    d = Decider(soc, llama8b, "hetero-layer", fast_sync=False)
    # the drained GPU queue is refilled only when a GPU kernel is submitted next (§3.1)
    assert d.boundary_s("gpu", "npu", decode=False) == pytest.approx(400e-6)
    assert d.boundary_s("npu", "gpu", decode=False) == pytest.approx(475e-6)
    assert d.boundary_s("gpu", "gpu+npu", decode=True) == pytest.approx(475e-6)
    assert d.boundary_s("gpu+npu", "gpu", decode=True) == pytest.approx(475e-6)
    assert soc.sync.conventional_s() == pytest.approx((400 + 75) * 1e-6)
    # Hetero-layer alternates: 4 hand-overs into the NPU and 4 back to the GPU a layer
    run = d.prefill(256)
    assert run.syncs == 8 * llama8b.n_layers
    assert run.sync_s == pytest.approx(run.syncs * 400e-6 + run.syncs / 2 * 75e-6)


def test_fast_sync_costs_nothing_in_the_gpu_dominant_decode(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    run = Decider(soc, llama8b, "hetero-tensor").decode(1, 256)
    assert run.syncs > 0 and run.sync_s == 0.0
    pre = Decider(soc, llama8b, "hetero-tensor").prefill(256)
    assert 0 < pre.sync_s < pre.syncs * soc.sync.conventional_s()


def test_gpu_only_is_the_gpu_cost_model(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    d = Decider(soc, llama8b, "gpu-only")
    gpu: GpuModel = soc.gpu
    for s in (1, 100, 1024):
        assert d.prefill(s).seconds == pytest.approx(gpu.prefill(llama8b, [s]).seconds, rel=1e-9)
    assert d.decode(1, 300).seconds == pytest.approx(
        gpu.decode_step(llama8b, 1, 300).seconds, rel=1e-9
    )
    assert d.prefill(256).npu_busy_s == 0.0


def test_hetero_layer_runs_matmuls_on_the_npu_in_prefill_and_the_gpu_in_decode(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    d = Decider(soc, llama8b, "hetero-layer")
    pre = {k.name: k.procs for k in d.prefill(256).kernels}
    assert pre["q_proj"] == pre["down_proj"] == "npu"
    assert pre["attn_norm"] == pre["ffn_act"] == pre["attn_score"] == "gpu"
    assert all(k.procs == "gpu" for k in d.decode(1, 256).kernels)


def test_npu_only_never_gives_a_matmul_to_the_gpu(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    d = Decider(soc, llama8b, "npu-only", static_graphs="pipe")
    for run in (d.prefill(525), d.decode(1, 525)):
        assert all(k.procs == "npu" for k in run.kernels if k.kind == "gemm")


def test_online_prepare_pays_graph_preparation_for_misaligned_prompts_only(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    d = Decider(soc, llama8b, "npu-only", static_graphs="online-prepare")
    assert d.prefill(256).prepare_s == 0.0
    assert d.prefill(300).prepare_s == pytest.approx(soc.npu.graph_prepare_s(llama8b, 300))
    assert d.decode(1, 300).prepare_s == 0.0


def test_padding_makes_npu_time_a_staircase(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    pad = Decider(soc, llama8b, "npu-only", static_graphs="padding")
    # lengths padded to the same graph cost about the same NPU time
    a, b = pad.prefill(260).npu_busy_s, pad.prefill(500).npu_busy_s
    assert a == pytest.approx(b, rel=1e-9)
    assert pad.prefill(513).npu_busy_s > 1.5 * b


def test_energy_is_split_by_processor_and_charged_while_busy(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    run = Decider(soc, llama8b, "hetero-layer").prefill(256)
    assert run.npu_j == pytest.approx(run.npu_busy_s * soc.npu.power_w)
    assert run.gpu_j <= run.gpu_busy_s * soc.gpu.device.tdp_w * (1 + 1e-12)
    assert run.joules == pytest.approx(run.gpu_j + run.npu_j)
    s = run.summary()
    assert s["energy_j_per_token"] == pytest.approx(run.joules / 256)
    assert s["tok_s_per_w"] == pytest.approx((256 / run.seconds) / run.avg_power_w)


def test_plans_are_deterministic(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    a = Decider(soc, llama8b, "hetero-tensor")
    b = Decider(soc, llama8b, "hetero-tensor")
    for s in (77, 256, 525):
        ra, rb = a.prefill(s), b.prefill(s)
        assert ra.seconds == rb.seconds
        assert [k.as_dict() for k in ra.kernels] == [k.as_dict() for k in rb.kernels]
    assert a.decode(1, 256) == b.decode(1, 256)


def test_it_rejects_a_prompt_beyond_the_context(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    from simulations.core.errors import SpecError

    with pytest.raises(SpecError):
        Decider(soc, llama8b, "hetero-tensor").prefill(llama8b.max_context + 1)
    with pytest.raises(SpecError) as err:
        Decider(soc, llama8b, "cpu-only")
    assert err.value.field == "options.mode"


def test_times_follow_the_device_models(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    from dataclasses import replace

    from simulations.core.devices.npu import NpuModel

    rt = soc.npu.runtime
    slow_npu = NpuModel(soc.npu.device, replace(rt, params={**rt.params, "stall_per_depth": 8.0}))
    slow = replace(soc, npu=slow_npu)
    for mode in ("hetero-layer", "hetero-tensor"):
        assert (
            Decider(slow, llama8b, mode).prefill(256).seconds
            > Decider(soc, llama8b, mode).prefill(256).seconds
        )
    assert (
        Decider(slow, llama8b, "gpu-only").prefill(256).seconds
        == Decider(soc, llama8b, "gpu-only").prefill(256).seconds
    )


def _kernel(name: str, kind: str, procs: str) -> KernelRun:
    return KernelRun(name, kind, 1, procs, 1e-3, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_every_row_cut_matmul_scatters_before_and_gathers_after_it() -> None:
    # §4.1.1: HeteroLLM "manages the splitting and merging of intermediate results" of each
    # partitioned kernel, so sibling Matmuls (q/k/v) split one after another hand over
    # twice between them: the first one's gather, then the next one's scatter
    layer = [
        _kernel("attn_norm", "norm", "gpu"),
        _kernel("q_proj", "gemm", "gpu+npu"),
        _kernel("k_proj", "gemm", "gpu+npu"),
        _kernel("v_proj", "gemm", "gpu"),
        _kernel("rope", "rope", "gpu"),
        _kernel("o_proj", "gemm", "npu"),
        _kernel("attn_residual", "elementwise", "gpu"),
    ]
    assert [(a, b) for a, _, b in handovers(layer)] == [
        ("gpu", "gpu+npu"),  # q scatter
        ("gpu+npu", "gpu"),  # q gather
        ("gpu", "gpu+npu"),  # k scatter
        ("gpu+npu", "gpu"),  # k gather
        ("gpu", "npu"),
        ("npu", "gpu"),
    ]


def test_handovers_are_counted_per_row_cut_kernel(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    # seven split Matmuls a layer, a scatter and a gather each: 14 hand-overs a layer, plus
    # the LM head's scatter after the final norm
    run = Decider(soc, llama8b, "hetero-tensor", fast_sync=False).prefill(256)
    gemms = [k for k in run.kernels if k.kind == "gemm"]
    assert all(k.procs == "gpu+npu" for k in gemms)
    assert run.syncs == 14 * llama8b.n_layers + 1
    # every hand-over copies and refills the GPU queue: a scatter submits the GPU's share
    # of the split kernel, a gather the next GPU kernel
    assert run.sync_s == pytest.approx(run.syncs * soc.sync.conventional_s())


def test_row_cut_kernels_the_solver_keeps_whole_hand_nothing_over(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    # the decode plan (made for fast sync) keeps some Matmuls on the GPU: only the ones it
    # splits pay a scatter and a gather
    run = Decider(soc, llama8b, "hetero-tensor", fast_sync=False).decode(1, 256)
    layer_cut = [k for k in run.kernels[1:-2] if k.procs == "gpu+npu"]
    head_cut = run.kernels[-1].procs == "gpu+npu"
    assert 0 < len(layer_cut) < 7
    assert run.syncs == 2 * len(layer_cut) * llama8b.n_layers + int(head_cut)


def test_pipe_is_never_slower_than_padding(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    # Pipe chooses its standard sizes dynamically (§5.2.2); one padded graph is among its
    # choices, and at 1000 tokens a six-graph cut re-streams the weights for no less padding
    pipe = Decider(soc, llama8b, "npu-only", static_graphs="pipe")
    pad = Decider(soc, llama8b, "npu-only", static_graphs="padding")
    for s in MISALIGNED:
        assert pipe.prefill(s).seconds <= pad.prefill(s).seconds * (1 + 1e-12), s
    assert pipe.prefill(135).seconds < pad.prefill(135).seconds


def test_fast_sync_decode_refills_the_gpu_queue_only_when_the_npu_ends_last(
    soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    """§4.2: in decode the next GPU kernel is queued behind the GPU's share of a row-cut
    kernel; when the NPU's share ends last the queue has drained (§3.1: 50–100 µs)."""
    d = Decider(soc, llama8b, "hetero-tensor")
    refill = soc.sync.empty_queue_submit_us * 1e-6
    assert d.boundary_s("gpu+npu", "gpu", decode=True, npu_last=False) == 0.0
    assert d.boundary_s("gpu+npu", "gpu", decode=True, npu_last=True) == pytest.approx(refill)
    assert d.boundary_s("npu", "gpu", decode=True) == pytest.approx(refill)
    # the NPU-dominant prefill delays every GPU submission until the NPU is done
    for last in (False, True):
        assert d.boundary_s("gpu+npu", "gpu", decode=False, npu_last=last) == pytest.approx(refill)
    assert d.npu_last_s(True, fast=True) == pytest.approx(refill)
    assert d.npu_last_s(False, fast=True) == 0.0
    assert d.npu_last_s(True, fast=False) == 0.0


def test_a_gather_after_an_npu_share_ending_last_says_so() -> None:
    layer = [
        _kernel("attn_norm", "norm", "gpu"),
        _kernel("q_proj", "gemm", "npu"),
        _kernel("k_proj", "gemm", "gpu"),
    ]
    assert [last for _, last, _ in handovers(layer)] == [False, True]


def test_npu_prefill_needs_room_for_the_weight_conversion_gpu_only_does_not(
    cat: Catalog, soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    """The host converts weights for the NPU's FP16 prefill graphs (§4, §6): a phone whose
    memory holds the INT4 model but not the conversion buffer runs PPL-OpenCL only."""
    npu = soc.npu
    gb = (npu.weights_bytes(llama8b) + 0.5 * npu.conversion_buffer_bytes(llama8b)) / 1e9

    def shrink(d: DeviceSpec) -> DeviceSpec:
        return replace(d, memory=(replace(d.memory[0], capacity_gb=gb),))

    small = HeteroSoc.from_specs(
        shrink(cat.device("adreno-750")),
        cat.runtime("w4a16-opencl-adreno"),
        shrink(cat.device("hexagon-npu")),
        cat.runtime("w4a16-qnn-hexagon"),
    )
    Decider(small, llama8b, "gpu-only").prefill(256)
    with pytest.raises(CapacityError):
        Decider(small, llama8b, "hetero-tensor").prefill(256)
