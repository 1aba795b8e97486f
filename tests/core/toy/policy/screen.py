"""The toy policy's bounds, written from the screen's vocabulary alone: a request's TTFT
is at least its batch-1 prefill, its TPOT its batch-1 decode step, the devices' time at
least the total work over their count, and the energy at least every device's idle power
over the span plus each request's phases above idle."""

from __future__ import annotations

import numpy as np

from simulations.core.screening import BoundContext, Bounds, SignatureLike


def bounds(ctx: BoundContext, sig: SignatureLike) -> Bounds | None:
    """The bounds of one entry's replicas (count column 0)."""
    t = ctx.table(sig.roles[0][1])
    if not t.finite:
        return None
    per_step = ctx.per_step(t.decode_s)
    serve = t.prefill_s + t.decode_s
    b = Bounds(ttft_req=t.prefill_s, tpot_req=per_step[ctx.req.multi], finish_req=serve)
    b.work.append((float(serve.sum()), (0,)))
    b.power_w = (t.idle_w,)
    b.excess_j = float(
        np.sum(t.prefill_j - t.idle_w * t.prefill_s + t.decode_j - t.idle_w * t.decode_s)
    )
    return b
