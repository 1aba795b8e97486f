"""The capacity planner's bounds on GLITCHES systems (GPU prefill, FPGA decode); the memory
fit is the scheduler's own constructor (:meth:`.policy.GlitchesPolicy.screen_fit`).

Count column 0 is the ``prefill`` role (GPUs), column 1 the optional ``decode`` role
(FPGAs). Bounds, each optimistic for feasibility (``simulations.core.screening``):

* a request's TTFT is at least its batch-1 prefill on its prefill GPU, its TPOT at least
  its decode step time on the fastest device that may decode it (the FPGA, or the GPU when
  ``gpu_decode`` lets an idle GPU decode);
* prefill capacity: the GPUs' time must hold the on-time requests' prefills (TTFT target);
* decode capacity: requests meeting both targets need their prefill and decode in time on
  every device that may serve them — and on the FPGAs alone when GPUs never decode;
* energy: every device's idle power over the span plus each request's cheapest phase
  energy above idle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulations.core.screening import (
    SLACK,
    BoundContext,
    Bounds,
    LateCheck,
    SignatureLike,
    allowed_late,
)


def bounds(ctx: BoundContext, sig: SignatureLike, opts: dict[str, Any], cmax: int) -> Bounds | None:
    """GPU prefill (count column 0), FPGA decode (column 1, optional)."""
    prefetch = int(opts["prefetch_ratio"])
    g_entry = sig.role_entry("prefill")
    f_entry = sig.role_entry("decode")
    assert g_entry is not None
    g = ctx.table(g_entry)
    f = ctx.table(f_entry, {"prefetch_ratio": prefetch}) if f_entry is not None else None
    gpu_decode = bool(opts["gpu_decode"]) or f is None
    decoders = [x for x in (f, g if gpu_decode else None) if x is not None]
    decode_min = np.min(np.stack([x.decode_s for x in decoders]), axis=0)
    if not (np.all(np.isfinite(g.prefill_s)) and np.all(np.isfinite(decode_min))):
        return None
    r = ctx.req
    per_step = ctx.per_step(decode_min)
    b = Bounds(
        ttft_req=g.prefill_s,
        tpot_req=per_step[r.multi],
        finish_req=g.prefill_s + decode_min,
    )
    cols_all = (0, 1) if f is not None else (0,)
    for q, ttft_ms in ctx.targets.ttft():
        ttft_s = ttft_ms / 1e3
        late = ctx.late(
            ("g", g_entry, ttft_s),
            np.full(r.n, ttft_s),
            lambda idx, end: g.prefill_s[idx],
            g.prefill_s <= ttft_s * (1 + SLACK),
            cmax,
        )
        b.checks.append(LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
    key = ("g", g_entry, f_entry, prefetch, gpu_decode)
    work_s = g.prefill_s + decode_min
    ctx.both_checks(b, (*key, "all"), g.prefill_s, per_step, work_s, cols_all, cmax)
    if f is not None and not gpu_decode:
        # Only the FPGAs decode: their time alone must hold the decodes.
        per_f = ctx.per_step(f.decode_s)
        ctx.both_checks(b, (*key, "fpga"), g.prefill_s, per_f, f.decode_s, (1,), cmax)
    b.work.append((float(g.prefill_s.sum()), (0,)))
    b.work.append((float(work_s.sum()), cols_all))
    # Energy = Σ devices idle × span + Σ phases (joules − idle × seconds), exactly: each
    # request is prefilled once on a GPU and decoded step by step on one device.
    excess_d = np.min(
        np.stack(
            [
                np.where(np.isfinite(x.decode_s), x.decode_j - x.idle_w * x.decode_s, np.inf)
                for x in decoders
            ]
        ),
        axis=0,
    )
    b.power_w = (g.idle_w,) + ((f.idle_w,) if f is not None else ())
    b.excess_j = float(np.sum(g.prefill_j - g.idle_w * g.prefill_s + excess_d))
    return b
