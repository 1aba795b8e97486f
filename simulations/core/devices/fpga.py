"""FPGA cost model: an instruction-driven LLM accelerator (FlightLLM on HBM FPGAs).

GLITCHES (§IV, §V-B) runs the decode stage on FlightLLM, an accelerator that moves data
between HBM and on-chip buffers with load (LD) / store (ST) instructions and computes with
matrix (MM/MV) instructions. This module models the parts of that design that decide its
speed: the design's compute peak, the HBM pseudo-channels, the per-instruction overhead of
LD/ST, the weight + quantisation-metadata loads that the prefetch ratio M merges, and the
on-chip buffer that limits how far ahead a prefetch can run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simulations.core.errors import SpecError
from simulations.core.graph import (
    DecodeFrame,
    GraphTotals,
    Op,
    OpKind,
    PhaseGraph,
    Precision,
    decode_frame,
    gemm_params,
    prefill_graph,
)
from simulations.core.graph import (
    weight_bytes as graph_weight_bytes,
)
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
from .base import (
    DeviceModel,
    PhaseCost,
    StreamFloor,
    check_capacity,
    check_params,
    host_round_trip_s,
)

#: Runtime ``params`` the FPGA model reads.
FPGA_PARAMS: Mapping[str, str] = {
    "design_peak_tops": "compute peak of the accelerator design (TOPS), below the chip's peak",
    "ld_overhead_cycles": "design-clock cycles one HBM pseudo-channel spends per LD/ST "
    "instruction before data flows (decode, issue, request set-up)",
    "tile_weight_bytes": "weight bytes one MV instruction consumes (one LD at M = 1)",
    "tile_meta_bytes": "quantisation metadata (scales, zero points) one MV instruction needs",
    "buffer_kb_per_channel": "on-chip weight buffer per HBM pseudo-channel (KB); a prefetch "
    "overlaps with computation only while two prefetches fit",
    "prefetch_ratio": "default prefetch ratio M (MV instructions served by one LD)",
    "power_w": "board power of the running design (W)",
}


@dataclass(frozen=True, slots=True)
class _Design:
    """Per-(device, runtime) constants, resolved once."""

    ops_rate: float  # achieved OP/s
    channels: int
    ch_bw: float  # achieved bytes/s of one pseudo-channel
    ld_overhead_s: float
    tile_w: float
    tile_m: float
    buffer_ch: float  # bytes


@dataclass(frozen=True, slots=True)
class _DecodePlan:
    """A decode step's costs that do not depend on the cached tokens (per model and batch):
    every operator but attention, and the memory the weights take."""

    frame: DecodeFrame
    head_s: tuple[float, ...]  # seconds × repeat of each operator before attention
    tail_s: tuple[float, ...]  # … and after it
    weights: float
    kv_per_token: float


@register_device_model(DeviceKind.FPGA)
class FpgaModel(DeviceModel):
    """FlightLLM-style instruction-driven accelerator (GLITCHES §IV, §V-B; FlightLLM [14]).

    *Compute.* MM/MV/SFU work runs at ``design_peak_tops × compute_eff`` (the design's
    6.91 TOPS on U280, not the chip's 24.5 TOPS INT8).

    *Memory.* Data moves in LD/ST instructions spread over the device's HBM pseudo-channels
    (``params.hbm_channels``); each channel executes its instructions one after the other,
    spending ``ld_overhead_cycles`` at the design clock per instruction, then streaming at
    ``bw_eff`` of its share of the HBM peak. ``n`` instructions of ``b`` bytes therefore take
    ``ceil(n / channels) × (overhead + b / channel bandwidth)``: bandwidth utilisation rises
    with bytes per instruction and saturates at ``bw_eff`` (GLITCHES Fig. 5, see
    :meth:`ld_utilisation`).

    *Decode (§IV-C).* Activations stay on chip (FlightLLM's always-on-chip decode). For each
    linear layer an MV instruction consumes one weight tile (``tile_weight_bytes``, 8 KB for
    q_proj per §V-B) and its quantisation metadata (``tile_meta_bytes``, 256 B); with
    prefetch ratio M one weight LD and one metadata LD serve M MV instructions (32 KB and
    1 KB at M = 4). Loads and MV work are double-buffered per channel: while two prefetches
    fit the channel's buffer (``buffer_kb_per_channel``) they overlap, otherwise the
    fraction that does not fit serialises with the computation. Small M pays the
    instruction overhead often; large M loses the overlap — the optimum lies between. KV
    cache reads (not prefetched) use tile-sized LDs; K and V writes one ST each.

    *Prefill.* Each operator takes ``max(compute, memory)`` with the same LD model
    (weights reused over all prompt tokens, so prefill is compute-bound).

    *Prefetch ratio.* A setting (:meth:`with_settings` ``{"prefetch_ratio": M}``, or
    ``FpgaModel(device, runtime, prefetch_ratio=M)``, or :meth:`with_prefetch`: cached
    sibling models); default from the profile's ``prefetch_ratio``. The GLITCHES and
    homogeneous policies pass their scenario option this way.

    *Sampling.* The host samples each token (GLITCHES §III), so every decode step adds the
    logits → host → token round trip over the host link (:meth:`host_sampling_s`).

    *Power.* The board draws ``power_w`` while it runs and while it waits (GLITCHES Table I
    reports the same 46 W for prefill and decode: static and clock power dominate).

    Deviations: one prefetch ratio for every layer (GLITCHES tunes it per layer); weight
    tiles have the same size in every layer; the per-channel buffer size is an assumption
    (two URAM288 blocks, 72 KB; not published); SFU operators run at the MV rate; DDR is
    not modelled; decode batches > 1 reuse each weight tile for every sequence.
    """

    #: FlightLLM's instruction stream serves one sequence per pass: GLITCHES' FPGA "decodes
    #: one request at a time" (§III-C, §V). Schedulers that batch cap there; the cost model
    #: itself still prices larger batches (above) for a design that would allow them.
    max_sequences_per_pass = 1

    params = (
        OptionSpec(
            "clock_mhz",
            float,
            None,
            "design clock of the accelerator on the FPGA",
            minimum=0.0,
            exclusive_minimum=True,
            maximum=MAX_QUANTITY,
            required=True,
            unit="MHz",
        ),
        OptionSpec(
            "hbm_channels",
            int,
            1,
            "HBM pseudo-channels the design uses (count)",
            minimum=1,
            maximum=10**6,
        ),
        OptionSpec(
            "issue_cycles",
            float,
            None,
            "instruction-issue overhead per instruction, cycles (not read by this model: the "
            "runtime profile's ld_overhead_cycles is the overhead it charges)",
            minimum=0.0,
            exclusive_minimum=True,
            maximum=MAX_QUANTITY,
            unit="cycles",
        ),
    )
    settings = (
        OptionSpec(
            "prefetch_ratio",
            int,
            None,
            "data-prefetch ratio M (GLITCHES §IV): MV instructions one LD serves; default: the "
            "runtime profile's prefetch_ratio",
            minimum=1,
            maximum=4096,
        ),
    )

    def __init__(
        self, device: DeviceSpec, runtime: RuntimeProfile, prefetch_ratio: int | None = None
    ) -> None:
        super().__init__(device, runtime)
        check_params(runtime, FPGA_PARAMS)
        self.precision = Precision.of(runtime)
        clock_mhz = float(self.device_params["clock_mhz"])
        channels = int(self.device_params["hbm_channels"])

        def pos(key: str) -> float:
            v = runtime.param(key)
            if not v > 0:
                raise SpecError(f"{runtime.slug}.params.{key}", "must be positive")
            return v

        peak = pos("design_peak_tops") * 1e12
        self.design_peak_ops = peak
        overhead_cycles = runtime.param("ld_overhead_cycles")
        if overhead_cycles < 0:
            raise SpecError(f"{runtime.slug}.params.ld_overhead_cycles", "must not be negative")
        self.design = _Design(
            ops_rate=peak * runtime.compute_eff,
            channels=int(channels),
            ch_bw=device.mem_bw_gbps * 1e9 * runtime.bw_eff / channels,
            ld_overhead_s=overhead_cycles / (clock_mhz * 1e6),
            tile_w=pos("tile_weight_bytes"),
            tile_m=runtime.param("tile_meta_bytes", 0.0),
            buffer_ch=pos("buffer_kb_per_channel") * 1024,
        )
        if self.design.tile_m < 0:
            raise SpecError(f"{runtime.slug}.params.tile_meta_bytes", "must not be negative")
        m = runtime.param("prefetch_ratio", 1.0) if prefetch_ratio is None else prefetch_ratio
        if isinstance(m, float) and not m.is_integer():
            raise SpecError("prefetch_ratio", "must be an integer")
        self.prefetch_ratio = check_count("prefetch_ratio", int(m), maximum=4096)
        self.power_w = pos("power_w")
        self._siblings: dict[int, FpgaModel] = {self.prefetch_ratio: self}
        self._cache: dict[tuple[object, ...], PhaseCost] = {}
        self._plans: dict[tuple[ModelSpec, int], _DecodePlan] = {}

    # --- public API ----------------------------------------------------------------------

    def with_prefetch(self, prefetch_ratio: int) -> FpgaModel:
        """The same device and stack running prefetch ratio ``prefetch_ratio`` (cached)."""
        if isinstance(prefetch_ratio, bool) or not isinstance(prefetch_ratio, int):
            raise SpecError("prefetch_ratio", "must be an integer")
        sib = self._siblings.get(prefetch_ratio)
        if sib is None:
            sib = FpgaModel(self.device, self.runtime, prefetch_ratio)
            sib._siblings = self._siblings
            self._siblings[prefetch_ratio] = sib
        return sib

    def _with_settings(self, values: dict[str, Any]) -> FpgaModel:
        return self.with_prefetch(int(values["prefetch_ratio"]))

    def peak_ops_per_s(self) -> float:
        """The accelerator design's peak, not the chip's: GLITCHES Table II charts the U280
        at FlightLLM's 6.91 TOPS rather than 24.5 TOPS."""
        return self.design_peak_ops

    def host_sampling_s(self, model: ModelSpec) -> float:
        """The logits → host → sampled token round trip over the host link (GLITCHES §III)."""
        return host_round_trip_s(self.device, model)

    def compute_rate_bound(self) -> float:
        """The design's achieved rate (``design_peak_tops × compute_eff``), which bounds
        every operator's compute time."""
        return float(self.design.ops_rate)

    def floor_power_w(self) -> float:
        """The design's board power: drawn busy and idle alike."""
        return float(self.power_w)

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: decode is bounded by LD instructions and the MV engine, not by a plain
        stream at one bandwidth."""
        return None

    def weights_bytes(self, model: ModelSpec) -> float:
        """Weights at the stack's precision plus their quantisation metadata."""
        d = self.design
        meta = gemm_params(model) * self.precision.w * d.tile_m / d.tile_w
        return graph_weight_bytes(model, self.precision) + meta

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """Cost of prefilling ``seq_lens`` (packed) on the accelerator."""
        g = prefill_graph(model, seq_lens, self.precision)
        key = ("p", model, g.tokens, g.sequences, g.attended)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self._check_fits(model, g.tokens)
        seconds = sum(self._prefill_op(op) * op.repeat for op in g.ops)
        cost = self._phase_cost(g, seconds, decode=False)
        self._remember(key, cost)
        return cost

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """Cost of one decode iteration at this model's prefetch ratio."""
        check_count("batch", batch)
        check_count("kv_tokens", kv_tokens, minimum=0, maximum=10**12)
        key = ("d", model, batch, kv_tokens)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        plan = self._decode_plan(model, batch)
        needed = plan.weights + plan.kv_per_token * (kv_tokens + batch)
        check_capacity(self.device, needed, f"{model.slug} on {self.runtime.slug}")
        # Only attention depends on the cached tokens; the sum runs over the operators in
        # graph order, so it equals the sum over decode_graph(...).ops exactly.
        attn = plan.frame.attention(kv_tokens)
        seconds = sum(
            (*plan.head_s, *(self._decode_op(op) * op.repeat for op in attn), *plan.tail_s)
        )
        cost = self._phase_cost(plan.frame.totals(attn), seconds, decode=True)
        self._remember(key, cost)
        return cost

    def op_seconds(self, graph: PhaseGraph) -> dict[str, float]:
        """Seconds per operator name (all instances) of ``graph`` — e.g. q_proj, up_proj."""
        f = self._decode_op if graph.phase.value == "decode" else self._prefill_op
        return {op.name: f(op) * op.repeat for op in graph.ops}

    def ld_utilisation(self, bytes_per_instruction: float) -> float:
        """HBM bandwidth utilisation of a long stream of LDs of this size (GLITCHES Fig. 5):
        bytes moved per second over the device's peak bandwidth."""
        if not bytes_per_instruction > 0:
            raise SpecError("bytes_per_instruction", "must be positive")
        d = self.design
        t = d.ld_overhead_s + bytes_per_instruction / d.ch_bw
        return bytes_per_instruction / t * d.channels / (self.device.mem_bw_gbps * 1e9)

    @property
    def idle_power_w(self) -> float:
        """The configured board draws its design power while it waits."""
        return self.power_w

    # --- internals -----------------------------------------------------------------------

    def _stream(self, nbytes: float, per_ld: float) -> float:
        """Seconds to move ``nbytes`` striped over every pseudo-channel, each channel issuing
        LD/ST instructions of at most ``per_ld`` bytes one after the other."""
        if nbytes <= 0:
            return 0.0
        d = self.design
        per_ch = nbytes / d.channels
        return math.ceil(per_ch / per_ld) * d.ld_overhead_s + per_ch / d.ch_bw

    def _chunk_step(self, tiles: float, rows: int) -> tuple[float, float]:
        """(steady-state time, pipeline fill) of one prefetch of ``tiles`` tiles per channel:
        every channel loads its chunk (one weight LD, one metadata LD) while the MV engine
        works on the previous chunks of all channels."""
        d = self.design
        chunk = tiles * (d.tile_w + d.tile_m)
        n_ld = 2 if d.tile_m > 0 else 1
        load = n_ld * d.ld_overhead_s + chunk / d.ch_bw
        compute = d.channels * 2.0 * rows * tiles * (d.tile_w / self.precision.w) / d.ops_rate
        # Double buffering needs two chunks in the channel's buffer; the part of a chunk
        # that does not fit waits for the computation instead of overlapping it.
        serial = min(1.0, max(0.0, (2.0 * chunk - d.buffer_ch) / chunk))
        lo, hi = (load, compute) if load < compute else (compute, load)
        return hi + serial * lo, lo

    def _gemm_decode(self, op: Op) -> float:
        """Prefetched weight + metadata loads pipelined with MV instructions."""
        d = self.design
        m = self.prefetch_ratio
        tiles_per_ch = op.weight_bytes / d.tile_w / d.channels
        full = math.floor(tiles_per_ch / m)
        rest = tiles_per_ch - full * m
        t = fill = 0.0
        if full:
            step, fill = self._chunk_step(m, op.rows)
            t += full * step
        if rest > 1e-12:
            step, f = self._chunk_step(rest, op.rows)
            t += step
            fill = max(fill, f)
        return t + fill + self._stream(op.kv_write_bytes, d.tile_w)

    def _decode_op(self, op: Op) -> float:
        d = self.design
        compute = op.flops / d.ops_rate
        if op.kind is OpKind.GEMM:
            return self._gemm_decode(op)
        if op.kind is OpKind.EMBEDDING:
            # One LD per gathered row, rows spread over the channels.
            rows = max(op.rows, 1)
            row = op.weight_bytes / rows
            return math.ceil(rows / d.channels) * (d.ld_overhead_s + row / d.ch_bw)
        load = self._stream(op.kv_read_bytes, d.tile_w) + self._stream(op.kv_write_bytes, d.tile_w)
        # Activations stay on chip during decode; KV tiles stream under the computation,
        # which waits for the first round of tiles (pipeline fill).
        first = min(1.0, d.channels * d.tile_w / op.kv_read_bytes) if op.kv_read_bytes else 1.0
        return max(compute, load) + min(compute, load) * first

    def _prefill_op(self, op: Op) -> float:
        d = self.design
        compute = op.flops / d.ops_rate
        meta = op.weight_bytes * d.tile_m / d.tile_w
        weights = self._stream(op.weight_bytes + meta, self.prefetch_ratio * (d.tile_w + d.tile_m))
        other = self._stream(op.bytes - op.weight_bytes, d.tile_w)
        return max(compute, weights + other)

    def _phase_cost(self, g: PhaseGraph | GraphTotals, seconds: float, decode: bool) -> PhaseCost:
        d = self.design
        meta = g.weight_bytes * d.tile_m / d.tile_w
        # Decode keeps activations on chip, so HBM sees weights, metadata and the KV cache.
        traffic = (
            g.weight_bytes + meta + g.kv_read_bytes + g.kv_write_bytes if decode else g.bytes + meta
        )
        return PhaseCost(
            seconds=seconds, joules=self.power_w * seconds, flops=g.flops, bytes=traffic
        )

    def _decode_plan(self, model: ModelSpec, batch: int) -> _DecodePlan:
        plan = self._plans.get((model, batch))
        if plan is None:
            frame = decode_frame(model, batch, self.precision)
            if len(self._plans) >= 4096:
                self._plans.clear()
            plan = self._plans[(model, batch)] = _DecodePlan(
                frame,
                tuple(self._decode_op(op) * op.repeat for op in frame.head),
                tuple(self._decode_op(op) * op.repeat for op in frame.tail),
                self.weights_bytes(model),
                self.kv_bytes_per_token(model),
            )
        return plan

    def _check_fits(self, model: ModelSpec, resident_tokens: int) -> None:
        needed = self.weights_bytes(model) + self.kv_bytes_per_token(model) * resident_tokens
        check_capacity(self.device, needed, f"{model.slug} on {self.runtime.slug}")

    def _remember(self, key: tuple[object, ...], cost: PhaseCost) -> None:
        if len(self._cache) >= 65536:
            self._cache.clear()
        self._cache[key] = cost
