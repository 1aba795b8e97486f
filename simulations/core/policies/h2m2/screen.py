"""The capacity planner's screen of H2M2 systems: floors from the weights' streaming time,
on the plan's request set.

The policy (:class:`~simulations.core.policies.h2m2.H2M2Policy`) serves the plan's
requests in static batches: when free it takes the arrived requests, FCFS, up to
``max_batch``; a batch prefills, then decodes until its longest request ends. Every
decode iteration streams all weights, each kernel taking at least its bytes over its
side's bandwidth, so an iteration lasts at least ``τ = weights / (HBM + LPDDR
bandwidth)`` (8-HBM: eight HBM stacks), and a prefill at least ``π = weights / (HBM
+ LPDDR bandwidth)`` (the prefill roofline's memory term). The prefill emits a
request's first token and each of its other ``o_k - 1`` takes an iteration, so a
batch holding request ``k`` lasts at least ``π + (o_k - 1) τ``. Hence:

* TPOT ≥ τ for every request with two tokens or more (others have no TPOT).
* Request ``i``'s batch starts no earlier than its arrival, than the batch of
  ``i - 1`` (FCFS), nor than the end of the batch of any ``k ≤ i - max_batch``
  (which holds fewer than ``i - k + 1`` requests, so is an earlier one): a start
  floor ``B_i = max(a_i, B_{i-1}, max_{k ≤ i - max_batch} B_k + π + (o_k - 1) τ)``,
  and TTFT_i ≥ ``B_i + π - a_i``.
* The span (first arrival to last finish) is at least every ``B_i + π + (o_i - 1) τ
  - a_0``, and at least the boards' busy time, which all falls in it: at least
  ``⌈n / max_batch⌉`` prefills and, a batch of ``s`` steps decoding at most
  ``min(n, max_batch) s`` tokens, ``Σ(o_k - 1) / min(n, max_batch)`` steps.

Chips (the count) speed up compute only, so every count shares the verdict. Energy
(memory access only in this model) is bounded by 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.shapes import LayerShapes
from simulations.core.errors import CapacityError
from simulations.core.screening import (
    SLACK,
    BoundContext,
    FitContext,
    SharedVerdict,
    SignatureLike,
)

from .mapping import MULTI_HBM_DEVICES


def hardware(ctx: FitContext, sig: SignatureLike) -> tuple[H2M2Hardware, LayerShapes]:
    """The H2M2 memory system of a signature as the policy builds it, and the layer shapes
    at its runtime's precisions (chips do not enter the screen's bounds)."""
    placements = ctx.placements(sig)
    hw = H2M2Hardware.from_placements(placements)
    return hw, LayerShapes.of(ctx.model, placements[0].runtime)


def fit(
    ctx: FitContext, sig: SignatureLike, opts: dict[str, Any]
) -> tuple[H2M2Hardware, LayerShapes]:
    """CapacityError when the weights alone exceed every memory the mapping may use
    (both tiers, the ``hierarchical`` system's HBM caching the LPDDR included; §5.5's
    8-HBM: eight HBM stacks): no mapping fits at any batch."""
    hw, shapes = hardware(ctx, sig)
    weights = shapes.n_layers * shapes.weight_bytes_per_layer
    if opts["mapping"] == "8-hbm":
        room = hw.hbm.capacity_bytes * MULTI_HBM_DEVICES
    else:
        room = hw.hbm.capacity_bytes + hw.lpddr.capacity_bytes
    if weights > room:
        raise CapacityError(
            "devices",
            f"{weights / 1e9:.1f} GB of weights exceed the {room / 1e9:.1f} GB the "
            f"{opts['mapping']} mapping can use",
        )
    return hw, shapes


def _static_batch_starts(a: np.ndarray, hold: np.ndarray, bmax: int) -> np.ndarray:
    """A floor on when the static batch of each request starts, for an FCFS batcher taking
    at most ``bmax`` arrived requests (``a`` sorted) into a batch that lasts at least
    ``hold[k]`` for each request ``k`` it holds: ``B_i = max(a_i, B_{i-1}, max_{k ≤ i -
    bmax} B_k + hold_k)`` (the requests ``k..i`` cannot share one batch)."""
    n = len(a)
    start = np.empty(n)
    done = -math.inf  # latest B_k + hold_k over k ≤ i - bmax
    prev = -math.inf
    for i in range(n):
        k = i - bmax
        if k >= 0:
            done = max(done, float(start[k] + hold[k]))
        prev = max(float(a[i]), prev, done)
        start[i] = prev
    return start


def bounds(
    ctx: BoundContext, opts: dict[str, Any], hw: H2M2Hardware, shapes: LayerShapes
) -> SharedVerdict:
    """The verdict every chip count shares (see the module docstring)."""
    weights = shapes.n_layers * shapes.weight_bytes_per_layer
    both = hw.hbm.bw_bytes_per_s + hw.lpddr.bw_bytes_per_s
    bw = hw.hbm.bw_bytes_per_s * MULTI_HBM_DEVICES if opts["mapping"] == "8-hbm" else both
    tau = weights / bw
    pre = weights / both
    r = ctx.req
    n = r.n
    bmax = int(opts["max_batch"])
    steps = r.o - 1  # the prefill emits the first token
    start = _static_batch_starts(r.a, pre + steps * tau, bmax)
    ttft_req = start + pre - r.a
    span = float(np.max(start + pre + steps * tau) - r.a[0])
    span = max(span, -(-n // bmax) * pre + float(steps.sum()) / min(n, bmax) * tau)
    targets = ctx.targets
    reason = ""

    def pct(values: np.ndarray, q: float) -> float:
        return float(np.percentile(values, q)) * 1e3 * (1 - SLACK)

    ttft_ms = tpot_ms = math.nan
    for i, (q, limit) in enumerate(targets.ttft()):
        v = pct(ttft_req, q)
        ttft_ms = v if i == 0 else ttft_ms
        if v > limit and not reason:
            reason = "ttft_alone"
    for i, (_, limit) in enumerate(targets.tpot() if bool(np.any(steps > 0)) else ()):
        v = tau * 1e3 * (1 - SLACK)
        tpot_ms = v if i == 0 else tpot_ms
        if v > limit and not reason:
            reason = "tpot_alone"
    thr = r.tokens / (span * (1 - SLACK))
    if targets.min_throughput_tok_s is not None and thr < targets.min_throughput_tok_s:
        reason = reason or "throughput"
    return SharedVerdict(reason, ttft_ms, tpot_ms, thr, energy_lb=0.0)
