# ruff: noqa: N806  (N, B, D, H, F: the paper's symbols for heads, batch and widths)
"""The board's greedy head-aware mapping (H2M2 §4.3, Algorithm 1).

Sublayers in the order attention, qkv-linear, fc; for each, the n that minimises the larger
of the two sides' *peak-execution* times while both capacities still hold (the LPDDR side
must keep room for the undecided sublayers). The peak-execution model (§4.3.2) is the ideal
time ops / chip peak, multiplied by an arithmetic-intensity factor: max(1, ridge /
intensity) against the memory (ridge = peak / bandwidth) and, for GEMMs, against the
weight-stationary array (a 128-row array shifts in one weight row per cycle, so M
activation rows use M/128 of it: factor 128 / M). Both are derived from Tables 1–2, nothing
is fitted. The model ignores barriers, exchanges, tile quantisation and kernel latencies,
which the full model of :mod:`.timing` includes. This is the mapping an H2M2 board makes at
every iteration; the paper's baselines and searches over all mappings are the ``h2m2``
policy's (``simulations.core.policies.h2m2.mapping``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from simulations.core.errors import CapacityError

from .accel import Side
from .board import H2M2Hardware
from .shapes import LayerShapes, Point
from .timing import PAGE_BYTES, Evaluation, Mapping, MappingTables, footprints

FloatArray = npt.NDArray[Any]

ORDER = ("attn", "qkv", "fc")  # Algorithm 1, line 2


def peak_times(shapes: LayerShapes, hw: H2M2Hardware, point: Point) -> dict[str, tuple]:
    """Peak-execution time per layer of each sublayer on each side for n = 0..N HBM units."""
    s, B = shapes, point.batch
    N, D, H, F = s.units, s.hidden, s.head_dim, s.ffn
    n = np.arange(N + 1, dtype=np.int64)
    a, w = s.a_bytes, s.w_bytes
    kv_h, kv_l = s.kv_heads_hbm(n), s.kv_heads_lpddr(n)
    c_h, c_l = s.qkv_cols(n, kv_h), s.qkv_cols(N - n, kv_l)
    p_h = s.fc_cols(n, D)
    u_h = s.fc_cols(n, F) * s.up_mult
    fc_w_h = s.q_width * p_h + D * u_h + F * p_h
    fc_w_l = s.q_width * (D - p_h) + D * (F * s.up_mult - u_h) + F * (D - p_h)
    kvt = point.kv_tokens
    work = {
        # (ops, bytes) per side; GEMMs on the MM peak, attention on the MV peak
        "qkv": (
            (2.0 * B * D * c_h, D * c_h * w + B * a * (D + c_h)),
            (2.0 * B * D * c_l, D * c_l * w + B * a * (D + c_l)),
        ),
        "attn": (
            (4.0 * n * kvt * H, 2.0 * kvt * H * kv_h * s.kv_bytes),
            (4.0 * (N - n) * kvt * H, 2.0 * kvt * H * kv_l * s.kv_bytes),
        ),
        "fc": ((2.0 * B * fc_w_h, fc_w_h * w), (2.0 * B * fc_w_l, fc_w_l * w)),
    }
    out: dict[str, tuple] = {}
    for name, ((oh, bh), (ol, bl)) in work.items():
        unit = "mv" if name == "attn" else "mm"
        out[name] = (_peak(hw.hbm, oh, bh, unit, B), _peak(hw.lpddr, ol, bl, unit, B))
    return out


def _peak(side: Side, ops: FloatArray, nbytes: FloatArray, unit: str, rows: int) -> FloatArray:
    acc = side.accel
    peak = (acc.mv_peak_ops if unit == "mv" else acc.mm_peak_ops) * side.chips
    ideal = ops / peak
    intensity = np.divide(ops, nbytes, out=np.zeros_like(ops, dtype=np.float64), where=nbytes > 0)
    ridge = peak / side.bw_bytes_per_s
    factor = np.where(intensity > 0, np.maximum(1.0, ridge / np.maximum(intensity, 1e-30)), 1.0)
    if unit == "mm" and rows > 1:
        factor = np.maximum(factor, acc.mm_rows / rows)
    return np.asarray(ideal * factor, dtype=np.float64)


def greedy_mapping(shapes: LayerShapes, hw: H2M2Hardware, point: Point) -> Mapping:
    """Algorithm 1 (see module docstring). Raises CapacityError when nothing fits."""
    cap, _, act = footprints(shapes, point, PAGE_BYTES)
    times = peak_times(shapes, hw, point)
    cap_h = hw.hbm.capacity_bytes - act
    cap_l = hw.lpddr.capacity_bytes - act
    used_h = used_l = 0.0
    chosen: dict[str, int] = {}
    for i, name in enumerate(ORDER):
        ch, cl = cap[name]
        rest_l = sum(float(cap[r][1][0]) for r in ORDER[i + 1 :])
        ok = (used_h + ch <= cap_h) & (used_l + cl + rest_l <= cap_l)
        if not ok.any():
            raise CapacityError(
                "model", f"{name} does not fit the asymmetric memory at {point.label}"
            )
        th, tl = times[name]
        cost = np.where(ok, np.maximum(th, tl), np.inf)
        k = int(np.argmin(cost))
        chosen[name] = k
        used_h += float(ch[k])
        used_l += float(cl[k])
    return Mapping(chosen["qkv"], chosen["attn"], chosen["fc"])


def head_aware_iteration(shapes: LayerShapes, hw: H2M2Hardware, point: Point) -> Evaluation:
    """One generation iteration as the board runs it: Algorithm 1's mapping, timed by the
    full model with the memory abstraction's costs (§4.2)."""
    tab = MappingTables(shapes, hw, point, abstraction=True)
    return tab.evaluate(greedy_mapping(shapes, hw, point), "h2m2")
