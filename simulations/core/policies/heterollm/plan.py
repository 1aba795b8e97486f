"""HeteroLLM's execution modes, its decider and its inference engine on one SoC (§4, §5).

A forward pass is the operator graph (:mod:`simulations.core.graph`) run kernel by kernel.
The *decider* (§4.3) places every kernel by mode, phase and sequence length:

``gpu-only``
    Every kernel on the GPU (the PPL-OpenCL baseline, §5).
``npu-only``
    Every Matmul wholly on the NPU, in both phases, never shared with the GPU — the §5.2.2
    baselines. Prompt lengths without a prepared graph are handled by ``static_graphs``:
    ``padding`` (pad to the smallest prepared graph), ``pipe`` (multi-sequence-length
    cutting without the GPU: prepared graphs in a row, the margin padded to the smallest
    graph) or ``online-prepare`` (graphs built for the prompt, whose preparation time is paid
    per request). The other operators stay on the GPU, where HeteroLLM's engine runs them
    (§4, Fig. 7); running the *whole* model on the NPU is the ``homogeneous`` policy on the
    NPU device (:meth:`~simulations.core.devices.npu.NpuModel.prefill`).
``hetero-layer``
    Layer-level heterogeneous execution (§4): norms, RoPE, attention and activations on the
    GPU; each Matmul on whichever backend the §4.3 objective prefers as a whole kernel —
    the NPU in the permuted order in prefill, the GPU in decode (§5.3). Prompt lengths
    without a graph use ``static_graphs``.
``hetero-tensor``
    Tensor-level execution (§4.1): the same placement of non-Matmul kernels; every Matmul
    partitioned by the solver (:mod:`.solver`) — row-, sequence-length, multi-sequence-length
    or hybrid-cutting in prefill, row-cutting in decode.

*Synchronisation* (§3.1, §4.2) is charged per kernel boundary whose two kernels do not run
on the same single processor (a kernel split over both processors forks and joins):
conventional synchronisation costs a copy (``clEnqueueWriteBuffer``, fixed ≈400 µs) at every
such boundary plus the refill of the drained GPU queue (50–100 µs) where a GPU kernel is
submitted after it; fast synchronisation
(shared buffers, predicted sleep then polling) costs only the submission of the next GPU
kernel to an empty queue when a GPU kernel waits for the NPU in the NPU-dominant prefill,
and in the GPU-dominant decode only where the NPU's work ends last: when the GPU's share of
a row-cut kernel is the longer one, the next GPU kernel is queued behind it while it runs
(§4.2: "once the NPU task is completed, we promptly submit the next GPU kernel"), but when
the NPU's share (or an NPU-only kernel) ends last the GPU queue has drained and the
submission pays the refill (50–100 µs, §3.1)
(:class:`~simulations.core.memory.UnifiedMemorySync`).
Hand-overs are counted per partitioned kernel (:func:`handovers`): §4.1.1 has HeteroLLM
insert synchronisation points and manage "the splitting and merging of intermediate results
across different backends" for each row-cut kernel, so every kernel split over both
processors pays a scatter before it and a gather after it (Fig. 11: the next GPU kernel is
submitted once the NPU part has finished), sibling Matmuls (``q/k/v_proj``,
``gate/up_proj``) included: seven split Matmuls a layer hand over 14 times. How many
kernels are split is the solver's decision (HeteroLLM §4.1.1; the earlier count
merged siblings into one fork and one join, 8 a layer at most).

The solver's ``T_sync + T_copy`` for a kernel is the cost of the two boundaries of a kernel
that uses the NPU between two GPU kernels, under the synchronisation the plan is made for
(``plan_for_fast_sync``: HeteroLLM's plans are made for its fast synchronisation; running
them with conventional synchronisation is the paper's "w/o fast sync" ablation, Figs. 15, 17).

*Energy* (§5.6): each processor draws its stack's active power while it is busy (GPU:
``power_compute_frac``/``power_memory_frac`` × TDP by the roofline side of its kernel; NPU:
``active_power_w``) and its idle power otherwise; the CPU control plane's power is not
published and not counted.

The decider (§4.3) picks each kernel's placement with the solver, then also compares the
whole pass against the plans of the simpler modes it contains (layer-level, all Matmuls on
the NPU, all on the GPU) and keeps the fastest: the paper's per-kernel ``T_sync`` does not
see which neighbours share a boundary, the executed pass does.

Deviations: kernels run one after another in graph order (no overlap of independent
kernels beyond the GPU/NPU halves of one partitioned kernel); which processor ends a kernel
last is decided on the two shares' times alone (an NPU share ending a few µs after the
GPU's pays the whole refill, one ending a few µs before pays none); NPU graph launches cost
nothing beyond the NPU model; graph preparation (online-prepare) occupies neither processor
(it runs in the CPU-side compiler) and is charged as latency only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from simulations.core.devices.gpu import OpTime, check_capacity
from simulations.core.errors import SpecError
from simulations.core.graph import OpKind, Phase, PhaseGraph, decode_graph, prefill_graph
from simulations.core.spec import ModelSpec, check_count

from .soc import HeteroSoc
from .solver import Gemm, Partition, PartitionSolver, Scope, StaticGraphs

MODES: tuple[str, ...] = ("gpu-only", "npu-only", "hetero-layer", "hetero-tensor")
STATIC_GRAPHS: tuple[str, ...] = ("padding", "pipe", "online-prepare")

GPU, NPU, BOTH = "gpu", "npu", "gpu+npu"


@dataclass(frozen=True, slots=True)
class KernelRun:
    """One kernel of a pass: where it ran, how long, what it drew (per instance)."""

    name: str
    kind: str
    repeat: int
    procs: str
    seconds: float
    gpu_busy_s: float
    npu_busy_s: float
    gpu_j: float
    npu_j: float
    bytes: float
    partition: Partition | None = None

    @property
    def npu_last(self) -> bool:
        """Whether the NPU finishes this kernel after the GPU (or runs it alone)."""
        if self.partition is None:
            return self.procs == NPU
        return self.partition.uses_npu and self.partition.t_npu_s > self.partition.t_gpu_s

    def as_dict(self) -> dict[str, Any]:
        """Row of the per-kernel placement table."""
        row: dict[str, Any] = {
            "kernel": self.name,
            "kind": self.kind,
            "repeat": self.repeat,
            "backend": self.procs,
            "ms": self.seconds * 1e3,
            "gpu_busy_ms": self.gpu_busy_s * 1e3,
            "npu_busy_ms": self.npu_busy_s * 1e3,
        }
        if self.partition is not None:
            row.update(self.partition.as_dict())
        else:
            row["strategy"] = self.procs
        return row


@dataclass(frozen=True)
class PhaseRun:
    """One prefill or decode pass of a mode: time, synchronisation, energy by processor."""

    phase: str
    mode: str
    tokens: int
    seconds: float
    sync_s: float
    syncs: int
    prepare_s: float
    gpu_busy_s: float
    npu_busy_s: float
    gpu_j: float
    npu_j: float
    bytes: float
    matmul_s: float
    matmul_bytes: float
    flops: float
    kernels: tuple[KernelRun, ...] = field(default=())

    @property
    def joules(self) -> float:
        """Energy of both processors over the pass (idle draw included)."""
        return self.gpu_j + self.npu_j

    @property
    def avg_power_w(self) -> float:
        """Average power over the pass."""
        return self.joules / self.seconds if self.seconds > 0 else 0.0

    @property
    def matmul_gbps(self) -> float:
        """Memory bandwidth the SoC delivers while the Matmuls run (GB/s)."""
        return self.matmul_bytes / self.matmul_s / 1e9 if self.matmul_s > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """JSON-friendly totals of the pass."""
        return {
            "phase": self.phase,
            "mode": self.mode,
            "tokens": self.tokens,
            "token_kind": "prompt" if self.phase == "prefill" else "generated",
            "latency_ms": self.seconds * 1e3,
            "tok_s": self.tokens / self.seconds,
            "sync_ms": self.sync_s * 1e3,
            "syncs": self.syncs,
            "graph_prepare_ms": self.prepare_s * 1e3,
            "gpu_busy_ms": self.gpu_busy_s * 1e3,
            "npu_busy_ms": self.npu_busy_s * 1e3,
            "gpu_energy_j": self.gpu_j,
            "npu_energy_j": self.npu_j,
            "avg_power_w": self.avg_power_w,
            "energy_j_per_token": self.joules / self.tokens,
            "tok_s_per_w": (self.tokens / self.seconds) / self.avg_power_w
            if self.avg_power_w > 0
            else None,
            "matmul_bandwidth_gbps": self.matmul_gbps,
        }


class Decider:
    """Places and times every kernel of a pass for one mode (HeteroLLM §4.3 "decider").

    Plans are cached per (phase, token count); the caches live on the instance.
    """

    def __init__(
        self,
        soc: HeteroSoc,
        model: ModelSpec,
        mode: str = "hetero-tensor",
        *,
        static_graphs: str = "padding",
        fast_sync: bool = True,
        plan_for_fast_sync: bool = True,
    ) -> None:
        if mode not in MODES:
            raise SpecError("options.mode", f"must be one of {', '.join(MODES)}")
        if static_graphs not in STATIC_GRAPHS:
            raise SpecError("options.static_graphs", f"must be one of {', '.join(STATIC_GRAPHS)}")
        self.soc = soc
        self.model = model
        self.mode = mode
        self.static: StaticGraphs = static_graphs  # type: ignore[assignment]
        self.fast_sync = bool(fast_sync)
        plan_fast = self.fast_sync or bool(plan_for_fast_sync)
        self.plan_fast = plan_fast
        self.solvers = {
            phase: PartitionSolver(
                soc,
                self.handover_s(phase == "decode", fast=plan_fast),
                self.npu_last_s(phase == "decode", fast=plan_fast),
            )
            for phase in ("prefill", "decode")
        }
        self._prefill: dict[int, PhaseRun] = {}
        self._decode: dict[tuple[int, int], PhaseRun] = {}

    # --- synchronisation -----------------------------------------------------------------

    def boundary_s(
        self,
        a: str,
        b: str,
        *,
        decode: bool,
        fast: bool | None = None,
        npu_last: bool | None = None,
    ) -> float:
        """Cost of the boundary between a kernel on ``a`` and the next on ``b``.

        Conventional synchronisation copies the hand-over tensor (fixed ≈400 µs, §3.1) and,
        when a GPU kernel follows, refills the GPU queue the wait drained (50–100 µs, §3.1);
        a hand-over to a kernel wholly on the NPU submits nothing to the GPU, whose next
        kernel pays its refill at the NPU→GPU hand-over after it. With fast synchronisation
        only a GPU kernel waiting for NPU work pays (submission to an empty queue), unless
        the phase is GPU-dominant (decode) and the GPU's share of the previous kernel ended
        last (``npu_last`` false), so the next GPU kernel was already queued behind it
        (§4.2). ``npu_last`` defaults to whether ``a`` ran on the NPU alone.
        """
        if a == b and a != BOTH:
            return 0.0
        if npu_last is None:
            npu_last = a == NPU
        sync = self.soc.sync
        if not (self.fast_sync if fast is None else fast):
            refill = sync.conventional_s() - sync.copy_latency_us * 1e-6
            return sync.copy_latency_us * 1e-6 + (refill if GPU in b else 0.0)
        if GPU in b and NPU in a:
            return sync.fast_s(gpu_dominant=decode and GPU in a and not npu_last)
        return 0.0

    def handover_s(self, decode: bool, *, fast: bool) -> float:
        """The solver's ``T_sync + T_copy``: a partitioned kernel between GPU kernels."""
        return self.boundary_s(GPU, BOTH, decode=decode, fast=fast) + self.boundary_s(
            BOTH, GPU, decode=decode, fast=fast
        )

    def npu_last_s(self, decode: bool, *, fast: bool) -> float:
        """The solver's extra hand-over cost for a partition whose NPU share ends last: the
        refill of the drained GPU queue where the GPU's share would otherwise hide it."""
        return self.boundary_s(BOTH, GPU, decode=decode, fast=fast, npu_last=True) - (
            self.boundary_s(BOTH, GPU, decode=decode, fast=fast, npu_last=False)
        )

    # --- passes ----------------------------------------------------------------------------

    def prefill(self, seq: int) -> PhaseRun:
        """One prompt of ``seq`` tokens (its first token included)."""
        check_count("seq", seq, maximum=self.model.max_context)
        hit = self._prefill.get(seq)
        if hit is None:
            g = prefill_graph(
                self.model, [seq], self.soc.precision, fused_attention=self.soc.gpu.fused_attention
            )
            hit = self._decide(g, "prefill", seq)
            self._prefill[seq] = hit
        return hit

    def decode(self, batch: int, kv_tokens: int) -> PhaseRun:
        """One decode iteration of ``batch`` sequences over ``kv_tokens`` cached tokens."""
        key = (batch, kv_tokens)
        hit = self._decode.get(key)
        if hit is None:
            g = decode_graph(
                self.model,
                batch,
                kv_tokens,
                self.soc.precision,
                fused_attention=self.soc.gpu.fused_attention,
            )
            hit = self._decide(g, "decode", batch)
            if len(self._decode) > 65536:
                self._decode.clear()
            self._decode[key] = hit
        return hit

    # --- GPU / hetero modes --------------------------------------------------------------------

    def scopes(self, decode: bool) -> tuple[Scope, ...]:
        """Whole-pass plans the decider compares for this mode and phase, preferred first.

        ``hetero-tensor`` and ``hetero-layer`` also weigh the plans of the modes they contain
        (the solver's per-kernel ``T_sync`` is the paper's approximation; the boundaries a
        pass actually pays depend on its neighbouring kernels), so neither is ever slower
        than keeping every Matmul on one backend.
        """
        if self.mode == "gpu-only":
            return ("gpu",)
        if self.mode == "npu-only":
            return ("npu",)
        if self.mode == "hetero-layer":
            return ("layer", "npu", "gpu")
        return ("rows" if decode else "tensor", "layer", "npu", "gpu")

    def _decide(self, g: PhaseGraph, phase: str, tokens: int) -> PhaseRun:
        """Run every candidate plan under the synchronisation the plan is made for, keep the
        fastest (ties: the earlier, more heterogeneous one), and run it with the
        synchronisation in use."""
        runs = [
            self._run(g, phase, tokens, sc, fast=self.plan_fast)
            for sc in self.scopes(phase == "decode")
        ]
        best = min(range(len(runs)), key=lambda i: (runs[i].seconds, i))
        if self.plan_fast == self.fast_sync:
            return runs[best]
        return self._run(
            g, phase, tokens, self.scopes(phase == "decode")[best], fast=self.fast_sync
        )

    def _gemm_run(
        self, op_name: str, g: Gemm, repeat: int, decode: bool, scope: Scope
    ) -> KernelRun:
        solver = self.solvers["decode" if decode else "prefill"]
        p = solver.solve(g, scope, self.static, decode=decode)
        gpu = self.soc.gpu
        p_gpu = gpu.p_compute if p.gpu_compute_bound else gpu.p_memory
        idle_g = gpu.idle_power_w * (p.compute_s - p.gpu_busy_s)
        idle_n = self.soc.npu.idle_power_w * (p.compute_s - p.npu_busy_s)
        return KernelRun(
            op_name,
            OpKind.GEMM.value,
            repeat,
            p.procs,
            p.compute_s,
            p.gpu_busy_s,
            p.npu_busy_s,
            p_gpu * p.gpu_busy_s + idle_g,
            self.soc.npu.power_w * p.npu_busy_s + idle_n,
            p.gpu_bytes + p.npu_bytes,
            p,
        )

    def _gpu_run(self, t: OpTime, kind: str, nbytes: float) -> KernelRun:
        gpu = self.soc.gpu
        power = gpu.p_compute if t.bound == "compute" else gpu.p_memory
        return KernelRun(
            t.name,
            kind,
            t.repeat,
            GPU,
            t.seconds,
            t.seconds,
            0.0,
            power * t.seconds,
            self.soc.npu.idle_power_w * t.seconds,
            nbytes,
        )

    def _check_fits(self, g: PhaseGraph) -> None:
        """Weights, the KV cache of the pass and its largest operator's activations must fit
        the shared memory (CapacityError naming it otherwise), with the host's weight
        conversion buffer where the NPU runs prefill Matmuls."""
        npu = self.soc.npu
        workspace = max(op.act_read_bytes + op.act_write_bytes for op in g.ops)
        if g.phase is Phase.PREFILL and self.mode != "gpu-only":
            workspace += npu.conversion_buffer_bytes(self.model)
        need = (
            npu.weights_bytes(self.model)
            + g.kv_tokens * npu.kv_bytes_per_token(self.model)
            + workspace
        )
        check_capacity(npu.device, need, f"{self.model.slug} ({g.phase.value}, shared memory)")

    def _run(self, g: PhaseGraph, phase: str, tokens: int, scope: Scope, *, fast: bool) -> PhaseRun:
        """Time one pass with every Matmul placed within ``scope``."""
        decode = phase == "decode"
        self._check_fits(g)
        times = self.soc.gpu.op_times(g)
        runs: list[KernelRun] = []
        for op, t in zip(g.ops, times, strict=True):
            if op.kind is OpKind.GEMM:
                gemm = Gemm(op.name, op.rows, op.in_features, op.out_features)
                runs.append(self._gemm_run(op.name, gemm, op.repeat, decode, scope))
            else:
                runs.append(self._gpu_run(t, op.kind.value, op.bytes))
        pre, layer, post = runs[:1], runs[1:-2], runs[-2:]
        n_layers = g.n_layers
        bounds: list[tuple[str, bool, str, int]] = []
        for kernels, count in (
            ((pre[-1], layer[0]), 1),
            (layer, n_layers),
            ((layer[-1], layer[0]), n_layers - 1),
            ((layer[-1], post[0]), 1),
            ((post[0], post[1]), 1),
        ):
            bounds.extend((a, last, b, count) for a, last, b in handovers(kernels))
        sync_s = 0.0
        syncs = 0
        for a, last, b, count in bounds:
            syncs += count
            sync_s += self.boundary_s(a, b, decode=decode, fast=fast, npu_last=last) * count
        compute = sum(r.seconds * r.repeat for r in runs)
        gpu_busy = sum(r.gpu_busy_s * r.repeat for r in runs)
        npu_busy = sum(r.npu_busy_s * r.repeat for r in runs)
        # Idle draw while both wait on a synchronisation.
        idle_j = (self.soc.gpu.idle_power_w, self.soc.npu.idle_power_w)
        prepare = 0.0
        if not decode and any(
            r.partition is not None and r.partition.strategy == "online-prepare" for r in runs
        ):
            prepare = self.soc.npu.graph_prepare_s(self.model, tokens)
        seconds = compute + sync_s + prepare
        gemms = [r for r in runs if r.partition is not None]
        return PhaseRun(
            phase=phase,
            mode=self.mode,
            tokens=tokens,
            seconds=seconds,
            sync_s=sync_s,
            syncs=syncs,
            prepare_s=prepare,
            gpu_busy_s=gpu_busy,
            npu_busy_s=npu_busy,
            gpu_j=sum(r.gpu_j * r.repeat for r in runs) + idle_j[0] * (sync_s + prepare),
            npu_j=sum(r.npu_j * r.repeat for r in runs) + idle_j[1] * (sync_s + prepare),
            bytes=sum(r.bytes * r.repeat for r in runs),
            matmul_s=sum(r.seconds * r.repeat for r in gemms),
            matmul_bytes=sum(r.bytes * r.repeat for r in gemms),
            flops=g.flops,
            kernels=tuple(runs),
        )


def handovers(kernels: Sequence[KernelRun]) -> list[tuple[str, bool, str]]:
    """The GPU↔NPU hand-overs between consecutive ``kernels``: ``(from, npu_last, to)``.

    A kernel split over both processors scatters its input from the GPU side before it and
    gathers its output after it (§4.1.1, see the module notes), so two split kernels in a
    row hand over twice (the first one's gather, then the second one's scatter);
    otherwise a boundary hands over when its kernels run on different processors.
    ``npu_last`` says whether the NPU ended the kernel before the hand-over
    (:attr:`KernelRun.npu_last`)."""
    out: list[tuple[str, bool, str]] = []
    for ka, kb in pairwise(kernels):
        a, b, last = ka.procs, kb.procs, ka.npu_last
        if a == BOTH and b == BOTH:
            out.append((BOTH, last, GPU))
            out.append((GPU, False, BOTH))
        elif a != b:
            out.append((a, last, b))
    return out


def placement_table(run: PhaseRun) -> list[dict[str, Any]]:
    """The per-kernel backend placement of a pass (for charts)."""
    return [r.as_dict() for r in run.kernels]
