"""Cost model of a host CPU: attention and GEMV bound by the instance's memory bandwidth.

Neo (§2.2) offloads decode attention to the host CPU because that operator reads the whole
KV cache once per token with little arithmetic (``n_heads / n_kv_heads`` FLOPs per byte at
FP16): it is memory-bandwidth-bound on CPUs as on GPUs, so the CPU–GPU gap for it is the
bandwidth gap (≈200 vs 600 GB/s), not the compute gap (≈1.2 vs 125 TFLOPS). §5.5 confirms
it across AWS g5 instances: the throughput gain follows the instance's memory bandwidth,
not its core count.

An operator's time is the roofline ``max(bytes / bandwidth, FLOPs / compute)`` plus the
stack's per-call overhead, where

* ``bandwidth`` = the instance's memory bandwidth (its primary tier) × the stack's ``bw_eff``;
* ``compute`` = cores × clock × FP32 SIMD lanes × 2 (one fused multiply-add per lane and
  cycle) × ``compute_eff`` — cores, SIMD width and clock are the device's datasheet fields.

:meth:`CpuModel.attention_decode` is what the Neo policy calls for the CPU-side attention of
a batch; :meth:`CpuModel.gemv` covers weight-streaming products; ``prefill`` and
``decode_step`` run a whole model on the CPU (operator graph of :mod:`..graph`, fused
attention as PACPU's paged kernel, Neo §4).

Deviations: one FMA pipe per core (Zen 2 and Xeon cores have two; attention never reaches
the compute roof, so this only matters for CPU prefill); no cache reuse across operators;
hyper-threads add nothing; NUMA effects are in the device record (a NUMA node is its own
device, as Neo confines itself to one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property, lru_cache

from simulations.core.errors import SpecError
from simulations.core.graph import (
    OpKind,
    PhaseGraph,
    Precision,
    decode_graph,
    prefill_graph,
)
from simulations.core.graph import weight_bytes as graph_weight_bytes
from simulations.core.options import OptionSpec
from simulations.core.spec import (
    MAX_QUANTITY,
    DeviceKind,
    DeviceSpec,
    ModelSpec,
    RuntimeProfile,
    check_count,
)

from . import register_device_model
from .base import DeviceModel, PhaseCost, StreamFloor, check_params

#: Runtime ``params`` the CPU model reads (anything else is rejected as a typo).
CPU_PARAMS: Mapping[str, str] = {
    "active_power_frac": "power while computing, as a fraction of the device's TDP (default 1.0)",
}


@register_device_model(DeviceKind.CPU)
class CpuModel(DeviceModel):
    """Bandwidth-bound host CPU (Neo §2.2, §4 "Efficient CPU kernels", §5.5).

    Deviations: see the module docstring (one FMA pipe, no cache reuse, no SMT gain).
    """

    params = (
        OptionSpec(
            "cores", int, None, "physical cores (count)", minimum=1, maximum=10**6, required=True
        ),
        OptionSpec(
            "simd_width_bits",
            int,
            None,
            "SIMD register width (e.g. 512 for AVX-512)",
            minimum=1,
            maximum=10**6,
            required=True,
            unit="bits",
        ),
        OptionSpec(
            "clock_ghz",
            float,
            None,
            "base clock",
            minimum=0.0,
            exclusive_minimum=True,
            maximum=MAX_QUANTITY,
            required=True,
            unit="GHz",
        ),
    )

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        super().__init__(device, runtime)
        check_params(runtime, CPU_PARAMS)
        p = self.device_params
        self.cores = int(p["cores"])
        self.lanes = float(p["simd_width_bits"]) / 32.0
        self.peak_flops = 2.0 * self.cores * float(p["clock_ghz"]) * 1e9 * self.lanes
        self.flops_rate = self.peak_flops * runtime.compute_eff
        self.bw = device.mem_bw_gbps * 1e9 * runtime.bw_eff
        self.launch_s = runtime.kernel_launch_us * 1e-6
        frac = runtime.param("active_power_frac", 1.0)
        if not 0.0 <= frac <= 1.0:
            raise SpecError(f"{runtime.slug}.params.active_power_frac", "must be in [0, 1]")
        self._power_frac = frac
        self.precision = Precision.of(runtime)
        self._cache: dict[tuple[object, ...], float] = {}

    @cached_property
    def power_w(self) -> float:
        """Power while running, W (``active_power_frac`` × the board power), computed on
        first use: a CPU whose vendor publishes no power still has a roofline."""
        return self._power_frac * self.device.board_power_w

    # --- what the capacity planner asks ------------------------------------------------------

    def compute_rate_bound(self) -> float | None:
        """None: the planner screens host CPUs only inside Neo-style nodes, whose bounds come
        from the policy's stage costs, not from a per-operator compute floor."""
        return None

    def floor_power_w(self) -> float:
        """0.0: no power floor is claimed (the instance slices carry no idle power)."""
        return 0.0

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: not screened as a decoder on its own (see :meth:`compute_rate_bound`)."""
        return None

    # --- building blocks ---------------------------------------------------------------------

    @property
    def bandwidth_gbps(self) -> float:
        """Achieved memory bandwidth of the instance (peak × ``bw_eff``)."""
        return self.bw / 1e9

    def roofline_s(self, flops: float, nbytes: float) -> float:
        """Seconds for ``flops`` and ``nbytes`` on this CPU (no call overhead)."""
        if not (math.isfinite(flops) and math.isfinite(nbytes)) or flops < 0 or nbytes < 0:
            raise SpecError("work", "FLOPs and bytes must be finite and non-negative")
        return max(flops / self.flops_rate, nbytes / self.bw)

    def attention_decode_layer(self, model: ModelSpec, batch: int, kv_tokens: int) -> float:
        """Seconds of one layer's decode attention for ``batch`` sequences holding
        ``kv_tokens`` cached tokens in total: read every cached K and V once, append the
        batch's new K and V, read the queries and write the outputs (Neo §4, PACPU)."""
        key = ("attn", model, batch, kv_tokens)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        check_count("batch", batch, maximum=10**7)
        check_count("kv_tokens", kv_tokens, minimum=0, maximum=10**12)
        flops_per_pos, bytes_per_seq, bytes_per_pos = _attention_coeffs(model, self.precision)
        attended = kv_tokens + batch
        kv_append = batch * model.kv_bytes_per_token(self.runtime.kv_bits) / model.n_layers
        nbytes = bytes_per_seq * batch + bytes_per_pos * attended + kv_append
        t = self.roofline_s(flops_per_pos * attended, nbytes) + self.launch_s
        if len(self._cache) >= 65536:
            self._cache.clear()
        self._cache[key] = t
        return t

    def attention_decode(self, model: ModelSpec, batch: int, kv_tokens: int) -> float:
        """Seconds of decode attention over all layers (what Neo's scheduler estimates as
        ``L × T_ca``, §3.2)."""
        return model.n_layers * self.attention_decode_layer(model, batch, kv_tokens)

    def attention_decode_cost(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """:meth:`attention_decode` with its energy, FLOPs and bytes."""
        g = decode_graph(model, batch, kv_tokens, self.precision, fused_attention=True)
        attn = next(op for op in g.layer_ops if op.kind is OpKind.ATTENTION)
        t = self.attention_decode(model, batch, kv_tokens)
        nbytes = attn.bytes * attn.repeat + batch * model.kv_bytes_per_token(self.runtime.kv_bits)
        return PhaseCost(t, t * self.power_w, attn.flops * attn.repeat, nbytes)

    def gemv(
        self, rows: int, cols: int, batch: int = 1, *, weight_bits: float | None = None
    ) -> float:
        """Seconds of ``batch`` vectors times a ``rows × cols`` weight matrix streamed from
        memory once (``weight_bits`` defaults to the stack's weight precision)."""
        check_count("gemv.rows", rows, maximum=10**9)
        check_count("gemv.cols", cols, maximum=10**9)
        check_count("gemv.batch", batch, maximum=10**7)
        wb = self.precision.weight_bits if weight_bits is None else weight_bits
        if not (isinstance(wb, int | float) and 0 < wb <= 64):
            raise SpecError("gemv.weight_bits", "must be a bit width in (0, 64]")
        a = self.precision.a
        nbytes = rows * cols * wb / 8 + batch * (rows + cols) * a
        return self.roofline_s(2.0 * rows * cols * batch, nbytes) + self.launch_s

    def kv_capacity_tokens(self, model: ModelSpec, reserved_bytes: float = 0.0) -> int:
        """How many tokens of KV cache fit the CPU's memory after ``reserved_bytes``."""
        if not math.isfinite(reserved_bytes) or reserved_bytes < 0:
            raise SpecError("reserved_bytes", "must be finite and non-negative")
        free = self.memory_capacity_bytes - reserved_bytes
        return max(0, int(free // self.kv_bytes_per_token(model)))

    # --- whole-model phases ------------------------------------------------------------------

    def weights_bytes(self, model: ModelSpec) -> float:
        """Weights at the stack's precision (norms FP16)."""
        return graph_weight_bytes(model, self.precision)

    def _pass_s(self, g: PhaseGraph) -> float:
        per_op = sum(
            (self.roofline_s(op.flops, op.bytes) + self.launch_s) * op.repeat for op in g.ops
        )
        return per_op

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """Whole-model prefill on the CPU (packed prompts, fused attention)."""
        g = prefill_graph(model, seq_lens, self.precision, fused_attention=True)
        self.check_fits(model, g.tokens)
        t = self._pass_s(g)
        return PhaseCost(t, t * self.power_w, g.flops, g.bytes)

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One whole-model decode iteration on the CPU: weights streamed once per step."""
        g = decode_graph(model, batch, kv_tokens, self.precision, fused_attention=True)
        self.check_fits(model, kv_tokens + batch)
        t = self._pass_s(g)
        return PhaseCost(t, t * self.power_w, g.flops, g.bytes)


@lru_cache(maxsize=1024)
def _attention_coeffs(model: ModelSpec, prec: Precision) -> tuple[float, float, float]:
    """Per-layer fused decode attention of the operator graph as linear coefficients:
    (FLOPs per attended position, bytes per sequence, bytes per attended position).

    The graph's attention is linear in the attended positions (KV reads, score FLOPs) and in
    the sequences (query reads, output writes); three small graphs pin the coefficients so
    the CPU model follows :mod:`..graph`'s conventions without rebuilding a graph per call.
    """

    def attn(batch: int, kv: int) -> tuple[float, float]:
        g = decode_graph(model, batch, kv, prec, fused_attention=True)
        op = next(o for o in g.layer_ops if o.kind is OpKind.ATTENTION)
        return op.flops, op.bytes

    f1, b1 = attn(1, 0)  # 1 sequence, 1 attended position
    _, b2 = attn(1, 1)  # 1 sequence, 2 attended positions
    per_pos = b2 - b1
    return f1, b1 - per_pos, per_pos
