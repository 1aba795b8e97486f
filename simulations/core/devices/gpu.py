"""GPU cost model: a roofline per operator, host launch overhead per kernel, a memory-capacity
check and a power model by activity.

Used for every GPU in the catalog (A100, V100S, H100, T4, A10G, the phone's Adreno GPU) with
whatever runtime profile runs on it; nothing in here is specific to one device or stack.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from simulations.core.errors import SpecError
from simulations.core.graph import (
    NONLINEAR_OPS,
    DecodeFrame,
    GraphTotals,
    Op,
    OpKind,
    Phase,
    PhaseGraph,
    Precision,
    decode_frame,
    decode_graph,
    mixed_counts,
    mixed_frame,
    mixed_window_counts,
    moe_ops,
    prefill_graph,
)
from simulations.core.graph import (
    weight_bytes as graph_weight_bytes,
)
from simulations.core.spec import DeviceKind, DeviceSpec, ModelSpec, RuntimeProfile, check_count

from . import register_device_model
from .base import DeviceModel, PhaseCost, StreamFloor, check_capacity, check_params, frac_param
from .gpu_kernels import (
    KERNEL_PARAMS,
    MEASURED_KERNELS,
    KernelCosts,
    KernelParams,
    layer_extra_ops,
    sampler_op,
    uses_kernel_model,
)

#: Runtime ``params`` the GPU model reads (anything else is a typo and rejected).
GPU_PARAMS: Mapping[str, str] = {
    "kernels_per_pass": "kernels the host issues per forward pass outside the layers "
    "(embedding, final norm, LM head, sampling and bookkeeping of the generate loop)",
    "fused_attention": "1 if the stack runs a fused (FlashAttention-style) attention kernel, "
    "0 for eager attention that materialises the score matrix",
    "power_compute_frac": "power while executing compute-bound kernels, as a fraction of TDP",
    "power_memory_frac": "power while executing memory-bound kernels, as a fraction of TDP",
    "power_wait_frac": "power while no kernel runs (waiting for the host, or idle with the "
    "model loaded), as a fraction of TDP",
    "dequant_ops_per_weight": "tensor-op equivalents a weight-only quantised stack (W4A16) "
    "spends dequantising each weight element of a GEMM, once per pass",
    "allreduce_algorithm": "the all-reduce a tensor-parallel group of this stack runs: 0 ring "
    "(NCCL), 1 one-shot (vLLM's custom all-reduce); see devices/parallel.py",
}


@dataclass(frozen=True, slots=True)
class OpTime:
    """Time of one operator instance on a device and what bounds it."""

    name: str
    seconds: float
    compute_s: float
    memory_s: float
    repeat: int

    @property
    def bound(self) -> str:
        """``compute`` or ``memory``: the roofline side that sets the kernel's duration."""
        return "compute" if self.compute_s >= self.memory_s else "memory"


@dataclass(frozen=True, slots=True)
class KernelTime:
    """One kernel of a pass in a :class:`PassBreakdown`: ``seconds`` over the whole pass
    (all layers), ``per_layer_s`` for a kernel that runs once per layer (else None)."""

    name: str
    ops: tuple[str, ...]
    seconds: float
    per_layer_s: float | None


