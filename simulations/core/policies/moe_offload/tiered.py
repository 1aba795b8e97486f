"""Expert offloading on one board with two memory tiers (H2M2's HBM + LPDDR hardware, Hwang
et al., §4.1, Tables 1–2): option ``cold_tier`` ``lpddr`` of the ``moe-offload`` policy.

The fast tier (HBM) holds the embedding and LM head, attention, the KV cache, the dense
layers, the router, the shared experts and the ``R`` hottest routed experts of every MoE
layer, computed by the chip beside the HBM; the other ``E − R`` experts live in the large
tier (LPDDR). Per MoE layer and pass of ``T`` tokens the cold experts receive
``c = T·Σ q_i`` routed copies and touch ``D = Σ 1 − (1 − q_i)^T`` distinct experts
(:func:`~simulations.core.graph.offloaded_expert_load`, the formula every MoE cost here
uses). Two ways to run them:

* **lpddr** (H2M2-style, compute where the weights live) — the chip beside the LPDDR reads
  the ``D`` touched experts at LPDDR bandwidth and computes the ``c`` copies (the same
  operators as the hot experts: grouped gate/up and down GEMMs of ``2·c·P`` FLOPs over
  ``D·P·w`` weight bytes, activation, weighted combine, :func:`~simulations.core.graph.
  routed_expert_ops`); the copies' activations cross the interconnect both ways:
  ``t_lpddr = ops(LPDDR chip) + 2 × c·h·a / link``;
* **stream** — the ``D`` experts' weights are read out of the LPDDR, cross the interconnect
  and the HBM chip computes them: ``t_stream = D·P·w / min(link, LPDDR bandwidth) +
  ops(HBM chip)``.

Either way the cold bytes leave the LPDDR at its bandwidth at most. With the same chip on
both sides (Table 2) the LPDDR chip wins unless the activations' round trip outweighs the
weights' one-way trip (very long prefills) or the HBM side computes faster (a board with
more chips beside its HBM, as Table 4's ``HBMChip-More``; the catalog's ``h2m2`` record has
one per side) and the work is compute-bound.

**Rule** (per MoE layer and pass, ``offload_mode`` ``auto``): the smaller of the two. All
MoE layers of a model are alike, so one choice holds for every layer of a pass.

Each operator of the graph (:mod:`simulations.core.graph`) costs ``max(compute, bytes /
bandwidth) + one access latency`` on the chip(s) of its side, the compute rates from the
board's chip (Table 2, :class:`~simulations.core.devices.h2m2.accel.AcceleratorConfig`): a
GEMM of ``M`` rows on the faster of the MV unit (32 dot products of 128 per core and cycle)
and the 128×128 weight-stationary MM unit, which at ``M`` < 128 rows runs at ``M/128`` of
its peak (a tile holds the array for 128 cycles while its weights shift in, as
:meth:`~simulations.core.devices.h2m2.accel.Side.gemm_s`); attention on the MV unit;
norms, activations and other element-wise work on the vector unit (one operation per lane
and cycle). Deviation from the board's dense kernel model (``Side.gemm_s``), which uses the
MV unit at ``M`` = 1 only: here 2 ≤ ``M`` < 32 also runs on the MV unit, where it is faster
(an expert's GEMM sees few rows at small batches; on the MM array its weights could enter
at only 4 cores × 128 B per cycle = 512 GB/s, below either memory's bandwidth).

``cold_tier`` ``lpddr-only`` is the comparison on the same board: every weight and the KV
cache in LPDDR, every operator on one chip beside it (H2M2's LPDDR-only baseline: Fig. 4b
with sublayer-granular mapping, §3.1 and §5.1, :meth:`~simulations.core.devices.h2m2.board.
H2M2Hardware.lpddr_only`).

Assumptions the paper does not fix (it models dense decoder layers only, §5.1):

* attention, the dense layers and the hot experts run wholly on the HBM chip (no head-aware
  split of attention across both chips, §3): conservative for the split placement;
* by default the layer waits for its cold experts: no overlap of the LPDDR chip's experts
  with the HBM chip's work (conservative, as the host path of :mod:`.offload`), so a step
  never gets slower as experts move into HBM. §3.1 of the paper remarks that its head-aware
  granularity (both chips at once on one sublayer) applies to MoE experts too; option
  ``expert_overlap`` models that: the LPDDR chip's cold experts run while the HBM chip
  computes the hot ones, the layer adding only what the cold side takes beyond them
  (``max(0, t_lpddr − t_hot)``; the rule compares that with streaming). With it a step with
  some experts in LPDDR may beat one with all in HBM (two chips busy instead of one);
  streaming's transfer is never overlapped with compute;
* streamed weights land in HBM and the HBM chip's operators read them back at HBM
  bandwidth (conservative: streaming straight into its scratchpad would save that read);
* streamed experts are not cached between passes; every token's activations (``a`` bytes
  per element) cross the interconnect to the LPDDR chip and back once per layer;
* the interconnect is the board's ``peer_link`` (Table 1's 960 GB/s), shared by both
  directions, no latency charged (Table 2 gives none);
* the prompt phase (not in the paper, §5.1) is the same operators with M = prompt tokens;
* energy is the board's ``tdp_w`` over the pass's seconds, as the ``memory-accel`` family
  charges it (chip power is not published: indicative only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor
from simulations.core.devices.h2m2.accel import Side
from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.errors import SpecError
from simulations.core.graph import (
    Op,
    OpKind,
    PhaseGraph,
    Precision,
    decode_graph,
    expert_load,
    expert_params,
    offloaded_expert_load,
    prefill_graph,
    routed_expert_ops,
    weight_bytes,
)
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile

from .offload import cold_expert_bytes, expert_weight_bytes, resident_model

#: Choices of the per-layer rule for the LPDDR tier.
TIER_MODES = ("auto", "lpddr", "stream")

_MV_KINDS = frozenset({OpKind.ATTENTION, OpKind.ATTN_SCORE, OpKind.ATTN_VALUE})


def op_seconds(side: Side, op: Op) -> float:
    """One instance of ``op`` on ``side``'s chips: ``max(compute, bytes / bandwidth)`` plus
    one exposed access latency (see the module notes for the compute rates)."""
    if op.flops <= 0 and op.bytes <= 0:
        return 0.0
    a = side.accel
    if op.kind is OpKind.GEMM:
        mm = a.mm_peak_ops * min(max(op.rows, 1), a.mm_rows) / a.mm_rows
        rate = max(a.mv_peak_ops, mm) * side.chips
    elif op.kind in _MV_KINDS:
        rate = a.mv_peak_ops * side.chips
    else:
        rate = a.vector_width * a.cores * side.chips * a.clock_ghz * 1e9
    return max(op.flops / rate, op.bytes / side.bw_bytes_per_s) + side.latency_s


def ops_seconds(side: Side, ops: Sequence[Op]) -> float:
    """``ops`` (each ``repeat`` times) on ``side``, one after another."""
    return sum(op_seconds(side, op) * op.repeat for op in ops)


def pass_seconds(side: Side, graph: PhaseGraph) -> float:
    """Every operator of a pass on ``side``, one after another."""
    return ops_seconds(side, graph.ops)


class SideModel(DeviceModel):
    """A board's model run wholly on one memory side (its tier's capacity, bandwidth and the
    chips beside it): the HBM side under the split placement, or the LPDDR-only baseline."""

    single_device_roofline = False

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile, side: Side) -> None:
        self.device = device
        self.runtime = runtime
        self.device_params = {}
        self.side = side
        self.prec = Precision.of(runtime)

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """The prompt pass's operators on this side."""
        g = prefill_graph(model, seq_lens, self.prec, fused_attention=True)
        s = pass_seconds(self.side, g)
        return PhaseCost(s, s * self.device.board_power_w, g.flops, g.bytes)

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One decode iteration's operators on this side."""
        g = decode_graph(model, batch, kv_tokens, self.prec, fused_attention=True)
        s = pass_seconds(self.side, g)
        return PhaseCost(s, s * self.device.board_power_w, g.flops, g.bytes)

    def weights_bytes(self, model: ModelSpec) -> float:
        """Every weight the model spec holds (its ``resident_experts`` only, if set)."""
        return weight_bytes(model, self.prec)

    @property
    def memory_capacity_bytes(self) -> float:
        """This tier's capacity."""
        return self.side.capacity_bytes

    def compute_rate_bound(self) -> float | None:
        """None: the chips' rates are per operator kind (no single rate bounds a pass), so
        the planner's screen takes no compute floor for a board (weaker, still sound)."""
        return None

    def floor_power_w(self) -> float:
        """0.0: chip power is not published."""
        return 0.0

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: see :meth:`compute_rate_bound`."""
        return None


def board_hardware(device: DeviceSpec) -> H2M2Hardware:
    """The two sides and the interconnect of a two-tier board (SpecError naming
    ``devices`` when the device lacks an HBM or an LPDDR tier)."""
    return H2M2Hardware.from_device(device)


@dataclass(frozen=True, slots=True)
class ColdLayer:
    """One MoE layer's cold experts in one pass: what they do, the time of each way to run
    them (``lpddr_s``, ``stream_s``) and the rule's choice."""

    tokens: int
    routed: float
    distinct: float
    cold_bytes: float
    lpddr_s: float
    stream_s: float
    #: what the layer's step gains: the chosen way's seconds (with ``overlap`` and the
    #: LPDDR chip, only what its work takes beyond the HBM chip's hot experts)
    seconds: float
    runs_on: str
    #: the HBM chip's hot experts in this layer (computed only with ``overlap``)
    hot_s: float


