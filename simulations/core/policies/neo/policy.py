"""The registered policies: ``neo``, its baselines ``gpu-only`` and ``fastdecode+``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor
from simulations.core.devices.cpu import CpuModel
from simulations.core.devices.gpu import GpuModel
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import ProgressFn, SimOutput, Unit
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import prefill_graph
from simulations.core.policies.base import OptionSpec, RoleSpec, register, resolve_link
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
from simulations.core.spec import (
    DevicePlacement,
    LinkSpec,
    ModelSpec,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)

from . import screen
from .costs import ProfileTable, StageCosts
from .scheduler import FASTDECODE, GPU_ONLY, NEO
from .sim import NeoSim
from .tp import TensorParallelGpu, shard_model

#: Options Neo and its baselines share, with SwiftLLM's defaults (Neo builds on SwiftLLM,
#: §4): block 16, max_batch_size 512, max_tokens_in_batch 3072 (github SwiftSeal03/swiftLLM,
#: a SwiftLLM fork implementing Neo, swiftllm/engine_config.py) and gpu_mem_utilization
#: 0.99 (github interestingLSY/swiftLLM examples; its profile_num_blocks sizes the KV cache
#: from what a full-size forward pass leaves).
SHARED_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("block_size", int, 16, "tokens per KV-cache block (GPU and CPU caches)", 1, 1024),
    OptionSpec(
        "memory_utilization",
        float,
        0.99,
        "fraction of each GPU's memory for weights, activations and the GPU KV cache "
        "(SwiftLLM gpu_mem_utilization); the KV cache gets what the weights and the "
        "activations of a full iteration leave",
        0.05,
        1.0,
    ),
    OptionSpec(
        "gpu_blocks",
        int,
        0,
        "GPU KV-cache blocks per GPU, replacing the memory_utilization rule (SwiftLLM/vLLM "
        "--num-gpu-blocks-override, which the Neo authors' harness passes to every system); "
        "0 derives the count from memory. Must fit beside the weights and activations",
        0,
        10_000_000,
    ),
    OptionSpec(
        "max_batch", int, 512, "most requests in one iteration (SwiftLLM max_batch_size)", 1, 4096
    ),
    OptionSpec(
        "max_batched_tokens",
        int,
        3072,
        "most tokens in one iteration, prompts and decodes together (SwiftLLM "
        "max_tokens_in_batch; a longer single prompt still runs, alone)",
        16,
        1_000_000,
    ),
    OptionSpec(
        "link",
        str,
        "",
        "the catalog interconnect the tensor-parallel GPUs all-reduce over (nvlink4, "
        "pcie5-x16, …); empty: the GPU record's peer link (no catalog GPU has one, so the "
        "all-reduces then cost nothing)",
        catalog="links",
    ),
)

CPU_OPTION = OptionSpec(
    "cpu_memory_fraction",
    float,
    0.5,
    "fraction of the host CPU's memory given to the CPU KV cache (Neo §5.5 sizes it in "
    "proportion to the instance; the rest holds the OS, the runtime and pinned buffers)",
    0.01,
    0.95,
)

GPU_ROLE = RoleSpec(
    "gpu",
    "the node's GPUs: one, or several serving the model with tensor parallelism (§4)",
    ("gpu",),
)
CPU_ROLE = RoleSpec(
    "cpu",
    "the host CPU that holds the CPU KV cache and runs offloaded decode attention",
    ("cpu",),
)


@lru_cache(maxsize=32)
def stage_costs(
    gpu: GpuModel, cpu: CpuModel, model: ModelSpec, tp: int, link: LinkSpec | None
) -> StageCosts:
    """The :class:`StageCosts` of a node, one per distinct hardware and model in a process:
    the runs of a sweep on one node share it, so its memoised linear-stage and pre/post-layer
    times (pure functions of the widths, whose inputs never change: device models are cached
    per device and runtime) fill once instead of once per run. Bounded; keyed on the device
    models' identities, the model, the tensor-parallel degree and the all-reduce link."""
    return StageCosts(gpu, cpu, model, tp, link)


