"""Cost model of a mobile NPU: a weight-stationary systolic array behind static graphs.

HeteroLLM (§3.2) characterises the Hexagon NPU of the Snapdragon 8 Gen 3 by three effects,
all consequences of its matrix unit being a *weight-stationary* systolic array (Fig. 3:
"weights are preloaded into each PE prior to the computation … weights remain stationary
while inputs are fed … results are stored in on-chip SRAM or directly forwarded to the
subsequent systolic array unit"), plus the static-graph constraint of its software stack
(§4.1.1, §5.2.2).

**What is stationary.** In ``[M, K] × [K, N]`` the *second* operand is held in the PEs and
the ``M`` rows of the first stream through. In HeteroLLM's permuted order (§4:
``[M,N]×[N,K] → [[K,N]×[N,M]]ᵀ``) a linear layer runs as ``[out, in] × [in, tokens]``: the
activations are stationary and the model weight streams. The reversed order of Fig. 5,
``[K, 4096] × [4096, 14336]``, holds the large weight instead and streams only ``K`` rows.

**Mechanism.** Partial sums are forwarded from array to array (Fig. 3), so a stationary block
spans the whole reduction depth ``K`` of the product. One block serves one pass of the
``M`` streamed rows (``M`` row-times at the array's rate); swapping in the next block cannot
overlap the pass that uses the current one — the array "stalls" for the weights (§1's
"weight-stall") — and costs time proportional to the block's depth: ``α·K`` row-times
(the stationary rows are shifted in through the chain and the partial-sum wavefront must
drain through it). The first block is loaded before any pass uses the array, while the
streamed operand starts arriving from memory; only swaps stall (§3.2: the overhead is loading
the stationary operand "more frequently"; when it "fits perfectly" there is none). Over the
``B = N̂ / 32`` stationary blocks of a product the array's efficiency is therefore

``e = B·M̂ / (B·M̂ + (B − 1)·α·K̂)``  (→ ``M̂ / (M̂ + α·K̂)`` for many blocks)

and the time of one product ``max(2·M̂·K̂·N̂ / (peak × compute_eff × e), bytes / bw) +
launch``. The streamed operand and the result move with double buffering, so memory
overlaps compute; ``bytes`` are the operands' and the result's bytes once, at the
achievable bandwidth (``bw_eff`` × the shared memory's peak, HeteroLLM §3.3).

This one mechanism gives each characteristic of §3.2:

* **Stage performance** (Fig. 4): dimensions are padded — ``K`` to the array's rows, ``N``
  to its columns (32 × 32, §3.2), ``M`` to the stack's streaming block ``row_block``
  (256, §4.3) — so latency is flat between multiples.
* **Order sensitivity** (Fig. 5): ``[14336, 4096] × [4096, K]`` streams 14336 rows per
  block (``e`` ≈ 0.64 at the fitted α), the reversed order only ``K`` (``e`` ≈ 0.11 at
  ``K`` = 1024): ≈6× slower at equal FLOPs. With an unbounded stationary operand the rows
  per block are all the array ever gets, and the NPU falls towards GPU speed (§3.2).
* **Shape sensitivity** (§3.2, FFN-down §4.1.1): at equal FLOPs, the ratio of streamed
  rows to reduction depth sets ``e`` — "the ratio between row and column sizes" (§3.2).
  FFN-down after permutation, ``[4096, 14336] × [14336, K]``, has ``M/K`` = 0.29 against
  3.5 for FFN-up: ≈5× slower, ≈2× the GPU ("only 0.5× to 1.5× improvement", §4.1.1).
  The efficiency depends on the ratio, not on the model's width, so InternLM-1.8B and
  Llama-8B run at similar NPU efficiency (as their Fig. 13 speeds imply).

**Decode graphs** (fewer tokens than the smallest prepared prefill shape) run the NPU's
integer path: HeteroLLM "only utilizes NPU's TOPS during the decoding phase, as NPU
currently does not support W4A16 for decoding" (§5.1, footnote 2), so their compute uses
the INT8 peak; the same array mechanism applies. With one token the array computes a padded
32-column tile held as one stationary block, so nothing is swapped and a decode Matmul
streams its weight at the NPU's own bandwidth — one processor alone, 40–45 GB/s (Fig. 6,
§3.3) — less the graph launch.

**Prefill weights.** A prefill graph computes in FP16 and takes its weights at
``prefill_weight_bits`` (16 for the QNN stack): the NPU has no W4A16 kernel (§5.1 footnote 2)
and the CPU handles "dequantization" (§4; §6: W4A16 "dequantizes [weights] to FLOAT for
computation"). Where that width differs from the stored one, the host converts a layer's
weights a layer ahead of the NPU; its traffic (stored read + converted write) streams
beside the NPU's reads, so a product moves all of it at what two streaming processors get of
the shared memory (:class:`~simulations.core.memory.SharedMemoryBus`, each alone at §3.3's
single-processor rate: ≈58 GB/s, as §5.3's GPU + NPU 59.1 GB/s).
At short sequences the NPU is then memory-bound on FP16 weights — close to the GPU, which
reads INT4 (§4.1.1: "when the sequence length is short … a similar performance compared to
the GPU"). Assumption: the paper does not say where the FP16 weights come from; a
per-layer conversion is the reading under which the INT4 model alone fits the phone.

**Graph launch.** Every graph execution costs ``launch_us`` of host-to-NPU invocation before
the array starts (a fitted runtime parameter; HeteroLLM gives no figure).

**Static graphs.** A graph is compiled for fixed shapes (the device's
``params.static_shapes``); other sequence lengths are padded to a prepared shape or cut
into several (§4.1.1). Preparing a
graph online costs time growing with the tensors' size (Fig. 9, §5.2.2).

``compute_eff``, ``stall_per_depth`` (α) and ``launch_us`` are fitted by HeteroLLM's
calibration (``policies/heterollm/calibration/npu_w4a16.py``; the first two jointly on four
single-operator observations of §1/§3.2/§4.1.1, the third on the §5.3 decode speed-ups).

Whole-model phases (:meth:`NpuModel.prefill`, :meth:`NpuModel.decode_step`) run every GEMM
in the permuted order, pad prompts to the static shapes ("Padding", §5.2.2) and run the
other operators at the NPU's memory bandwidth.

Deviations: the block-swap stall is one constant per row of reduction depth (the real
array's chain length, buffering and tiling are not published); the stationary operand has
no on-chip capacity limit; attention products run on the array like any matmul (HeteroLLM
runs them on the GPU, a policy decision); elementwise operators are memory-bound; W4A16
dequantisation costs nothing beyond the array model; no thermal throttling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from simulations.core.errors import SpecError
from simulations.core.graph import OpKind, Precision, decode_graph, prefill_graph
from simulations.core.graph import weight_bytes as graph_weight_bytes
from simulations.core.memory import SharedMemoryBus
from simulations.core.options import OptionSpec
from simulations.core.spec import DeviceKind, DeviceSpec, ModelSpec, RuntimeProfile, check_count

from . import register_device_model
from .base import DeviceModel, PhaseCost, StreamFloor, check_params

#: Runtime ``params`` the NPU model reads (anything else is rejected as a typo).
NPU_PARAMS: Mapping[str, str] = {
    "stall_per_depth": "row-times the array stalls per row of reduction depth when it swaps "
    "in a stationary block (α of e = M / (M + α·K); fitted)",
    "launch_us": "host-to-NPU invocation cost of one graph execution, µs (fitted)",
    "row_block": "rows of the streamed operand the stack processes per block; the streamed "
    "dimension is padded to a multiple of it (HeteroLLM §4.3: row partitions align to 256)",
    "graph_prep_base_ms": "online graph preparation: fixed cost per graph, ms (fitted)",
    "graph_prep_ms_per_melem": "online graph preparation: cost per million activation "
    "elements (input + output) of the graph's matmul, ms (fitted)",
    "prefill_weight_bits": "bits per weight a prefill graph reads: the width its matmul "
    "takes the weight in; when it differs from the stored weight_bits the host converts each "
    "layer's weights first and that pass shares the memory (default: weight_bits, no pass)",
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
    """Cost of one ``[m, k] × [k, n]`` product on the NPU (second operand stationary).

    ``compute_s`` includes the block-swap stalls (``stall_s`` of it), ``efficiency`` is the
    array's ``B·M̂ / (B·M̂ + (B − 1)·α·K̂)`` over its ``B`` stationary blocks, ``tiles``
    the stationary 32 × 32 tiles, ``launch_s`` the graph invocation;
    ``seconds = max(compute_s, memory_s) + launch_s``.
    """

    seconds: float
    compute_s: float
    memory_s: float
    stall_s: float
    launch_s: float
    efficiency: float
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

    Array efficiency ``B·M̂ / (B·M̂ + (B − 1)·α·K̂)`` from the block-swap stall over the
    reduction depth (``B`` stationary blocks, the first loaded without a stall),
    padding to the array and the stack's row block, memory overlapped by double buffering,
    INT8 path for decode graphs (§5.1 footnote 2), FP16 weights converted by the host for
    prefill graphs (§4, §6), a launch cost per graph execution.
    Deviations (see the module docstring): one stall constant per row of depth, no on-chip
    capacity limit, attention on the array, memory-bound elementwise operators.
    """

    params = (
        OptionSpec(
            "array_rows",
            int,
            None,
            "systolic array rows (processing elements)",
            minimum=1,
            maximum=10**6,
            required=True,
        ),
        OptionSpec(
            "array_cols",
            int,
            None,
            "systolic array columns (processing elements)",
            minimum=1,
            maximum=10**6,
            required=True,
        ),
        OptionSpec(
            "static_shapes",
            tuple,
            (),
            "sequence lengths of the prepared static graphs",
            minimum=1,
            maximum=10**9,
            required=True,
            unit="tokens",
            items=int,
        ),
    )

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        super().__init__(device, runtime)
        check_params(runtime, NPU_PARAMS)
        p = self.device_params
        self.rows = int(p["array_rows"])
        self.cols = int(p["array_cols"])
        shapes = tuple(sorted(set(p["static_shapes"])))
        if not shapes:
            raise SpecError(f"{device.slug}.params.static_shapes", "an NPU needs static shapes")
        self.static_shapes = shapes
        self.precision = Precision.of(runtime)
        self.peak_ops = device.peak_ops_per_s(runtime.act_bits, runtime.weight_bits)
        self.ops_rate = self.peak_ops * runtime.compute_eff
        self.bw = device.mem_bw_gbps * 1e9 * runtime.bw_eff
        self.int_ops_rate = device.peak_ops_per_s(8, runtime.weight_bits) * runtime.compute_eff
        self.stall_per_depth = _nonneg(runtime, "stall_per_depth", runtime.param("stall_per_depth"))
        self.launch_s = _nonneg(runtime, "launch_us", runtime.param("launch_us", 0.0)) * 1e-6
        row_block = runtime.param("row_block")
        if not float(row_block).is_integer() or row_block < 1:
            raise SpecError(f"{runtime.slug}.params.row_block", "must be a positive integer")
        self.row_block = int(row_block)
        # The stack's own power is checked here; without one the board's is read on first
        # use (power_w), so an NPU whose vendor publishes no power still has a roofline.
        self._active_power_w = (
            _nonneg(runtime, "active_power_w", runtime.param("active_power_w"))
            if "active_power_w" in runtime.params
            else None
        )
        graph_bits = runtime.param("prefill_weight_bits", float(runtime.weight_bits))
        if not (math.isfinite(graph_bits) and 0 < graph_bits <= 64):
            raise SpecError(
                f"{runtime.slug}.params.prefill_weight_bits", "must be a bit width in (0, 64]"
            )
        self.prefill_weight_bits = graph_bits
        # The host's conversion pass and the NPU's reads stream concurrently on the shared
        # memory: two processors, each alone at the single-processor rate of HeteroLLM §3.3
        # ("one processor (e.g., CPU, GPU or NPU) … 40 to 45 GB/s", the NPU's bw_eff), share
        # what SharedMemoryBus gives two streams (≈59 GB/s, §5.3's GPU+NPU figure).
        self.conversion_bw = (
            SharedMemoryBus.of(device).combined_gbps([self.bw / 1e9, self.bw / 1e9]) * 1e9
        )
        self._mm: dict[tuple[int, int, int, float, float, float, bool], MatmulCost] = {}
        self._converted: dict[tuple[int, int, int, bool], MatmulCost] = {}
        self._phase: dict[tuple[object, ...], PhaseCost] = {}

    # --- what the capacity planner asks ------------------------------------------------------

    def compute_rate_bound(self) -> float | None:
        """None: phone SoCs are not searched by the planner (a SoC is not bought by the
        count), so the NPU model states no per-operator compute floor."""
        return None

    @cached_property
    def power_w(self) -> float:
        """Power while this stack runs, W: the profile's ``active_power_w``, else the board
        power."""
        if self._active_power_w is not None:
            return self._active_power_w
        return _nonneg(self.runtime, "active_power_w", self.device.board_power_w)

    def floor_power_w(self) -> float:
        """0.0: no power floor is claimed."""
        return 0.0

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: see :meth:`compute_rate_bound`."""
        return None

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
        integer: bool = False,
    ) -> MatmulCost:
        """Cost of ``[m, k] × [k, n]`` with the second operand held in the array.

        ``a_bits``, ``b_bits`` and ``out_bits`` are the element widths of the streamed
        operand, the stationary operand and the result in memory; ``integer`` runs the
        product on the NPU's INT8 path (decode graphs, HeteroLLM §5.1 footnote 2).
        """
        key = (m, k, n, float(a_bits), float(b_bits), float(out_bits), bool(integer))
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
        rate = self.int_ops_rate if integer else self.ops_rate
        ideal = 2.0 * mp * kp * np_ / rate
        # A stationary block spans the depth kp and one column tile and serves one pass of
        # the mp streamed rows. Swapping in the *next* block costs α·kp row-times the pass
        # cannot hide (the weight stall, §3.2: the cost of loading the stationary operand
        # "more frequently"); the first block is loaded while the streamed operand starts
        # arriving, as when the stationary operand "fits perfectly" (one block: no stall).
        blocks = np_ // self.cols
        stalled = self.stall_per_depth * kp * (blocks - 1)
        efficiency = blocks * mp / (blocks * mp + stalled)
        compute = ideal / efficiency
        nbytes = (m * k * a_bits + k * n * b_bits + m * n * out_bits) / 8.0
        memory = nbytes / self.bw
        cost = MatmulCost(
            seconds=max(compute, memory) + self.launch_s,
            compute_s=compute,
            memory_s=memory,
            stall_s=compute - ideal,
            launch_s=self.launch_s,
            efficiency=efficiency,
            tiles=tiles,
            padded=(mp, kp, np_),
            flops=2.0 * m * k * n,
            bytes=nbytes,
        )
        self._mm[key] = cost
        return cost

    def is_decode_graph(self, tokens: int) -> bool:
        """Whether a graph over ``tokens`` positions is a decode graph (fewer tokens than the
        smallest prepared prefill shape), which runs the INT8 path (§5.1 footnote 2)."""
        return tokens < self.static_shapes[0]

    def matmul(
        self,
        m: int,
        k: int,
        n: int,
        *,
        a_bits: float = 16,
        b_bits: float = _STATIONARY_BITS_DEFAULT,
        out_bits: float = 16,
    ) -> float:
        """Seconds for ``[m, k] × [k, n]`` (second operand stationary, FP16 path); see
        :meth:`matmul_cost`."""
        return self.matmul_cost(m, k, n, a_bits=a_bits, b_bits=b_bits, out_bits=out_bits).seconds

    def linear_cost(
        self, tokens: int, in_features: int, out_features: int, *, permuted: bool = True
    ) -> MatmulCost:
        """A linear layer over ``tokens`` rows at the stack's precision.

        ``permuted`` (HeteroLLM §4's layout): ``[out, in] × [in, tokens]`` — the weight
        streams, the activations stay in the array. Otherwise ``[tokens, in] × [in, out]``
        with the weight stationary. Decode graphs (:meth:`is_decode_graph`) use the INT8
        path.
        """
        p = self.precision
        integer = self.is_decode_graph(tokens)
        # Prefill graphs compute in FP16 and take their weights at prefill_weight_bits; decode
        # graphs run the integer path on the stored weights (§5.1 footnote 2).
        w_bits = float(p.weight_bits) if integer else self.prefill_weight_bits
        converts = w_bits != p.weight_bits
        key = (tokens, in_features, out_features, permuted)
        if converts and key in self._converted:
            return self._converted[key]
        if permuted:
            cost = self.matmul_cost(
                out_features,
                in_features,
                tokens,
                a_bits=w_bits,
                b_bits=p.act_bits,
                out_bits=p.act_bits,
                integer=integer,
            )
        else:
            cost = self.matmul_cost(
                tokens,
                in_features,
                out_features,
                a_bits=p.act_bits,
                b_bits=w_bits,
                out_bits=p.act_bits,
                integer=integer,
            )
        if not converts:
            return cost
        cost = self._with_conversion(cost, in_features * out_features, p.weight_bits, w_bits)
        self._converted[key] = cost
        return cost

    def _with_conversion(
        self, cost: MatmulCost, weights: int, stored_bits: float, graph_bits: float
    ) -> MatmulCost:
        """``cost`` with the host's pass that converts the product's weights from the stored
        width to the graph's (HeteroLLM §4: the CPU handles "dequantization"): it reads the
        stored and writes the converted weights while the NPU reads them, so the product's
        memory time is at least the host's traffic at a single processor's rate and all the
        traffic at what two streaming processors get of the shared memory. The pass runs a
        layer ahead of the NPU, so only its traffic, not its latency, is charged."""
        host_bytes = weights * (stored_bits + graph_bits) / 8.0
        total = cost.bytes + host_bytes
        memory = max(cost.memory_s, host_bytes / self.bw, total / self.conversion_bw)
        return replace(
            cost,
            seconds=max(cost.compute_s, memory) + cost.launch_s,
            memory_s=memory,
            bytes=total,
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

    def conversion_buffer_bytes(self, model: ModelSpec) -> float:
        """Memory the host's weight conversion holds during a prefill: two layers' Matmul
        weights at ``prefill_weight_bits`` (the layer the NPU reads and the next one being
        converted); 0 when prefill graphs take the stored width."""
        if self.prefill_weight_bits == self.precision.weight_bits:
            return 0.0
        per_layer = sum(k * n for _, k, n in _layer_gemms(model))
        return 2.0 * per_layer * self.prefill_weight_bits / 8.0

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
        # One graph per attention product, its heads inside it: one launch each.
        layer += model.n_heads * (score.seconds + value.seconds - 2 * self.launch_s)
        layer += 2 * self.launch_s
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
        self.check_fits(model, sum(lens), workspace_bytes=self.conversion_buffer_bytes(model))
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
        heads = batch * model.n_kv_heads
        layer += heads * (score.seconds + value.seconds - 2 * self.launch_s) + 2 * self.launch_s
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