class TieredBoard(DeviceModel):
    """A two-tier board under the split placement (see the module notes): the HBM side's
    :class:`SideModel` of the resident part plus the cold experts in LPDDR."""

    single_device_roofline = False

    def __init__(
        self,
        device: DeviceSpec,
        runtime: RuntimeProfile,
        resident: int,
        mode: str = "auto",
        overlap: bool = False,
    ) -> None:
        if mode not in TIER_MODES:
            raise SpecError("options.offload_mode", f"must be one of {', '.join(TIER_MODES)}")
        self.device = device
        self.runtime = runtime
        self.device_params = {}
        self.hw = board_hardware(device)
        self.hbm = SideModel(device, runtime, self.hw.hbm)
        self.resident = resident
        self.mode = mode
        self.overlap = bool(overlap)
        self.prec = Precision.of(runtime)
        self._memo: dict[tuple[ModelSpec, int], ColdLayer] = {}

    @property
    def link_bytes_per_s(self) -> float:
        """The interconnect between the two sides."""
        return self.hw.link_gbps * 1e9

    def cold_layer(self, model: ModelSpec, tokens: int) -> ColdLayer:
        """One MoE layer's cold experts for a pass of ``tokens`` tokens, by the rule."""
        key = (model, tokens)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        moe = model.moe
        assert moe is not None
        load = offloaded_expert_load(replace(moe, resident_experts=self.resident), tokens)
        p = float(expert_params(model))
        ew = expert_weight_bytes(model, self.prec)
        cold_bytes = load.distinct * p * ew
        if load.routed <= 0:
            out = ColdLayer(tokens, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, "none", 0.0)
        else:
            work = routed_expert_ops(model, load, tokens, self.prec)
            act = load.routed * model.hidden_size * self.prec.a
            link = self.link_bytes_per_s
            t_lpddr = ops_seconds(self.hw.lpddr, work) + 2.0 * act / link
            fetch = min(link, self.hw.lpddr.bw_bytes_per_s)
            t_stream = cold_bytes / fetch + ops_seconds(self.hw.hbm, work)
            hot_s = 0.0
            added_lpddr = t_lpddr
            if self.overlap:
                hot = expert_load(replace(moe, resident_experts=self.resident), tokens)
                hot_s = ops_seconds(self.hw.hbm, routed_expert_ops(model, hot, tokens, self.prec))
                added_lpddr = max(0.0, t_lpddr - hot_s)
            near = self.mode == "lpddr" or (self.mode == "auto" and added_lpddr <= t_stream)
            out = ColdLayer(
                tokens,
                load.routed,
                load.distinct,
                cold_bytes,
                t_lpddr,
                t_stream,
                added_lpddr if near else t_stream,
                "lpddr" if near else "stream",
                hot_s,
            )
        if len(self._memo) >= 65536:
            self._memo.clear()
        self._memo[key] = out
        return out

    def _with_cold(self, model: ModelSpec, c: PhaseCost, tokens: int) -> PhaseCost:
        extra = model.moe_layers * self.cold_layer(model, tokens).seconds
        seconds = c.seconds + extra
        return PhaseCost(seconds, seconds * self.device.board_power_w, c.flops, c.bytes)

    def _hbm_model(self, model: ModelSpec) -> ModelSpec:
        return resident_model(model, self.resident)

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """The HBM side's prefill of the resident part plus the cold experts' layers."""
        c = self.hbm.prefill(self._hbm_model(model), seq_lens)
        return self._with_cold(model, c, sum(seq_lens))

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """The HBM side's decode step of the resident part plus the cold experts' layers."""
        c = self.hbm.decode_step(self._hbm_model(model), batch, kv_tokens)
        return self._with_cold(model, c, batch)

    def weights_bytes(self, model: ModelSpec) -> float:
        """The weights the HBM holds (resident experts only)."""
        return self.hbm.weights_bytes(self._hbm_model(model))

    def lpddr_weights_bytes(self, model: ModelSpec) -> float:
        """The cold experts' bytes in LPDDR."""
        return cold_expert_bytes(model, self.resident, self.prec)

    @property
    def memory_capacity_bytes(self) -> float:
        """The HBM's capacity (weights of the resident part and the KV cache)."""
        return self.hw.hbm.capacity_bytes

    def compute_rate_bound(self) -> float | None:
        """None: as :meth:`SideModel.compute_rate_bound`."""
        return None

    def floor_power_w(self) -> float:
        """0.0: chip power is not published."""
        return 0.0

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: see :meth:`compute_rate_bound`."""
        return None

    def report(self, model: ModelSpec, max_batch: int, prompt_tokens: int) -> dict[str, Any]:
        """What the result's ``expert_offload`` block shows: the placement and the rule's
        choice (both candidates' per-layer seconds, the step's added ``layer_ms`` and, with
        ``expert_overlap``, the hot experts' time it overlaps) for a decode step of 1 and of
        ``max_batch`` sequences and a prefill of ``prompt_tokens`` tokens."""
        moe = model.moe
        assert moe is not None

        def choice(tokens: int) -> dict[str, Any]:
            c = self.cold_layer(model, tokens)
            return {
                "tokens": tokens,
                "cold_experts_touched": c.distinct,
                "runs_on": c.runs_on,
                "layer_ms": c.seconds * 1e3,
                "lpddr_layer_ms": c.lpddr_s * 1e3,
                "stream_layer_ms": c.stream_s * 1e3,
                "overlapped_hot_layer_ms": c.hot_s * 1e3,
            }

        return {
            "cold_tier": "lpddr",
            "placement": {
                "hbm": "attention, KV cache, dense layers, router, shared experts, "
                f"{self.resident} hottest routed experts per MoE layer",
                "lpddr": f"{moe.n_experts - self.resident} coldest routed experts per MoE layer",
            },
            "hbm_experts_per_layer": self.resident,
            "lpddr_experts_per_layer": moe.n_experts - self.resident,
            "hbm_weights_gb": self.weights_bytes(model) / 1e9,
            "lpddr_weights_gb": self.lpddr_weights_bytes(model) / 1e9,
            "hbm_gb": self.hw.hbm.capacity_gb,
            "lpddr_gb": self.hw.lpddr.capacity_gb,
            "offload_mode": self.mode,
            "expert_overlap": self.overlap,
            "rule": "per MoE layer and pass: the LPDDR chip computes the cold experts if its "
            "time (LPDDR-bandwidth roofline + activations over the interconnect both ways) "
            "is at most streaming's (weights out of LPDDR over the interconnect + HBM chip), "
            "else stream",
            "decode_batch_1": choice(1),
            "decode_max_batch": choice(max_batch),
            "prefill": choice(prompt_tokens),
            "interconnect_gbps": self.hw.link_gbps,
        }


def lpddr_only_report(model: ModelSpec, dm: SideModel) -> dict[str, Any]:
    """The ``expert_offload`` block of the LPDDR-only comparison on the same board."""
    return {
        "cold_tier": "lpddr-only",
        "placement": {
            "hbm": "nothing",
            "lpddr": "every weight and the KV cache, one chip computing (H2M2's LPDDR-only "
            "baseline, §3.1/§5.1)",
        },
        "lpddr_weights_gb": dm.weights_bytes(model) / 1e9,
        "lpddr_gb": dm.side.capacity_gb,
    }