class _HostCpu(DeviceModel):
    """The host CPU as a unit of the engine: it holds KV cache, never weights."""

    params = CpuModel.params

    def __init__(self, inner: CpuModel) -> None:
        super().__init__(inner.device, inner.runtime)
        self.inner = inner
        self.power_w = inner.power_w

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """The wrapped CPU model's prefill (Neo never prefills on the CPU)."""
        return self.inner.prefill(model, seq_lens)

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """The wrapped CPU model's whole-model decode (Neo only runs its attention)."""
        return self.inner.decode_step(model, batch, kv_tokens)

    def weights_bytes(self, model: ModelSpec) -> float:
        """Nothing: the weights stay on the GPUs."""
        return 0.0

    def compute_rate_bound(self) -> float | None:
        """The wrapped CPU model's answer."""
        return self.inner.compute_rate_bound()

    def floor_power_w(self) -> float:
        """The wrapped CPU model's answer."""
        return self.inner.floor_power_w()

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """The wrapped CPU model's answer."""
        return self.inner.decode_stream_floor(model)


def _one(system: SystemSpec, role: str, required: bool) -> tuple[int, DevicePlacement] | None:
    found = [(i, p) for i, p in enumerate(system.devices) if p.role == role]
    if len(found) > 1:
        raise SpecError(
            f"systems.{system.name}.devices",
            f"one node has one {role} placement (use count for several identical GPUs)",
        )
    if not found:
        if required:
            raise SpecError(f"systems.{system.name}.devices", f"needs a device with role {role!r}")
        return None
    return found[0]


def activation_bytes(gpu: GpuModel, model: ModelSpec, tokens: int) -> float:
    """Activation workspace of one GPU for a pass of ``tokens`` tokens: the largest
    operator's inputs and outputs (the GPU model's own workspace rule)."""
    g = prefill_graph(model, [tokens], gpu.precision, fused_attention=gpu.fused_attention)
    return float(max(op.act_read_bytes + op.act_write_bytes for op in g.ops))


def gpu_kv_pool(
    gpu: DeviceModel, shard: ModelSpec, *, utilization: float, tokens: int, block_size: int
) -> int:
    """GPU KV-cache blocks of one GPU: ``capacity × utilization − weights − activations``
    over the block size (SwiftLLM sizes its cache from free memory after a profiling pass)."""
    if not isinstance(gpu, GpuModel):
        raise SpecError("devices", "Neo's GPUs need the GPU roofline model")
    free = (
        gpu.memory_capacity_bytes * utilization
        - gpu.weights_bytes(shard)
        - activation_bytes(gpu, shard, tokens)
    )
    per_block = block_size * gpu.kv_bytes_per_token(shard)
    pool = math.floor(free / per_block)
    if pool < 2:
        raise CapacityError(
            "devices.gpu",
            f"{gpu.device.slug} has no room for a KV cache after {shard.slug}'s weights and "
            f"activations ({gpu.weights_bytes(shard) / 1e9:.1f} GB of "
            f"{gpu.memory_capacity_bytes / 1e9:.1f} GB at memory_utilization {utilization:g})",
        )
    return pool


def override_gpu_pool(
    gpu: DeviceModel, shard: ModelSpec, *, blocks: int, tokens: int, block_size: int
) -> int:
    """``blocks`` GPU KV-cache blocks (SwiftLLM/vLLM ``--num-gpu-blocks-override``), checked
    to fit one GPU's memory beside the weights and a full iteration's activations (an
    override past the memory would fail to allocate on the real GPU)."""
    if not isinstance(gpu, GpuModel):
        raise SpecError("devices", "Neo's GPUs need the GPU roofline model")
    need = (
        gpu.weights_bytes(shard)
        + activation_bytes(gpu, shard, tokens)
        + blocks * block_size * gpu.kv_bytes_per_token(shard)
    )
    if blocks < 2 or need > gpu.memory_capacity_bytes:
        raise CapacityError(
            "options.gpu_blocks",
            f"{blocks} KV blocks of {block_size} tokens need {need / 1e9:.2f} GB with "
            f"{shard.slug}'s weights and activations; {gpu.device.slug} holds "
            f"{gpu.memory_capacity_bytes / 1e9:.1f} GB (and at least 2 blocks are needed)",
        )
    return blocks


