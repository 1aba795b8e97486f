"""Cost model of a mobile NPU: a weight-stationary systolic array behind static graphs.

HeteroLLM (§3.2) characterises the Hexagon NPU of the Snapdragon 8 Gen 3 by three effects,
all consequences of its matrix unit being a *weight-stationary* systolic array, plus the
static-graph constraint of its software stack (§4.1.1, §5.2.2):

* **Stage performance.** The unit works on tiles of the array's shape; a dimension that is
  not a multiple of the tile is padded, so latency is flat between multiples (Fig. 4).
* **Order sensitivity.** In ``[M, K] × [K, N]`` the *second* operand is the one held in the
  array ("weights preloaded into each PE … inputs fed"); every ``R × C`` tile of it must be
  loaded before the first operand's ``M`` rows stream through, and the array stalls while it
  loads ("weight stall"). ``[14336, 4096] × [4096, K]`` keeps the small activation
  ``[4096, K]`` stationary and streams the large weight, so each tile serves 14336 rows;
  the reversed ``[K, 4096] × [4096, 14336]`` must load ``14336 / K`` times as many tiles,
  each serving only ``K`` rows, and runs several times slower at the same FLOPs (Fig. 5:
  about 6×).
* **Shape sensitivity.** For a fixed FLOP count, a wider reduction dimension means a larger
  stationary operand, hence more tile loads per useful FLOP (FFN-down, §4.1.1).
* **Static graphs.** A graph is compiled for fixed shapes (``npu_static_shapes``); other
  sequence lengths are padded to a prepared shape or cut into several (§4.1.1). Preparing a
  graph online costs time growing with the tensors' size (Fig. 9, §5.2.2).

The time of one matrix product is

``max(compute, memory) + tiles × reload``

with ``compute = 2 · M̂ · K̂ · N̂ / (peak × compute_eff)`` over the padded shape (``M`` padded
to the stack's streaming block ``row_block``, ``K`` to the array's rows, ``N`` to its
columns), ``memory`` the operands' and result's bytes over the NPU's achievable bandwidth
(``bw_eff`` × the shared memory's peak; streaming overlaps compute), ``tiles = K̂/R · N̂/C``
stationary tiles and ``reload`` the stall per tile load (a fitted runtime parameter,
``simulations.core.calibration.npu_w4a16``).

Whole-model phases (:meth:`NpuModel.prefill`, :meth:`NpuModel.decode_step`) run every GEMM
in HeteroLLM's permuted order ``[out, in] × [in, tokens]`` (§4: the weight streams, the
activations stay in the array), pad prompts to the static shapes ("Padding", §5.2.2) and
run the other operators at the NPU's memory bandwidth.

Deviations: one reload cost per tile whatever its origin (on-chip or DRAM); no on-chip
capacity limit for the stationary operand; attention products run on the array like any
matmul (HeteroLLM runs them on the GPU, a policy decision); elementwise operators are
memory-bound; no thermal throttling. The model under-predicts the FFN-down penalty of
§4.1.1 (see the calibration script's residuals).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import OpKind, Precision, decode_graph, prefill_graph
from simulations.core.graph import weight_bytes as graph_weight_bytes
from simulations.core.spec import DeviceKind, DeviceSpec, ModelSpec, RuntimeProfile, check_count

from . import register_device_model
from .base import DeviceModel, PhaseCost

#: Runtime ``params`` the NPU model reads (anything else is rejected as a typo).
NPU_PARAMS: Mapping[str, str] = {
    "reload_us": "stall of the array per stationary-tile load, in µs (fitted)",
    "row_block": "rows of the streamed operand the stack processes per block; the streamed "
    "dimension is padded to a multiple of it (HeteroLLM §4.3: row partitions align to 256)",
    "graph_prep_base_ms": "online graph preparation: fixed cost per graph, ms (fitted)",
    "graph_prep_ms_per_melem": "online graph preparation: cost per million activation "
    "elements (input + output) of the graph's matmul, ms (fitted)",
    "active_power_w": "power drawn while this stack runs on the NPU, W",
    "sync_copy_latency_us": "GPU↔NPU hand-over: fixed cost of copying a tensor into the GPU's "
    "buffer (clEnqueueWriteBuffer), µs — read by memory.UnifiedMemorySync",
    "sync_empty_queue_submit_us": "GPU↔NPU hand-over: submitting a GPU kernel to an empty "
    "queue after a wait, µs — read by memory.UnifiedMemorySync",
    "sync_queued_submit_us": "GPU kernel submission behind a running kernel, µs — read by "
    "memory.UnifiedMemorySync",
}

_STATIONARY_BITS_DEFAULT = 16


@dataclass(frozen=True, slots=True)
class MatmulCost:
    """Cost of one ``[m, k] × [k, n]`` product on the NPU (second operand stationary)."""

    seconds: float
    compute_s: float
    memory_s: float
    reload_s: float
    tiles: int
    padded: tuple[int, int, int]
    flops: float
    bytes: float

    @property
    def achieved_tflops(self) -> float:
        """Useful (unpadded) TFLOP/s."""
        return self.flops / self.seconds / 1e12 if self.seconds > 0 else 0.0

    @property
    def utilisation(self) -> float:
        """Useful FLOPs over the FLOPs of the padded shape."""
        m, k, n = self.padded
        return self.flops / (2.0 * m * k * n)


def _ceil_to(x: int, step: int) -> int:
    return -(-x // step) * step


@register_device_model(DeviceKind.NPU)
class NpuModel(DeviceModel):
    """Weight-stationary NPU with static graphs (HeteroLLM §3.2, §4.1.1, §5.2.2).

    Deviations (see the module docstring): a single per-tile reload cost, no on-chip
    capacity limit, attention on the array, memory-bound elementwise operators.
    """

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        super().__init__(device, runtime)
        for key in runtime.params:
            if key not in NPU_PARAMS:
                raise SpecError(
                    f"{runtime.slug}.params.{key}",
                    f"unknown runtime parameter (known: {', '.join(sorted(NPU_PARAMS))})",
                )
        if device.npu_array_rows is None:
            raise SpecError(f"{device.slug}.npu_array_rows", "an NPU needs its array rows")
        if device.npu_array_cols is None:
            raise SpecError(f"{device.slug}.npu_array_cols", "an NPU needs its array columns")
        self.rows = int(device.npu_array_rows)
        self.cols = int(device.npu_array_cols)
        shapes = tuple(sorted(set(device.npu_static_shapes)))
        if not shapes:
            raise SpecError(f"{device.slug}.npu_static_shapes", "an NPU needs static shapes")
        self.static_shapes = shapes
        self.precision = Precision.of(runtime)
        self.peak_ops = device.peak_ops_per_s(runtime.act_bits, runtime.weight_bits)
        self.ops_rate = self.peak_ops * runtime.compute_eff
        self.bw = device.mem_bw_gbps * 1e9 * runtime.bw_eff
        self.reload_s = _nonneg(runtime, "reload_us", runtime.param("reload_us")) * 1e-6
        row_block = runtime.param("row_block")
        if not float(row_block).is_integer() or row_block < 1:
            raise SpecError(f"{runtime.slug}.params.row_block", "must be a positive integer")
        self.row_block = int(row_block)
        self.power_w = _nonneg(
            runtime, "active_power_w", runtime.param("active_power_w", device.tdp_w)
        )
        self._mm: dict[tuple[int, int, int, float, float, float], MatmulCost] = {}
        self._phase: dict[tuple[object, ...], PhaseCost] = {}

    # --- matrix products ---------------------------------------------------------------------

    @property
    def achievable_gbps(self) -> float:
        """Bandwidth the NPU reaches alone (``bw_eff`` × the memory's peak)."""
        return self.bw / 1e9

    def matmul_cost(
        self,
        m: int,
        k: int,
        n: int,
        *,
        a_bits: float = 16,
        b_bits: float = _STATIONARY_BITS_DEFAULT,
        out_bits: float = 16,
    ) -> MatmulCost:
        """Cost of ``[m, k] × [k, n]`` with the second operand held in the array.

        ``a_bits``, ``b_bits`` and ``out_bits`` are the element widths of the streamed
        operand, the stationary operand and the result in memory.
        """
        key = (m, k, n, float(a_bits), float(b_bits), float(out_bits))
        hit = self._mm.get(key)
        if hit is not None:
            return hit
        check_count("matmul.m", m, maximum=10**9)
        check_count("matmul.k", k, maximum=10**9)
        check_count("matmul.n", n, maximum=10**9)
        for name, bits in (("a_bits", a_bits), ("b_bits", b_bits), ("out_bits", out_bits)):
            if not (isinstance(bits, int | float) and 0 < bits <= 64):
                raise SpecError(f"matmul.{name}", "must be a bit width in (0, 64]")
        mp = _ceil_to(m, self.row_block)
        kp = _ceil_to(k, self.rows)
        np_ = _ceil_to(n, self.cols)
        tiles = (kp // self.rows) * (np_ // self.cols)
        compute = 2.0 * mp * kp * np_ / self.ops_rate
        nbytes = (m * k * a_bits + k * n * b_bits + m * n * out_bits) / 8.0
        memory = nbytes / self.bw
        reload = tiles * self.reload_s
        cost = MatmulCost(
            seconds=max(compute, memory) + reload,
            compute_s=compute,
            memory_s=memory,
            reload_s=reload,
            tiles=tiles,
            padded=(mp, kp, np_),
            flops=2.0 * m * k * n,
            bytes=nbytes,
        )
        self._mm[key] = cost
        return cost

    def matmul(self, m: int, k: int, n: int, **bits: float) -> float:
        """Seconds for ``[m, k] × [k, n]`` (second operand stationary); see
        :meth:`matmul_cost`. This is what the HeteroLLM partition solver calls."""
        return self.matmul_cost(m, k, n, **bits).seconds

    def linear_cost(
        self, tokens: int, in_features: int, out_features: int, *, permuted: bool = True
    ) -> MatmulCost:
        """A linear layer over ``tokens`` rows at the stack's precision.

        ``permuted`` (HeteroLLM §4's layout): ``[out, in] × [in, tokens]`` — the weight
        streams, the activations stay in the array. Otherwise ``[tokens, in] × [in, out]``
        with the weight stationary.
        """
        p = self.precision
        if permuted:
            return self.matmul_cost(
                out_features,
                in_features,
                tokens,
                a_bits=p.weight_bits,
                b_bits=p.act_bits,
                out_bits=p.act_bits,
            )
        return self.matmul_cost(
            tokens,
            in_features,
            out_features,
            a_bits=p.act_bits,
            b_bits=p.weight_bits,
            out_bits=p.act_bits,
        )

    def linear(
        self, tokens: int, in_features: int, out_features: int, *, permuted: bool = True
    ) -> float:
        """Seconds for a linear layer (see :meth:`linear_cost`)."""
        return self.linear_cost(tokens, in_features, out_features, permuted=permuted).seconds

    # --- static graphs -----------------------------------------------------------------------

    def static_shape_at_least(self, n: int) -> int | None:
        """The smallest prepared shape ≥ ``n`` (None when ``n`` exceeds every shape)."""
        check_count("seq", n, maximum=10**9)
        for s in self.static_shapes:
            if s >= n:
                return s
        return None

    def pad_plan(self, seq: int) -> tuple[int, ...]:
        """ "Padding" (HeteroLLM §5.2.2): graphs to run for a ``seq``-token prompt — chunks of
        the largest prepared shape, the remainder padded to the smallest shape that holds it."""
        check_count("seq", seq, maximum=10**9)
        biggest = self.static_shapes[-1]
        full, rest = divmod(seq, biggest)
        plan = [biggest] * full
        if rest:
            s = self.static_shape_at_least(rest)
            plan.append(biggest if s is None else s)
        return tuple(plan)

    def cut_plan(self, seq: int) -> tuple[tuple[int, ...], int]:
        """Multi-sequence-length cutting (HeteroLLM §4.1.1): prepared shapes taken greedily,
        largest first, while they fit; returns ``(shapes, margin)`` where ``margin`` tokens
        (fewer than the smallest shape) are left for another processor or for padding."""
        check_count("seq", seq, maximum=10**9)
        plan: list[int] = []
        left = seq
        for s in reversed(self.static_shapes):
            while left >= s:
                plan.append(s)
                left -= s
        return tuple(plan), left

    def graph_prepare_s(self, model: ModelSpec, seq: int) -> float:
        """Seconds to prepare, online, the graphs of one decoder layer for ``seq`` tokens.

        One graph per distinct GEMM shape of the layer (Llama-3-8B: 4 — QO, KV, gate/up,
        down — HeteroLLM §5.2.2's "typically 4 graphs"); each costs
        ``graph_prep_base_ms + graph_prep_ms_per_melem × (in + out) × seq / 1e6``: the
        search space grows with the activation tensors (Fig. 9).
        """
        check_count("seq", seq, maximum=10**9)
        base = self.runtime.param("graph_prep_base_ms") * 1e-3
        per = self.runtime.param("graph_prep_ms_per_melem") * 1e-3
        shapes = {(k, n) for _, k, n in _layer_gemms(model)}
        return sum(base + per * (k + n) * seq / 1e6 for k, n in shapes)

    # --- whole-model phases ------------------------------------------------------------------

    def weights_bytes(self, model: ModelSpec) -> float:
        """Weights at the stack's precision (norms FP16)."""
        return graph_weight_bytes(model, self.precision)

    def check_fits(self, model: ModelSpec, kv_tokens: int = 0) -> None:
        """Raise CapacityError when weights plus ``kv_tokens`` of KV cache exceed memory."""
        need = self.weights_bytes(model) + kv_tokens * self.kv_bytes_per_token(model)
        cap = self.memory_capacity_bytes
        if need > cap:
            raise CapacityError(
                f"{self.device.slug}.memory[0].capacity_gb",
                f"{model.slug} needs {need / 1e9:.2f} GB (weights + KV cache) but the "
                f"memory holds {cap / 1e9:.2f} GB",
            )

    def segment_s(self, model: ModelSpec, tokens: int, context: int = 0) -> float:
        """Seconds of one static-graph pass over ``tokens`` (a prepared shape, padding
        included) whose queries also attend to ``context`` earlier tokens; all layers,
        without the LM head."""
        key = ("seg", model, tokens, context)
        hit = self._phase.get(key)
        if hit is not None:
            return hit.seconds
        check_count("tokens", tokens, maximum=10**7)
        check_count("context", context, minimum=0, maximum=10**9)
        p = self.precision
        layer = sum(self.linear(tokens, k, n) for _, k, n in _layer_gemms(model))
        keys = context + tokens
        d = model.head_dim
        # QKᵀ: Q [t, d] × Kᵀ [d, keys]; PV: P [t, keys] × V [keys, d]; per query head.
        score = self.matmul_cost(
            tokens, d, keys, a_bits=p.act_bits, b_bits=p.kv_bits, out_bits=p.act_bits
        )
        value = self.matmul_cost(
            tokens, keys, d, a_bits=p.act_bits, b_bits=p.kv_bits, out_bits=p.act_bits
        )
        layer += model.n_heads * (score.seconds + value.seconds)
        layer += self._elementwise_s(model, tokens, keys)
        total = layer * model.n_layers
        self._phase[key] = PhaseCost(total, total * self.power_w, 0.0, 0.0)
        return total

    def _elementwise_s(self, model: ModelSpec, tokens: int, keys: int) -> float:
        """Norms, RoPE, softmax, activation and residuals of one layer at memory speed."""
        g = prefill_graph(model, [tokens], self.precision)
        nbytes = 0.0
        for op in g.layer_ops:
            if op.kind in (OpKind.GEMM, OpKind.ATTN_SCORE, OpKind.ATTN_VALUE, OpKind.ATTENTION):
                continue
            if op.kind is OpKind.SOFTMAX:
                nbytes += 2.0 * model.n_heads * tokens * keys * self.precision.a
            else:
                nbytes += op.bytes
        return nbytes / self.bw

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """NPU-only prefill: each prompt runs alone through prepared graphs ("Padding",
        HeteroLLM §5.2.2); chunks after the first attend to the earlier chunks."""
        lens = tuple(seq_lens)
        key = ("prefill", model, lens)
        hit = self._phase.get(key)
        if hit is not None:
            return hit
        g = prefill_graph(model, lens, self.precision)
        self.check_fits(model, sum(lens))
        seconds = 0.0
        for s in lens:
            done = 0
            for shape in self.pad_plan(s):
                seconds += self.segment_s(model, shape, done)
                done += shape
        seconds += len(lens) * self.linear(1, model.hidden_size, model.vocab_size)
        cost = PhaseCost(seconds, seconds * self.power_w, g.flops, g.bytes)
        self._phase[key] = cost
        return cost

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One decode iteration on the NPU: GEMMs as ``[out, in] × [in, batch]`` (the weight
        streams), attention per sequence and KV head as ``K [ctx, d] × Qᵀ [d, group]`` and
        ``Vᵀ [d, ctx] × Pᵀ [ctx, group]`` (the cache streams), ``ctx`` the mean context."""
        key = ("decode", model, batch, kv_tokens)
        hit = self._phase.get(key)
        if hit is not None:
            return hit
        g = decode_graph(model, batch, kv_tokens, self.precision)
        self.check_fits(model, kv_tokens + batch)
        p = self.precision
        layer = sum(self.linear(batch, k, n) for _, k, n in _layer_gemms(model))
        ctx = max(1, math.ceil((kv_tokens + batch) / batch))
        d, group = model.head_dim, model.gqa_group
        score = self.matmul_cost(ctx, d, group, a_bits=p.kv_bits, b_bits=p.act_bits)
        value = self.matmul_cost(d, ctx, group, a_bits=p.kv_bits, b_bits=p.act_bits)
        layer += batch * model.n_kv_heads * (score.seconds + value.seconds)
        other = sum(
            op.bytes
            for op in g.layer_ops
            if op.kind not in (OpKind.GEMM, OpKind.ATTN_SCORE, OpKind.ATTN_VALUE, OpKind.ATTENTION)
        )
        layer += other / self.bw
        seconds = layer * model.n_layers + self.linear(batch, model.hidden_size, model.vocab_size)
        cost = PhaseCost(seconds, seconds * self.power_w, g.flops, g.bytes)
        self._phase[key] = cost
        return cost


def _nonneg(runtime: RuntimeProfile, key: str, value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise SpecError(f"{runtime.slug}.params.{key}", "must be a finite, non-negative number")
    return value


@lru_cache(maxsize=256)
def _layer_gemms(model: ModelSpec) -> tuple[tuple[str, int, int], ...]:
    """(name, in, out) of each GEMM of one decoder layer, from the operator graph."""
    g = prefill_graph(model, [1])
    return tuple(
        (op.name, op.in_features, op.out_features) for op in g.layer_ops if op.kind is OpKind.GEMM
    )