@dataclass(frozen=True, slots=True)
class PassBreakdown:
    """Where the time of one forward pass goes (:meth:`GpuModel.breakdown`).

    ``kernels`` are the layers' kernels, named as the stack's measured kernels (the layout
    of ``data/measurements/*_operators.csv``) under the kernel-class model, else by graph
    operator; ``extras`` is everything else, in seconds: the graph operators outside the
    layers (``embedding``, ``final_norm``, ``lm_head``), layer operators the measured set
    does not time (``unmeasured:<op>``), the ``sampler`` and ``bookkeeping`` kernels, the
    per-layer idle time (``layer_fixed``), the host's step (``host``) and the launch cost of
    an eager stack (``launch``). ``seconds`` is the pass's time (what ``prefill`` /
    ``decode_step`` charge): the sum of both parts.
    """

    phase: str
    kernels: tuple[KernelTime, ...]
    extras: Mapping[str, float]
    seconds: float

    @property
    def kernels_s(self) -> float:
        """Seconds of the layers' kernels (all layers)."""
        return sum(k.seconds for k in self.kernels)

    @property
    def extras_s(self) -> float:
        """Seconds outside the layers' kernels."""
        return sum(self.extras.values())

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly milliseconds."""
        return {
            "phase": self.phase,
            "kernels": [
                {
                    "name": k.name,
                    "ops": list(k.ops),
                    "ms": k.seconds * 1e3,
                    "per_layer_ms": None if k.per_layer_s is None else k.per_layer_s * 1e3,
                }
                for k in self.kernels
            ],
            "kernels_ms": self.kernels_s * 1e3,
            "extras_ms": {k: v * 1e3 for k, v in self.extras.items()},
            "total_ms": self.seconds * 1e3,
        }


@dataclass(frozen=True, slots=True)
class _DecodePlan:
    """What a decode step costs outside attention (per model and batch): the timeline after
    the operators before attention, each later operator's increments, the host-only time,
    the largest activation workspace and the memory of the weights."""

    frame: DecodeFrame
    per_op: float
    host_only: float
    head: tuple[float, float, float]  # (seconds, compute-bound, memory-bound) after the head
    tail: tuple[tuple[bool, float, float], ...]  # (compute-bound, kernel time, seconds)
    workspace: float
    weights: float
    kv_per_token: float


#: One operator of a mixed pass as affine functions of ``(1, T, n, p, kv)`` — the pass's
#: tokens, sequences, attended pairs and KV tokens read: compute seconds, memory seconds,
#: FLOPs × repeat, bytes × repeat, activation bytes (each a 5-tuple), and its repeat.
_Row = tuple[
    tuple[float, ...],
    tuple[float, ...],
    tuple[float, ...],
    tuple[float, ...],
    tuple[float, ...],
    float,
]


@dataclass(slots=True)
class _MixedLin:
    """A mixed pass's cost as affine functions of its counts (:meth:`GpuModel._mixed_lin`):
    the operators that depend on the tokens only (``by_tokens``), on the sequences only
    (``by_seqs``) and attention (``attention``); each part's accumulated seconds are
    memoised per count (``t_memo``, ``n_memo``)."""

    by_tokens: tuple[_Row, ...]
    by_seqs: tuple[_Row, ...]
    attention: tuple[_Row, ...]
    per_op: float
    host: tuple[float, ...]
    weights: float
    kv_per_token: float
    t_memo: dict[int, tuple[float, float, float, float, float, float]]
    n_memo: dict[int, tuple[float, float, float, float, float, float]]
    #: A mixture of experts' routed-expert GEMMs are costed exactly per token count (their
    #: touched experts saturate: not affine), added to the ``by_tokens`` part.
    moe_model: ModelSpec | None = None
    #: The sliding-window layers' attention rows (evaluated at the window's counts) and
    #: the window (tokens; 0: none).
    attention_win: tuple[_Row, ...] = ()
    window: int = 0


def _rows_cost(
    rows: tuple[_Row, ...], x: tuple[int, int, int, int, int], per_op: float
) -> tuple[float, float, float, float, float, float]:
    """(seconds, compute-bound, memory-bound, FLOPs, bytes, largest activation bytes) of
    ``rows`` at the counts ``x``."""
    seconds = t_comp = t_mem = flops = nbytes = act = 0.0
    _, t, n, p, kv = x
    for cc, mc, fc, bc, ac, r in rows:
        # _lin inlined (the engine's hot path)
        c = cc[0] + cc[1] * t + cc[2] * n + cc[3] * p + cc[4] * kv
        m = mc[0] + mc[1] * t + mc[2] * n + mc[3] * p + mc[4] * kv
        if c >= m:
            t_comp += c * r
            seconds += (c if c > per_op else per_op) * r
        else:
            t_mem += m * r
            seconds += (m if m > per_op else per_op) * r
        flops += fc[0] + fc[1] * t + fc[2] * n + fc[3] * p + fc[4] * kv
        nbytes += bc[0] + bc[1] * t + bc[2] * n + bc[3] * p + bc[4] * kv
        a = ac[0] + ac[1] * t + ac[2] * n + ac[3] * p + ac[4] * kv
        if a > act:
            act = a
    return seconds, t_comp, t_mem, flops, nbytes, act


@register_device_model(DeviceKind.GPU)
class GpuModel(DeviceModel):
    """Roofline GPU with per-kernel host overhead (GLITCHES §III-A, Tables I–II).

    *Time.* Every operator of the graph (:mod:`simulations.core.graph`) runs as one kernel
    whose GPU time is the roofline ``max(FLOPs / (peak × compute_eff), bytes / (bandwidth
    × bw_eff))``; the peak is the device's dense tensor peak for the stack's precision pair.
    The host issues ``kernels_per_layer`` kernels per layer (the graph's operators plus glue
    kernels that do no modelled work: casts, reshapes, RoPE slicing …) and
    ``kernels_per_pass`` per pass, each costing ``kernel_launch_us`` of host time. A kernel
    lasts ``max(GPU time, kernel_launch_us)``: with an eager Python stack the host does not
    run ahead of the GPU, so a kernel shorter than the host's dispatch cost leaves the GPU
    waiting. (GLITCHES Table I supports this reading: V100S decode is slower than A100 decode
    by about the extra weight-streaming time, which an asynchronous host would hide.) When a
    fused stack issues fewer kernels than the graph has operators, the host cost per
    operator is ``kernel_launch_us × kernels_per_layer / operators``.

    *Batches.* Decode of ``batch`` sequences reads the weights once and each sequence's KV
    cache; prefill packs the prompts (GEMMs over all tokens, attention within each prompt).
    Each operator is placed on its own roofline side, so large batches turn GEMMs
    compute-bound while attention stays memory-bound.

    *Power.* The device draws ``power_compute_frac``, ``power_memory_frac`` or
    ``power_wait_frac`` of its TDP while it executes compute-bound kernels, memory-bound
    kernels or waits for the host; energy is the time-weighted sum. The fractions are fitted
    per stack (GLITCHES' calibration, ``policies/glitches/calibration/gpu_fp16.py``).

    *Memory.* Weights plus the KV cache of every resident token plus the largest operator's
    activations must fit the device's primary memory, else CapacityError.

    *Kernel classes.* A profile that sets the parameters of
    :mod:`~simulations.core.devices.gpu_kernels` (a fused serving stack such as
    ``vllm-fp16``) replaces the single roofline by per-kernel-class rates: a GEMM efficiency
    that saturates with the tokens in the batch, FlashAttention prefill and paged decode
    attention, bandwidth-bound elementwise kernels with a floor, and the pass's costs outside
    the layers (sampler, host step). The plain roofline above is then not used; a profile
    that sets none of them (``hf-eager-fp16``) is costed exactly as described above.

    Deviations: no GEMM-shape efficiency curve under the plain roofline (one compute_eff per
    stack), no kernel run-ahead, no overlap of independent kernels (streams), no clock
    throttling; glue kernels have no GPU time; idle draw is ``power_wait_frac × TDP``
    (datasheets publish no idle power).
    """

    #: A decode step is the batch's fixed operators plus, per attention operator,
    #: max(compute, memory, launch/floor) of terms affine in the cached tokens: convex.
    decode_convex_in_kv: bool = True
    #: vLLM's tensor, pipeline and expert parallelism over NVLink / PCIe groups of GPUs.
    model_parallel: ClassVar[bool] = True
    #: A fused stack's kernel classes (:mod:`.gpu_kernels`) are fitted by the calibration.
    kernel_calibration: ClassVar[bool] = True

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        super().__init__(device, runtime)
        check_params(runtime, (*GPU_PARAMS, *KERNEL_PARAMS))
        self.precision = Precision.of(runtime)
        self.peak_ops = device.peak_ops_per_s(
            runtime.act_bits, runtime.weight_bits, fp8=runtime.fp8
        )
        self.ops_rate = self.peak_ops * runtime.compute_eff
        self.bw = device.mem_bw_gbps * 1e9 * runtime.bw_eff
        self.launch_s = runtime.kernel_launch_us * 1e-6
        self.kernels_per_pass = int(runtime.param("kernels_per_pass", 0.0))
        if self.kernels_per_pass < 0:
            raise SpecError(f"{runtime.slug}.params.kernels_per_pass", "must not be negative")
        self.fused_attention = bool(runtime.param("fused_attention", 0.0))
        # Weight-only quantisation (W4A16): each GEMM dequantises its weights to FP16 once
        # per pass, charged as compute at the stack's rate (0 for every other stack).
        self.dequant_ops = runtime.param("dequant_ops_per_weight", 0.0)
        if self.dequant_ops < 0 or (self.dequant_ops and runtime.weight_bits >= runtime.act_bits):
            raise SpecError(
                f"{runtime.slug}.params.dequant_ops_per_weight",
                "must be >= 0, and only a weight-only quantised stack (weight_bits < "
                "act_bits) dequantises",
            )
        self._dequant_rate = self.peak_ops * runtime.compute_eff
        #: The kernel-class model (None: the plain roofline of GLITCHES §III-A).
        self.kernels: KernelCosts | None = None
        #: Shortest time of any kernel (0 under the plain roofline, where only the host's
        #: launch cost bounds a kernel).
        self.kernel_floor_s = 0.0
        if uses_kernel_model(runtime):
            if not self.fused_attention:
                raise SpecError(
                    f"{runtime.slug}.params.fused_attention",
                    "the kernel-class GPU model needs fused attention (1)",
                )
            self.kernels = KernelCosts(device, self.precision, KernelParams.of(runtime))
            self.kernel_floor_s = self.kernels.floor_s
            # The best rates any kernel achieves: lower bounds on every operator's time
            # (what rate-based screens divide by).
            self.ops_rate = self.kernels.best_ops_rate
            self.bw = self.kernels.best_bw
        # The fractions are checked here; the watts (p_compute, p_memory, p_wait) follow
        # from the board power on first use, so a device whose vendor publishes no power
        # still has a roofline. Its placements always carry a quote (DevicePlacement).
        self._power_fracs = (
            frac_param(runtime, "power_compute_frac", 1.0),
            frac_param(runtime, "power_memory_frac", 1.0),
            frac_param(runtime, "power_wait_frac", 0.0),
        )
        self._cache: dict[tuple[object, ...], PhaseCost] = {}
        self._plans: dict[tuple[ModelSpec, int], _DecodePlan] = {}
        self._mixed_lins: dict[ModelSpec, _MixedLin] = {}
        self._last_lin: tuple[ModelSpec, _MixedLin] | None = None
        self._tail_arrays: dict[int, tuple[_DecodePlan, np.ndarray, np.ndarray, np.ndarray]] = {}
        #: Whether the capacity checks count the cached tokens (see :meth:`with_shared_kv`).
        self.counts_kv = True

    @cached_property
    def p_compute(self) -> float:
        """Power while compute-bound, W (``power_compute_frac`` × the board power)."""
        return self._power_fracs[0] * self.device.board_power_w

    @cached_property
    def p_memory(self) -> float:
        """Power while memory-bound, W (``power_memory_frac`` × the board power)."""
        return self._power_fracs[1] * self.device.board_power_w

    @cached_property
    def p_wait(self) -> float:
        """Power while waiting on the host, W (``power_wait_frac`` × the board power)."""
        return self._power_fracs[2] * self.device.board_power_w

    # --- public API ----------------------------------------------------------------------

    def weights_bytes(self, model: ModelSpec) -> float:
        """Weights at the stack's precision (norms FP16)."""
        return graph_weight_bytes(model, self.precision)

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """Cost of prefilling ``seq_lens`` in one packed forward pass."""
        g = prefill_graph(model, seq_lens, self.precision, fused_attention=self.fused_attention)
        key = ("p", model, g.tokens, g.sequences, g.attended)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self._check_fits(model, g, g.tokens)
        cost = self._cost(g)
        self._remember(key, cost)
        return cost

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """Cost of one decode iteration of ``batch`` sequences over ``kv_tokens`` cached."""
        check_count("batch", batch)
        check_count("kv_tokens", kv_tokens, minimum=0, maximum=10**12)
        key = ("d", model, batch, kv_tokens)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        plan = self._decode_plan(model, batch)
        attn = plan.frame.attention(kv_tokens)
        workspace = max(plan.workspace, *(op.act_read_bytes + op.act_write_bytes for op in attn))
        if self.counts_kv:
            needed = plan.weights + plan.kv_per_token * (kv_tokens + batch) + workspace
        else:
            needed = plan.weights + workspace
        check_capacity(self.device, needed, f"{model.slug} (decode)")
        # The same accumulation as _split over decode_graph(...).ops, in the same order, with
        # the operators around attention (the same at every step) replayed from the plan.
        per_op = plan.per_op
        if self.kernels is None:
            acc = _accumulate(plan.head, (self._op_terms(op, per_op) for op in attn))
        else:
            att = kv_tokens + batch
            acc = _accumulate(
                plan.head, (self._op_terms_k(op, per_op, True, batch, att) for op in attn)
            )
        seconds, t_comp, t_mem = _accumulate(acc, plan.tail)
        seconds += plan.host_only
        t_wait = max(0.0, seconds - t_comp - t_mem)
        cost = self._priced(plan.frame.totals(attn), seconds, t_comp, t_mem, t_wait)
        self._remember(key, cost)
        return cost

    def with_shared_kv(self) -> GpuModel:
        """This model without the KV cache in its capacity checks (the scheduler's KV pool
        bounds it; with prefix caching sequences share blocks, which a step's cached-token
        count cannot tell). Shares this model's caches."""
        twin = copy.copy(self)
        twin.counts_kv = False
        return twin

    def decode_steps(
        self, model: ModelSpec, batch: int, kv_tokens: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Seconds and joules of :meth:`decode_step` at every element of ``kv_tokens``, with
        numpy arrays in place of the cached-token count: the same operators, the same float
        operations in the same order (``a + 0.0`` stands for a term not added), so every
        value equals the scalar call's bit for bit."""
        check_count("batch", batch)
        kv = np.asarray(kv_tokens, dtype=np.int64)
        if kv.size == 0:
            return np.zeros(0), np.zeros(0)
        if int(kv.min()) < 0 or int(kv.max()) > 10**12:
            check_count("kv_tokens", int(kv.min() if kv.min() < 0 else kv.max()), minimum=0)
        plan = self._decode_plan(model, batch)
        attn = plan.frame.attention(kv)  # type: ignore[arg-type]  # arrays in, arrays out
        workspace: Any = plan.workspace
        for op in attn:
            workspace = np.maximum(workspace, op.act_read_bytes + op.act_write_bytes)
        if self.counts_kv:
            needed = plan.weights + plan.kv_per_token * (kv + batch) + workspace
        else:
            needed = plan.weights + workspace + 0 * kv  # an array, like kv
        over = np.flatnonzero(needed > self.device.memory_capacity_bytes)
        if over.size:
            self.decode_step(model, batch, int(kv[over[0]]))  # raises the scalar CapacityError
        per_op = plan.per_op
        seconds, t_comp, t_mem = plan.head
        s_arr: Any = seconds
        c_arr: Any = t_comp
        m_arr: Any = t_mem
        att = kv + batch
        for op in attn:
            if self.kernels is None:
                c = op.flops / self.ops_rate
                m = op.bytes / self.bw
            else:
                c, m = self.kernels.cm(op, True, batch, att)  # type: ignore[arg-type]
            r = op.repeat
            comp = c >= m
            x = np.where(comp, c * r, m * r)
            y = np.where(comp, np.where(c > per_op, c, per_op), np.where(m > per_op, m, per_op)) * r
            c_arr = c_arr + np.where(comp, x, 0.0)
            m_arr = m_arr + np.where(comp, 0.0, x)
            s_arr = s_arr + y
        # The tail's terms added one after the other, as the scalar step adds them:
        # np.add.accumulate runs strictly left to right along a row (unlike np.sum).
        ys, xc, xm = self._tail_rows(plan)
        s_arr = _add_in_order(s_arr, ys, kv.shape)
        c_arr = _add_in_order(c_arr, xc, kv.shape)
        m_arr = _add_in_order(m_arr, xm, kv.shape)
        s_arr = s_arr + plan.host_only
        t_wait = np.maximum(0.0, s_arr - c_arr - m_arr)
        joules = self.p_compute * c_arr + self.p_memory * m_arr + self.p_wait * t_wait
        shape = kv.shape
        return (
            np.broadcast_to(np.asarray(s_arr, dtype=np.float64), shape).copy(),
            np.broadcast_to(np.asarray(joules, dtype=np.float64), shape).copy(),
        )

    def chunked_step(
        self,
        model: ModelSpec,
        batch: int,
        kv_tokens: int,
        chunks: Sequence[tuple[int, int]],
    ) -> PhaseCost:
        """Cost of one chunked-prefill iteration: the GEMMs and elementwise kernels run once
        over the decode tokens and the chunks' tokens together (the decodes ride along the
        prefill, Sarathi-Serve §4), attention is one prefill-class (FlashAttention) kernel
        over every query's cached and new keys (:func:`~simulations.core.graph.mixed_counts`),
        the LM head and sampler run on every sequence of the pass (vLLM computes the logits
        of a partial prompt and discards them), and the host's step is paid once. A single
        chunk from an empty cache and no decodes costs what :meth:`prefill` of it costs (to
        rounding: the operators outside attention are summed as affine functions)."""
        if not (type(batch) is int and batch >= 0):  # the engine's hot path: checks inline
            check_count("batch", batch, minimum=0)
        if not (type(kv_tokens) is int and 0 <= kv_tokens <= 10**12):
            check_count("kv_tokens", kv_tokens, minimum=0, maximum=10**12)
        tokens, sequences, attended, kv_read = mixed_counts(
            batch, kv_tokens, chunks, self.fused_attention
        )
        # Not memoised per call: a mixed iteration's counts rarely repeat (its parts are).
        lin = self._mixed_lin(model)
        per_op = lin.per_op
        x = (1, tokens, sequences, attended, kv_read)
        part_t = lin.t_memo.get(tokens)
        if part_t is None:
            if len(lin.t_memo) >= 65536:
                lin.t_memo.clear()
            part_t = _rows_cost(lin.by_tokens, x, per_op)
            if lin.moe_model is not None:
                part_t = self._moe_part(lin.moe_model, tokens, per_op, part_t)
            lin.t_memo[tokens] = part_t
        part_n = lin.n_memo.get(sequences)
        if part_n is None:
            if len(lin.n_memo) >= 65536:
                lin.n_memo.clear()
            part_n = lin.n_memo[sequences] = _rows_cost(lin.by_seqs, x, per_op)
        part_a = _rows_cost(lin.attention, x, per_op)
        if lin.window:
            wp, wkv = mixed_window_counts(batch, kv_tokens, chunks, lin.window)
            part_w = _rows_cost(lin.attention_win, (1, tokens, sequences, wp, wkv), per_op)
            part_a = (
                part_a[0] + part_w[0],
                part_a[1] + part_w[1],
                part_a[2] + part_w[2],
                part_a[3] + part_w[3],
                part_a[4] + part_w[4],
                max(part_a[5], part_w[5]),
            )
        workspace = max(part_t[5], part_n[5], part_a[5])
        needed = lin.weights + (lin.kv_per_token * kv_read if self.counts_kv else 0.0) + workspace
        if needed > self.device.memory_capacity_bytes:
            check_capacity(self.device, needed, f"{model.slug} (chunked prefill)")
        seconds = part_t[0] + part_a[0] + part_n[0] + lin.host[0] + lin.host[2] * sequences
        t_comp = part_t[1] + part_a[1] + part_n[1]
        t_mem = part_t[2] + part_a[2] + part_n[2]
        t_wait = max(0.0, seconds - t_comp - t_mem)
        joules = self.p_compute * t_comp + self.p_memory * t_mem + self.p_wait * t_wait
        cost = PhaseCost(
            seconds=seconds,
            joules=joules,
            flops=part_t[3] + part_a[3] + part_n[3],
            bytes=part_t[4] + part_a[4] + part_n[4],
        )
        return cost

    @property
    def idle_power_w(self) -> float:
        """Power of the GPU with the model loaded and no kernel running."""
        return max(self.p_wait, self.device.idle_w)

    def compute_rate_bound(self) -> float:
        """The stack's achieved compute rate: every operator's roofline is at least its FLOPs
        over it (kernels never run faster than ``peak × compute_eff``)."""
        return float(self.ops_rate)

    def floor_power_w(self) -> float:
        """The lowest of the powers the model charges (idle, compute-bound, memory-bound,
        waiting)."""
        return float(min(self.idle_power_w, self.p_compute, self.p_memory, self.p_wait))

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor:
        """Every decode step reads the weights of all operators but the embedding (whose
        rows are gathered per token) once for the whole batch, and each sequence's cached
        tokens, at the stack's achieved bandwidth."""
        g = decode_graph(model, 1, 1, self.precision, fused_attention=self.fused_attention)
        shared = sum(op.weight_bytes * op.repeat for op in g.ops if op.kind is not OpKind.EMBEDDING)
        return StreamFloor(shared, model.kv_bytes_per_token(self.runtime.kv_bits), self.bw)

    def op_times(self, graph: PhaseGraph) -> list[OpTime]:
        """Time of each operator instance of ``graph`` without host overhead or the kernel
        floor (:attr:`kernel_floor_s`): the roofline, or the kernel-class times."""
        k = self.kernels
        if k is None:
            return [self._op_time(op) for op in graph.ops]
        decode = graph.phase is Phase.DECODE
        out = []
        for op in graph.ops:
            c, m = k.cm(op, decode, graph.tokens, graph.attended)
            if self.dequant_ops:
                c += self._dequant_s(op)
            out.append(OpTime(op.name, max(c, m), c, m, op.repeat))
        return out

    def timeline(self, graph: PhaseGraph) -> dict[str, float]:
        """Seconds of the pass split into compute-bound, memory-bound and waiting time."""
        seconds, t_comp, t_mem, t_wait = self._split(graph)
        return {
            "seconds": seconds,
            "compute_bound_s": t_comp,
            "memory_bound_s": t_mem,
            "host_wait_s": t_wait,
        }

    def layer_extra_s(self, model: ModelSpec, tokens: int) -> float:
        """One layer's time beyond its graph operators for ``tokens`` tokens: the stack's
        extra kernels and idle time under the kernel-class model (0 under the roofline,
        whose glue kernels cost host launches only)."""
        k = self.kernels
        if k is None or tokens <= 0:
            return 0.0
        floor = max(self._host(1, 1)[0], k.floor_s)
        q_dim = model.n_heads * model.head_dim
        extra = sum(
            max(k.seconds(op, False, tokens, 0), floor)
            for op in layer_extra_ops(model.n_layers, q_dim, tokens, self.precision)
        )
        return extra + k.layer_fixed_s

    def pass_extra_s(self, model: ModelSpec, sequences: int, *, step: bool = True) -> float:
        """A pass's time outside the graph and the launches under the kernel-class model
        (0 under the roofline): the sampler over ``sequences`` sequences' logits, the
        bookkeeping kernels and the host's step (without its fixed share when ``step`` is
        False: a second sub-batch of the same iteration)."""
        k = self.kernels
        if k is None or sequences <= 0:
            return 0.0
        floor = max(self._host(1, 1)[0], k.floor_s)
        sampler = sampler_op(model.vocab_size, sequences, self.precision)
        return (
            max(k.seconds(sampler, False, sequences, 0), floor)
            + k.bookkeeping_s(self.kernels_per_pass)
            + k.host_s(sequences, step=step)
        )

    def breakdown(self, graph: PhaseGraph) -> PassBreakdown:
        """Where the time of the pass ``graph`` goes, kernel by kernel (see
        :class:`PassBreakdown`); its ``seconds`` is what the pass costs."""
        per_op, host_only = self._host(len(graph.layer_ops), graph.n_layers)
        k = self.kernels
        decode = graph.phase is Phase.DECODE
        if k is None:
            floor = per_op

            def time(op: Op) -> float:
                c = op.flops / self.ops_rate + (self._dequant_s(op) if self.dequant_ops else 0.0)
                return max(c, op.bytes / self.bw, floor)

        else:
            floor = max(per_op, k.floor_s)

            def time(op: Op) -> float:
                if not self.dequant_ops:
                    return max(k.seconds(op, decode, graph.tokens, graph.attended), floor)
                c, m = k.cm(op, decode, graph.tokens, graph.attended)
                return max(c + self._dequant_s(op), m, floor)

        extras: dict[str, float] = {}
        for op in (*graph.pre_ops, *graph.post_ops):
            extras[op.name] = time(op) * op.repeat
        by_op = {op.name: op for op in graph.layer_ops}
        kernels: list[KernelTime] = []
        if k is None:
            groups: list[tuple[str, tuple[Op, ...]]] = [(op.name, (op,)) for op in graph.layer_ops]
        else:
            groups = []
            seen: set[str] = set()
            layer_ops = (*graph.layer_ops, *self._layer_extras(graph))
            by_op.update((op.name, op) for op in layer_ops)
            for name, members in MEASURED_KERNELS.items():
                if (name == "attn_prefill" and decode) or (name == "attn_decode" and not decode):
                    continue
                ops = tuple(by_op[m] for m in members if m in by_op)
                if ops:
                    groups.append((name, ops))
                    seen.update(op.name for op in ops)
            for op in layer_ops:
                if op.name not in seen:
                    extras[f"unmeasured:{op.name}"] = time(op) * op.repeat
        n_layers = graph.n_layers
        for name, ops in groups:
            per_layer = sum(time(op) for op in ops)
            kernels.append(
                KernelTime(name, tuple(op.name for op in ops), per_layer * n_layers, per_layer)
            )
        if k is None:
            extras["launch"] = host_only
        else:
            sampler = sampler_op(graph.ops[-1].out_features, graph.sequences, self.precision)
            extras["sampler"] = time(sampler)
            extras["bookkeeping"] = k.bookkeeping_s(self.kernels_per_pass)
            extras["layer_fixed"] = k.layer_fixed_s * n_layers
            extras["host"] = k.host_s(graph.sequences)
            if host_only:
                extras["launch"] = host_only
        return PassBreakdown(graph.phase.value, tuple(kernels), extras, self._split(graph)[0])

    # --- internals -----------------------------------------------------------------------

    def _dequant_s(self, op: Op) -> float:
        """Seconds a weight-only quantised GEMM spends dequantising its weights."""
        if op.kind is OpKind.EMBEDDING:
            return 0.0
        return op.weight_bytes / self.precision.w * self.dequant_ops / self._dequant_rate

    def _op_time(self, op: Op) -> OpTime:
        c = op.flops / self.ops_rate
        if self.dequant_ops:
            c += self._dequant_s(op)
        m = op.bytes / self.bw
        return OpTime(op.name, max(c, m), c, m, op.repeat)

    def _host(self, n_ops: int, n_layers: int) -> tuple[float, float]:
        """(host time per graph operator, host-only time per pass) for a pass whose layers
        have ``n_ops`` graph operators."""
        kpl = self.runtime.kernels_per_layer
        launch = self.launch_s
        # Host time per graph operator; glue kernels beyond the graph's operators cost a
        # launch each and do no modelled GPU work. kernels_per_layer = 0 means the layers are
        # replayed as one captured graph (CUDA graphs): no per-operator host cost.
        if kpl == 0:
            per_op = 0.0
        elif kpl >= n_ops:
            per_op = launch
        else:
            per_op = launch * kpl / n_ops
        host_only = (max(0, kpl - n_ops) * n_layers + self.kernels_per_pass) * launch
        return per_op, host_only

    def _op_terms(self, op: Op, per_op: float) -> tuple[bool, float, float]:
        """(compute-bound?, kernel time × repeat, seconds × repeat) of one operator."""
        c = op.flops / self.ops_rate
        if self.dequant_ops:
            c += self._dequant_s(op)
        m = op.bytes / self.bw
        r = op.repeat
        if c >= m:
            return True, c * r, (c if c > per_op else per_op) * r
        return False, m * r, (m if m > per_op else per_op) * r

    def _op_terms_k(
        self, op: Op, per_op: float, decode: bool, tokens: int, attended: int
    ) -> tuple[bool, float, float]:
        """:meth:`_op_terms` under the kernel-class model (``per_op``: the larger of the
        launch share and the kernel floor)."""
        assert self.kernels is not None
        c, m = self.kernels.cm(op, decode, tokens, attended)
        if self.dequant_ops:
            c += self._dequant_s(op)
        r = op.repeat
        if c >= m:
            return True, c * r, (c if c > per_op else per_op) * r
        return False, m * r, (m if m > per_op else per_op) * r

    def _layer_extras(self, g: PhaseGraph) -> tuple[Op, ...]:
        """The stack's per-layer kernels outside the graph, for the pass ``g``."""
        o_proj = next(op for op in g.layer_ops if op.name == "o_proj")
        return layer_extra_ops(g.n_layers, o_proj.in_features, g.tokens, self.precision)

    def _extra_terms(
        self, g: PhaseGraph, per_op: float, host_only: float
    ) -> tuple[list[tuple[bool, float, float]], float]:
        """Under the kernel-class model: the terms of the kernels outside the graph (the
        layers' extra kernels, the sampler) and the pass's host-only seconds (launches,
        layer idle time, bookkeeping kernels, the host's step)."""
        k = self.kernels
        assert k is not None
        sampler = sampler_op(g.ops[-1].out_features, g.sequences, self.precision)
        ops = (*self._layer_extras(g), sampler)
        terms = [self._op_terms_k(op, per_op, False, g.tokens, 0) for op in ops]
        host = (
            host_only
            + k.layer_fixed_s * g.n_layers
            + k.bookkeeping_s(self.kernels_per_pass)
            + k.host_s(g.sequences)
        )
        return terms, host

    def _split(self, g: PhaseGraph) -> tuple[float, float, float, float]:
        """(seconds, compute-bound, memory-bound, waiting) seconds of one pass."""
        per_op, host_only = self._host(len(g.layer_ops), g.n_layers)
        if self.kernels is None:
            terms: Iterable[tuple[bool, float, float]] = (
                self._op_terms(op, per_op) for op in g.ops
            )
        else:
            per_op = max(per_op, self.kernels.floor_s)
            decode = g.phase is Phase.DECODE
            extra, host_only = self._extra_terms(g, per_op, host_only)
            terms = [
                *(self._op_terms_k(op, per_op, decode, g.tokens, g.attended) for op in g.ops),
                *extra,
            ]
        seconds, t_comp, t_mem = _accumulate((0.0, 0.0, 0.0), terms)
        seconds += host_only
        # Waiting is what is left once the kernels' own time is taken out (never negative).
        t_wait = max(0.0, seconds - t_comp - t_mem)
        return seconds, t_comp, t_mem, t_wait

    def _cost(self, g: PhaseGraph) -> PhaseCost:
        return self._priced(g, *self._split(g))

    def _priced(
        self,
        g: PhaseGraph | GraphTotals,
        seconds: float,
        t_comp: float,
        t_mem: float,
        t_wait: float,
    ) -> PhaseCost:
        joules = self.p_compute * t_comp + self.p_memory * t_mem + self.p_wait * t_wait
        return PhaseCost(seconds=seconds, joules=joules, flops=g.flops, bytes=g.bytes)

    def _decode_plan(self, model: ModelSpec, batch: int) -> _DecodePlan:
        plan = self._plans.get((model, batch))
        if plan is not None:
            return plan
        frame = decode_frame(model, batch, self.precision, fused_attention=self.fused_attention)
        n_attn = len(frame.attention(0))
        # Layer operators: all but the embedding (head) and final norm + LM head (tail).
        n_ops = len(frame.head) - 1 + n_attn + len(frame.tail) - 2
        per_op, host_only = self._host(n_ops, model.n_layers)
        if self.kernels is None:
            head = _accumulate((0.0, 0.0, 0.0), (self._op_terms(op, per_op) for op in frame.head))
            tail = tuple(self._op_terms(op, per_op) for op in frame.tail)
        else:
            # Tokens and attended pairs only matter to attention, which is not in head or
            # tail; the kernels outside the graph follow the tail, as in _split.
            per_op = max(per_op, self.kernels.floor_s)
            head = _accumulate(
                (0.0, 0.0, 0.0),
                (self._op_terms_k(op, per_op, True, batch, 0) for op in frame.head),
            )
            extra, host_only = self._extra_terms(frame.graph(0), per_op, host_only)
            tail = (
                *(self._op_terms_k(op, per_op, True, batch, 0) for op in frame.tail),
                *extra,
            )
        if len(self._plans) >= 4096:
            self._plans.clear()
        plan = self._plans[(model, batch)] = _DecodePlan(
            frame,
            per_op,
            host_only,
            head,
            tail,
            max(op.act_read_bytes + op.act_write_bytes for op in (*frame.head, *frame.tail)),
            self.weights_bytes(model),
            model.kv_bytes_per_token(self.runtime.kv_bits),
        )
        return plan

    def _tail_rows(self, plan: _DecodePlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A decode plan's tail terms as rows: charged seconds, compute-bound and
        memory-bound kernel seconds (each in the order the scalar step adds them)."""
        rows = self._tail_arrays.get(id(plan))
        if rows is None or rows[0] is not plan:
            tail = plan.tail
            rows = (
                plan,
                np.array([y for _, _, y in tail], dtype=np.float64),
                np.array([x for c, x, _ in tail if c], dtype=np.float64),
                np.array([x for c, x, _ in tail if not c], dtype=np.float64),
            )
            if len(self._tail_arrays) >= 4096:
                self._tail_arrays.clear()
            self._tail_arrays[id(plan)] = rows
        return rows[1], rows[2], rows[3]

    def _mixed_lin(self, model: ModelSpec) -> _MixedLin:
        """Every operator of a mixed pass as affine functions of ``(1, T, n, p, kv)`` (its
        FLOPs and bytes are, and so are the roofline's and the kernel model's compute and
        memory times), read off five passes differing in one count each."""
        last = self._last_lin
        if last is not None and last[0] is model:
            return last[1]  # the engine asks for one model: skip hashing the spec
        lin = self._mixed_lins.get(model)
        if lin is not None:
            self._last_lin = (model, lin)
            return lin
        base = (1, 2, 1, 1, 1)
        points = [base] + [
            tuple(v + (1 if i == j else 0) for i, v in enumerate(base)) for j in range(1, 5)
        ]
        table: list[list[tuple[float, float, float, float, float, float]]] = []
        kinds: list[str] = []
        hosts: list[float] = []
        per_op = 0.0
        for pt in points:
            _, t, n, p, kv = pt
            frame = mixed_frame(model, t, n, self.precision, fused_attention=self.fused_attention)
            g = frame.graph(p, kv)
            per_op, host_only = self._host(len(g.layer_ops), g.n_layers)
            ops = [
                (op, "graph") for op in (*frame.head, *frame.tail) if op.name not in NONLINEAR_OPS
            ]
            ops += [
                (op, "attn_w" if op.name.endswith("_swa") else "attn")
                for op in frame.attention(p, kv)
            ]
            if self.kernels is not None:
                k = self.kernels
                per_op = max(per_op, k.floor_s)
                sampler = sampler_op(g.ops[-1].out_features, g.sequences, self.precision)
                ops += [(op, "extra") for op in (*self._layer_extras(g), sampler)]
                host_only = (
                    host_only
                    + k.layer_fixed_s * g.n_layers
                    + k.bookkeeping_s(self.kernels_per_pass)
                    + k.host_s(g.sequences)
                )
            row_vals = []
            for op, kind in ops:
                if self.kernels is None:
                    c, m = op.flops / self.ops_rate, op.bytes / self.bw
                else:
                    c, m = self.kernels.cm(op, False, t, p)
                counted = kind != "extra"  # graph totals hold the graph's operators only
                row_vals.append(
                    (
                        c,
                        m,
                        op.flops * op.repeat if counted else 0.0,
                        op.bytes * op.repeat if counted else 0.0,
                        op.act_read_bytes + op.act_write_bytes,
                        float(op.repeat),
                    )
                )
            table.append(row_vals)
            hosts.append(host_only)
            kinds = [kind for _, kind in ops]
        rows: list[_Row] = []
        for i in range(len(table[0])):
            coefs = []
            for q in range(5):
                v0 = table[0][i][q]
                d = [table[j][i][q] - v0 for j in range(1, 5)]
                const = v0 - sum(dj * bj for dj, bj in zip(d, base[1:], strict=True))
                coefs.append((const, *d))
            rows.append((coefs[0], coefs[1], coefs[2], coefs[3], coefs[4], table[0][i][5]))
        by_tokens, by_seqs, attention, attention_win = [], [], [], []
        for row, kind in zip(rows, kinds, strict=True):
            if kind == "attn":
                attention.append(row)
            elif kind == "attn_w":
                attention_win.append(row)
            elif any(abs(c[2]) > 0.0 for c in row[:5]):
                by_seqs.append(row)  # the final norm, the LM head, the sampler
            else:
                by_tokens.append(row)
        host_per_seq = hosts[2] - hosts[0]
        lin = self._mixed_lins[model] = _MixedLin(
            by_tokens=tuple(by_tokens),
            by_seqs=tuple(by_seqs),
            attention=tuple(attention),
            per_op=per_op,
            host=(hosts[0] - host_per_seq * base[2], 0.0, host_per_seq),
            weights=self.weights_bytes(model),
            kv_per_token=model.kv_bytes_per_token(self.runtime.kv_bits),
            t_memo={},
            n_memo={},
            moe_model=model if model.moe is not None else None,
            attention_win=tuple(attention_win),
            window=(
                model.sliding_window.window_tokens
                if model.sliding_window is not None and attention_win
                else 0
            ),
        )
        self._last_lin = (model, lin)
        return lin

    def _moe_part(
        self,
        model: ModelSpec,
        tokens: int,
        per_op: float,
        acc: tuple[float, float, float, float, float, float],
    ) -> tuple[float, float, float, float, float, float]:
        """``acc`` (a :func:`_rows_cost` part) plus the routed experts' GEMMs of a mixed
        pass of ``tokens`` tokens, costed from their operators."""
        seconds, t_comp, t_mem, flops, nbytes, act = acc
        for op in moe_ops(model, tokens, self.precision):
            if self.kernels is None:
                c, m = op.flops / self.ops_rate, op.bytes / self.bw
            else:
                c, m = self.kernels.cm(op, False, tokens, 0)
            if self.dequant_ops:
                c += self._dequant_s(op)
            r = op.repeat
            if c >= m:
                t_comp += c * r
                seconds += (c if c > per_op else per_op) * r
            else:
                t_mem += m * r
                seconds += (m if m > per_op else per_op) * r
            flops += op.flops * r
            nbytes += op.bytes * r
            act = max(act, op.act_read_bytes + op.act_write_bytes)
        return seconds, t_comp, t_mem, flops, nbytes, act

    def _check_fits(self, model: ModelSpec, g: PhaseGraph, resident_tokens: int) -> None:
        workspace = max((op.act_read_bytes + op.act_write_bytes) for op in g.ops)
        needed = (
            self.weights_bytes(model)
            + model.kv_bytes_per_token(self.runtime.kv_bits) * resident_tokens
            + workspace
        )
        check_capacity(self.device, needed, f"{model.slug} ({g.phase.value})")

    def _remember(self, key: tuple[object, ...], cost: PhaseCost) -> None:
        if len(self._cache) >= 65536:
            self._cache.clear()
        self._cache[key] = cost


def _add_in_order(start: Any, terms: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``start`` (an array of ``shape`` or a scalar) plus each of ``terms`` in turn, left to
    right, for every element: the scalar loop's float additions, vectorised."""
    if terms.size == 0:
        return np.broadcast_to(np.asarray(start, dtype=np.float64), shape)
    grid = np.empty((*shape, terms.size + 1), dtype=np.float64)
    grid[..., 0] = start
    grid[..., 1:] = terms
    return np.add.accumulate(grid, axis=-1)[..., -1]


def _accumulate(
    acc: tuple[float, float, float], terms: Iterable[tuple[bool, float, float]]
) -> tuple[float, float, float]:
    """Add operators' ``(compute-bound?, kernel seconds, charged seconds)`` terms, in order,
    to ``(seconds, compute-bound seconds, memory-bound seconds)``.

    One accumulation for whole passes and for decode steps replayed from a plan: the order
    of the float additions is what keeps the two bit-identical.
    """
    seconds, t_comp, t_mem = acc
    for comp, x, y in terms:
        if comp:
            t_comp += x
        else:
            t_mem += x
        seconds += y
    return seconds, t_comp, t_mem


def roofline_time(
    device: DeviceSpec, runtime: RuntimeProfile, flops: float, nbytes: float
) -> float:
    """Seconds of ``flops`` and ``nbytes`` on the stack's achieved roofline (no overhead)."""
    if not (math.isfinite(flops) and math.isfinite(nbytes)) or flops < 0 or nbytes < 0:
        raise SpecError("work", "FLOPs and bytes must be finite and non-negative")
    peak = (
        device.peak_ops_per_s(runtime.act_bits, runtime.weight_bits, fp8=runtime.fp8)
        * runtime.compute_eff
    )
    bw = device.mem_bw_gbps * 1e9 * runtime.bw_eff
    return max(flops / peak, nbytes / bw)