def engine_memory_utilization(gpu: GpuModel, shard: ModelSpec, opts: dict[str, Any]) -> float:
    """The ``memory_utilization`` that makes the engine's continuous batching (which sizes
    its pool as ``capacity · u − weights``) hold the GPU cache Neo's options give: the
    ``gpu_blocks`` override (half a block of margin against rounding), else SwiftLLM's rule
    (``memory_utilization`` less a full iteration's activations). Checks that it fits."""
    bs = int(opts["block_size"])
    tokens = int(opts["max_batched_tokens"])
    blocks = int(opts["gpu_blocks"])
    cap = gpu.memory_capacity_bytes
    if blocks:
        override_gpu_pool(gpu, shard, blocks=blocks, tokens=tokens, block_size=bs)
        block_bytes = bs * gpu.kv_bytes_per_token(shard)
        return (gpu.weights_bytes(shard) + (blocks + 0.5) * block_bytes) / cap
    util = float(opts["memory_utilization"])
    gpu_kv_pool(gpu, shard, utilization=util, tokens=tokens, block_size=bs)
    return util - activation_bytes(gpu, shard, tokens) / cap


def offload_gpu_pool(blocks: int, n_layers: int) -> int:
    """GPU blocks left when offloading: each GPU block carries one extra layer that stages
    the KV of prefills bound for the CPU cache before their layer-wise swap-out (§3.1).

    The authors' harness (SwiftSeal03/swiftLLM ``evaluation/server.py``) gives Neo
    ``num_gpu_blocks × L / (L + 1)`` blocks with ``--extra-layer-for-cprf`` (its KV tensors
    have ``L + 1`` layers) and the GPU-only baseline the full count, in the same memory."""
    return max(2, blocks * n_layers // (n_layers + 1))


class NeoBasePolicy(EnginePolicy):
    """Shared construction of Neo-style systems (see :class:`NeoPolicy`)."""

    mode: ClassVar[str] = NEO
    roles: ClassVar[tuple[RoleSpec, ...]] = (GPU_ROLE, CPU_ROLE)
    tensor_parallel_role: ClassVar[str | None] = GPU_ROLE.name
    host_roles: ClassVar[frozenset[str]] = frozenset({CPU_ROLE.name})
    single_node: ClassVar[bool] = True
    #: The simulator of the latest :meth:`simulate` (tests inspect its decisions).
    last_sim: NeoSim | None = None

    def _mode(self, opts: dict[str, Any]) -> str:
        return self.mode

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> tuple[StageCosts, int]:
        """Build the node's simulator (its constructor sizes and checks both caches); the
        bounds need its exact stage costs and ``max_batch``."""
        assert tp is not None
        system = SystemSpec("fit", cls.name, ctx.placements(sig, tp), options)
        sim = cls().build(system, ctx.model, ctx.requests)
        return sim.costs, int(options["max_batch"])

    @classmethod
    def screen_bounds(
        cls,
        ctx: BoundContext,
        sig: SignatureLike,
        options: dict[str, Any],
        fitted: Any,
        cmax: int,
        tp: int | None,
    ) -> Bounds:
        """See :func:`.screen.neo_bounds`; FastDecode+ keeps no KV cache on the GPU, so its
        decodes never attend there."""
        assert tp is not None
        costs, max_batch = fitted
        return screen.neo_bounds(
            ctx, sig, costs, max_batch, tp, gpu_decode_attention=cls.mode != FASTDECODE
        )

    def build(self, system: SystemSpec, model: ModelSpec, requests: RequestSet) -> NeoSim:
        """The simulator of ``system`` for ``requests`` (not yet run)."""
        opts = self.resolve_options(system.options)
        found = _one(system, "gpu", True)
        assert found is not None
        gi, gp = found
        cfound = _one(system, "cpu", True)
        assert cfound is not None
        ci, cp = cfound
        if cp.count != 1:
            raise SpecError(f"systems.{system.name}.devices[{ci}].count", "one host CPU per node")
        tp = gp.count
        shard = shard_model(model, tp)
        gdm = self.device_models(gp.device, gp.runtime)
        cdm = self.device_models(cp.device, cp.runtime)
        if not isinstance(gdm, GpuModel):
            raise SpecError(f"systems.{system.name}.devices[{gi}]", "Neo needs a GPU model")
        if not isinstance(cdm, CpuModel):
            raise SpecError(f"systems.{system.name}.devices[{ci}]", "Neo needs a CPU model")
        bs = int(opts["block_size"])
        max_tokens = int(opts["max_batched_tokens"])
        max_batch = int(opts["max_batch"])
        if int(opts["gpu_blocks"]):
            gpu_pool = override_gpu_pool(
                gdm, shard, blocks=int(opts["gpu_blocks"]), tokens=max_tokens, block_size=bs
            )
        else:
            gpu_pool = gpu_kv_pool(
                gdm,
                shard,
                utilization=float(opts["memory_utilization"]),
                tokens=max_tokens,
                block_size=bs,
            )
        mode = self._mode(opts)
        if mode != GPU_ONLY:
            gpu_pool = offload_gpu_pool(gpu_pool, model.n_layers)
        cpu_pool = math.floor(
            cdm.memory_capacity_bytes
            * float(opts["cpu_memory_fraction"])
            / (bs * model.kv_bytes_per_token(gp.runtime.kv_bits))
        )
        costs = stage_costs(gdm, cdm, model, tp, resolve_link(system, opts))
        longest = int(np.max(requests.input_tokens + requests.output_tokens))
        table = ProfileTable(
            costs,
            max_tokens=max_tokens,
            max_prompt=max(max_tokens, longest),
            max_gpu_tokens=gpu_pool * bs,
            max_cpu_tokens=max(cpu_pool * bs, longest),
            max_batch=max_batch,
        )
        gpus = [
            Unit(k, gi, gp.device, gp.runtime, gp.role, gdm, shard, timeline_cap=self.timeline_cap)
            for k in range(tp)
        ]
        cpu = Unit(
            tp,
            ci,
            cp.device,
            cp.runtime,
            cp.role,
            _HostCpu(cdm),
            model,
            timeline_cap=self.timeline_cap,
        )
        return NeoSim(
            requests,
            gpus,
            cpu,
            costs,
            table,
            mode=mode,
            block_size=bs,
            max_batch=max_batch,
            max_tokens=max_tokens,
            gpu_pool=gpu_pool,
            cpu_pool=cpu_pool,
            reference=self.reference,
            audit=self.audit,
        )

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run the system on ``requests`` and return the raw outcome."""
        sim = self.build(system, model, requests)
        sim.progress = progress
        self.last_sim = sim
        out = sim.run()
        out.extra["options"] = self.resolve_options(system.options)
        return out


@register
class NeoPolicy(NeoBasePolicy):
    """Neo (Jiang et al.): GPU + host-CPU attention offloading with asymmetric pipelining
    (§3.1, Fig. 5) and load-aware scheduling (§3.2), on one node.

    The KV cache is split into a paged GPU cache and a paged CPU cache, each request wholly
    in one (§3.1); newly prefilled KV that does not fit the GPU cache is swapped out to the
    CPU layer by layer, overlapped with compute. Every iteration the scheduler
    (:mod:`.scheduler`, the six steps of §3.2) builds batch-0 (prefills, GPU decodes, a few
    CPU decodes) and batch-1 (CPU decodes) under ``T_ca0 ≤ T_l1 + T_ga0`` and
    ``T_ca1 ≤ T_l0``, estimated from an interpolated profile table of the core's device
    models, and runs it or the GPU-only schedule, whichever promises more requests per
    second. Iterations last ``L × (max{T_l0, T_ca1} + max{T_l1 + T_ga0, T_ca0})`` (two
    batches) from the exact stage costs (:mod:`.costs`). Several GPUs of the ``gpu``
    placement serve the model with tensor parallelism (§4): each holds a shard of the
    weights and of every token's KV heads, and its share of the CPU cache lives in the
    same host memory.

    Option ``cpu_offload = false`` gives GPU-only Neo with selective batching (prefills and
    decodes in one iteration, swapping to the host under memory pressure) — the closest
    stand-in for the paper's vLLM ``--enable-chunked-prefill`` baseline of Fig. 6.

    Deviations: GPU stages cost the roofline of the ``gpu`` placement's runtime (use
    ``vllm-fp16``: §5.5 finds SwiftLLM on par with vLLM on one GPU; no Python launch cost is
    charged, §4 moved Neo's kernels to CUDA C++); CPU attention is the bandwidth-bound
    :class:`~simulations.core.devices.cpu.CpuModel` with no kernel-launch share on the CPU
    thread; all-reduces cost only when the GPU record has a ``peer_link`` (none is in the
    catalog for the H100, so TP communication is free here); PCIe at the link's raw rate;
    the GPU cache is sized like SwiftLLM's (memory × utilisation − weights − the largest
    operator's activations of a full iteration) or set by ``gpu_blocks`` (the harness's
    ``--num-gpu-blocks-override``, checked to fit), less the extra staging layer of the
    authors' ``--extra-layer-for-cprf`` (:func:`offload_gpu_pool`; GPU-only Neo keeps the
    full count, as the harness's baseline does); the CPU cache is ``cpu_memory_fraction`` of
    host memory; at most ``max_batch`` requests are resident in the two caches (the block
    table's rows); swap-in needs one spare block per GPU request ("ample space"); step 5
    keeps batch-0 at the linear stage's saturation width (the paper states no floor; see
    :mod:`.scheduler`); the progress rule for runqueues that cannot be balanced; no
    chunked prefill; scheduling and swap decisions cost no time; the CPU's timeline shows
    its attention as one interval per iteration.
    """

    name: ClassVar[str] = "neo"
    summary: ClassVar[str] = (
        "Neo: offload part of decode attention and KV cache to the host CPU with "
        "asymmetric GPU-CPU pipelining and load-aware scheduling"
    )
    options: ClassVar[tuple[OptionSpec, ...]] = (
        *SHARED_OPTIONS,
        CPU_OPTION,
        OptionSpec(
            "cpu_offload",
            bool,
            True,
            "offload decode attention to the CPU (false: GPU-only Neo with selective "
            "batching, the CPU cache only holding swapped-out requests)",
        ),
    )

    def _mode(self, opts: dict[str, Any]) -> str:
        return NEO if opts["cpu_offload"] else GPU_ONLY


@register
class FastDecodePlusPolicy(NeoBasePolicy):
    """FastDecode+ (Neo §5.1 baseline; He & Zhai 2024 made end-to-end by Neo's authors):
    every request's KV cache and decode attention on the host CPU, with Neo's asymmetric
    pipelining and load-aware scheduler (:class:`NeoPolicy`).

    Prefills run on the GPU and their KV is swapped out layer by layer; the GPU keeps no
    KV cache between iterations. When the runqueue cannot be hidden behind GPU work the
    scheduler launches CPU batches anyway (§5.3), so long outputs make it CPU-bound.
    Deviations: as :class:`NeoPolicy`.
    """

    name: ClassVar[str] = "fastdecode+"
    summary: ClassVar[str] = (
        "FastDecode+: all decode attention and KV cache on the host CPU, Neo's pipelining"
    )
    mode: ClassVar[str] = FASTDECODE
    options: ClassVar[tuple[OptionSpec, ...]] = (*SHARED_OPTIONS, CPU_OPTION)


@register
class GpuOnlyPolicy(EnginePolicy):
    """GPU-only continuous batching, vLLM/SwiftLLM-like: the baseline of Neo §5 ("GPU-only
    Neo, i.e. SwiftLLM", Figs. 8b–10).

    A thin policy over the engine's continuous batching (:mod:`simulations.core.engine.batching`,
    the ``homogeneous`` policy's machinery): prefill iterations have priority, decodes pause
    meanwhile (SwiftLLM's default scheduler does not mix them), preemption by recompute. Its
    options and their defaults are Neo's, and its KV pool is sized the same way (memory ×
    utilisation − weights − activations of a full iteration), so the two policies differ only
    in offloading and scheduling. Several GPUs of the ``gpu`` placement form one
    tensor-parallel group (§4) seen by the engine as one unit; a ``cpu`` placement may be
    listed (so a scenario can compare the same node under every policy) and is idle.

    Deviations: recompute instead of SwiftLLM's swap preemption; TP communication as in
    :class:`NeoPolicy`; the report shows the TP group's GPUs as one busy unit (``count``
    is the placement's).
    """

    name: ClassVar[str] = "gpu-only"
    summary: ClassVar[str] = "GPU-only continuous batching (vLLM/SwiftLLM-like), Neo's baseline"
    roles: ClassVar[tuple[RoleSpec, ...]] = (
        GPU_ROLE,
        RoleSpec("cpu", "the host CPU (idle: the baseline does not offload)", ("cpu",), False),
    )
    options: ClassVar[tuple[OptionSpec, ...]] = SHARED_OPTIONS
    tensor_parallel_role: ClassVar[str | None] = GPU_ROLE.name
    host_roles: ClassVar[frozenset[str]] = frozenset({"cpu"})
    single_node: ClassVar[bool] = True

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """The construction :meth:`simulate` runs before simulating, on the group of ``tp``
        GPUs."""
        assert tp is not None
        unit = screen.tp_unit(ctx, sig.roles[0][1], tp)
        dm = unit.dm
        inner = dm.inner if isinstance(dm, TensorParallelGpu) else dm
        assert isinstance(inner, GpuModel)
        shard = shard_model(ctx.model, tp)
        BatchingSim(
            ctx.requests,
            [unit],
            max_batch=int(options["max_batch"]),
            block_size=int(options["block_size"]),
            memory_utilization=engine_memory_utilization(inner, shard, options),
            max_batched_tokens=int(options["max_batched_tokens"]),
        )

    @classmethod
    def screen_bounds(
        cls,
        ctx: BoundContext,
        sig: SignatureLike,
        options: dict[str, Any],
        fitted: Any,
        cmax: int,
        tp: int | None,
    ) -> Bounds | None:
        """See :func:`.screen.gpu_only_bounds`."""
        assert tp is not None
        return screen.gpu_only_bounds(ctx, sig, options, tp)

    def build(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> BatchingSim:
        """The baseline's simulator of ``system`` for ``requests`` (not yet run)."""
        opts = self.resolve_options(system.options)
        found = _one(system, "gpu", True)
        assert found is not None
        gi, gp = found
        tp = gp.count
        shard = shard_model(model, tp)
        inner = self.device_models(gp.device, gp.runtime)
        if not isinstance(inner, GpuModel):
            raise SpecError(f"systems.{system.name}.devices[{gi}]", "gpu-only needs a GPU model")
        bs = int(opts["block_size"])
        tokens = int(opts["max_batched_tokens"])
        util_eff = engine_memory_utilization(inner, shard, opts)
        dm: DeviceModel = (
            inner if tp == 1 else TensorParallelGpu(inner, tp, resolve_link(system, opts))
        )
        unit = Unit(
            0,
            gi,
            gp.device,
            gp.runtime,
            gp.role,
            dm,
            model,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
        )
        sim = BatchingSim(
            requests,
            [unit],
            max_batch=int(opts["max_batch"]),
            block_size=bs,
            memory_utilization=util_eff,
            max_batched_tokens=tokens,
            reference=self.reference,
            audit=self.audit,
            progress=progress,
        )
        return sim

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run the baseline on ``requests`` and return the raw outcome."""
        sim = self.build(system, model, requests, progress)
        found = _one(system, "gpu", True)
        assert found is not None
        out = sim.run()
        out.extra["options"] = self.resolve_options(system.options)
        out.extra["tensor_parallel"] = found[1].count
        return out

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Simulate ``system`` on the workload's requests and return its result entry, each
        device entry counting the placement's GPUs (the engine saw one TP unit)."""
        result = super().run(system, model, workload, slo, rng, progress)
        for d in result["devices"]:
            for p in system.devices:
                if p.device.slug == d["device"] and p.role == d["role"]:
                    d["count"] = p.count
        return result
