# ruff: noqa: N806  (N, L, B, D, H, F: the paper's symbols for heads, layers, batch and widths)
"""Kernel-memory mapping decisions (H2M2 §3.2–3.3, §4.3) and the systems compared in §5.

Decisions on the asymmetric memory, each returning a :class:`Mapping` ``(nQ, nA, nF)``:

* ``h2m2`` — Algorithm 1, the board's own greedy head-aware mapping
  (:func:`simulations.core.devices.h2m2.greedy.greedy_mapping`).
* :func:`oracle_mapping` — exhaustive search of all (N+1)³ mappings on the full cost model
  (the paper's N³ "profiling" of Best/Oracle), vectorised.
* :func:`major_mapping` — Q-, A-, F-major (Fig. 8): as many units of one sublayer on HBM as
  the capacities allow, the other two by exhaustive search (N²).
* :func:`sublayer_mapping` — naive sublayer granularity (Fig. 5a): each sublayer wholly on one
  side, best of the 8 choices.
* :func:`flexgen_lp_mapping` — FlexGen's linear program (Eq. 1) adapted to two sides: fractions
  of weights (w), KV cache (c) and activations (h) on HBM, minimising the larger side's
  compute time (FLOPs / peak) under both capacities, as §3.2 describes FlexGen's model ("only
  considers the total capacity and FLOP assigned to each side"); qkv-linear and fc share w.
  :func:`flexgen_static_mapping` solves it once, at a run's peak memory, and the plan is kept
  for every point (§3.2: FlexGen's mapping "remains static when batch sizes and sequence
  lengths change"); ``run_system(..., decided=plan)`` evaluates it.
* The LPDDR-only baseline (``lpddr-only``) is Fig. 4(b) with sublayer-granular mapping
  (Fig. 5a), as §3.1 normalises every speedup, on §5.1's two chips: each sublayer wholly on
  one chip, so one chip per kernel beside the LPDDR (see ``H2M2Hardware.lpddr_only``).

Deviations: the search space includes n = 0 and n = N for every sublayer, (N+1)³ = 912,673
mappings for GPT3-175B where the paper counts N³ = 884,736.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from simulations.core.devices.h2m2.accel import Side
from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.greedy import greedy_mapping
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import (
    PAGE_BYTES,
    Evaluation,
    Mapping,
    MappingTables,
    footprints,
)
from simulations.core.errors import CapacityError, SpecError

FloatArray = npt.NDArray[Any]

#: the systems :func:`run_system` knows; the first ten are the policy's ``mapping`` choices
SYSTEMS = (
    "h2m2",
    "oracle",
    "lpddr-only",
    "hierarchical",
    "sublayer",
    "flexgen-lp",
    "q-major",
    "a-major",
    "f-major",
    "8-hbm",
)

#: §5.5: 8-HBM has eight HBM devices; its communication cost was profiled on eight A100s
MULTI_HBM_DEVICES = 8
#: NVIDIA A100 datasheet: third-generation NVLink 600 GB/s total (300 GB/s each direction)
A100_NVLINK_GBPS_PER_DIRECTION = 300.0


# --- exhaustive searches -------------------------------------------------------------------


def _masked_times(tables: MappingTables) -> FloatArray:
    t = tables.all_times()
    return np.where(tables.all_feasible(), t, np.inf)


def _argmin3(t: FloatArray, what: str) -> Mapping:
    flat = int(np.argmin(t))
    if not np.isfinite(t.flat[flat]):
        raise CapacityError("model", f"no {what} mapping fits the asymmetric memory")
    q, a, f = np.unravel_index(flat, t.shape)
    return Mapping(int(q), int(a), int(f))


def oracle_mapping(tables: MappingTables) -> Mapping:
    """The best of all (N+1)³ mappings on the full cost model (Oracle / Best)."""
    return _argmin3(_masked_times(tables), "oracle")


def major_mapping(tables: MappingTables, major: str) -> Mapping:
    """Q-, A- or F-major (``major`` in qkv, attn, fc): that sublayer keeps as many units in
    HBM as the capacities allow, the other two are searched exhaustively."""
    axis = {"qkv": 0, "attn": 1, "fc": 2}[major]
    t = _masked_times(tables)
    feasible_any = np.isfinite(t).any(axis=tuple(i for i in range(3) if i != axis))
    if not feasible_any.any():
        raise CapacityError("model", "no mapping fits the asymmetric memory")
    n = int(np.nonzero(feasible_any)[0].max())
    sl = [slice(None)] * 3
    sl[axis] = slice(n, n + 1)
    sub = t[tuple(sl)]
    best = _argmin3(sub, f"{major}-major")
    idx = list(best.as_tuple())
    idx[axis] = n
    return Mapping(*idx)


def sublayer_mapping(tables: MappingTables) -> Mapping:
    """Naive sublayer granularity (Fig. 5a): every sublayer wholly on one side."""
    N = tables.N
    t = _masked_times(tables)
    ends = np.array([0, N])
    sub = t[np.ix_(ends, ends, ends)]
    best = _argmin3(sub, "sublayer-granular")
    return Mapping(*(int(ends[i]) for i in best.as_tuple()))


# --- FlexGen's linear program (Eq. 1 adapted) ------------------------------------------------


def flexgen_lp(
    shapes: LayerShapes, hw: H2M2Hardware, point: Point
) -> tuple[FloatArray, dict[str, float]]:
    """Solve Eq. 1 for the two sides; returns x = (w, c, h, t) and the LP's constants.

    Variables: w, c, h ∈ [0, 1] — fractions of weights, KV cache and activations on HBM (the
    LPDDR side holds 1 − each, so the ``w_g + w_c + w_d = 1`` rows are substituted); t ≥ each
    side's compute time (FLOPs / the chip's MM peak). Constraints: each side's peak memory
    under its capacity.
    """
    s, B = shapes, point.batch
    L = s.n_layers
    W = L * s.weight_bytes_per_layer
    KV = L * point.kv_tokens * s.kv_bytes_per_token_layer()
    _, _, act = footprints(shapes, point, PAGE_BYTES)
    w_ops = 2.0 * B * L * s.weight_bytes_per_layer / s.w_bytes
    c_ops = 4.0 * L * s.n_heads * s.head_dim * point.kv_tokens
    peak_h = hw.hbm.accel.mm_peak_ops * hw.hbm.chips
    peak_l = hw.lpddr.accel.mm_peak_ops * hw.lpddr.chips
    c = np.array([0.0, 0.0, 0.0, 1.0])  # minimise t
    a_ub = np.array(
        [
            [w_ops / peak_h, c_ops / peak_h, 0.0, -1.0],  # t ≥ HBM-side compute
            [-w_ops / peak_l, -c_ops / peak_l, 0.0, -1.0],  # t ≥ LPDDR-side compute
            [W, KV, act, 0.0],  # HBM peak memory ≤ capacity
            [-W, -KV, -act, 0.0],  # LPDDR peak memory ≤ capacity
        ]
    )
    b_ub = np.array(
        [
            0.0,
            -(w_ops + c_ops) / peak_l,
            hw.hbm.capacity_bytes,
            hw.lpddr.capacity_bytes - W - KV - act,
        ]
    )
    # Imported here: scipy.optimize takes 0.4 s to import, which every command's start-up
    # (the policy registry imports this module) would pay.
    from scipy.optimize import linprog

    res = linprog(
        c, A_ub=a_ub, b_ub=b_ub, bounds=[(0, 1), (0, 1), (0, 1), (0, None)], method="highs"
    )
    if not res.success:
        raise CapacityError("model", f"FlexGen's LP has no solution at {point.label}")
    consts = {"W": W, "KV": KV, "act": act, "w_ops": w_ops, "c_ops": c_ops}
    return np.asarray(res.x, dtype=np.float64), consts


def flexgen_lp_mapping(
    shapes: LayerShapes, hw: H2M2Hardware, point: Point, tables: MappingTables | None = None
) -> Mapping:
    """The LP's fractions rounded to heads (qkv-linear and fc at w, attention at c), then
    lowered one unit at a time (attention last) until the page-rounded mapping fits."""
    x, _ = flexgen_lp(shapes, hw, point)
    N = shapes.units
    nq = nf = round(float(x[0]) * N)
    na = round(float(x[1]) * N)
    tab = tables if tables is not None else MappingTables(shapes, hw, point)
    m = Mapping(nq, na, nf)
    while not tab.feasible(m):
        if m.n_fc > 0 and m.n_fc >= m.n_qkv:
            m = Mapping(m.n_qkv, m.n_attn, m.n_fc - 1)
        elif m.n_qkv > 0:
            m = Mapping(m.n_qkv - 1, m.n_attn, m.n_fc)
        elif m.n_attn > 0:
            m = Mapping(m.n_qkv, m.n_attn - 1, m.n_fc)
        else:
            raise CapacityError("model", "FlexGen's mapping does not fit")
    return m


def flexgen_static_mapping(shapes: LayerShapes, hw: H2M2Hardware, points: list[Point]) -> Mapping:
    """FlexGen's plan for a whole run: Eq. 1 solved once, at the point of peak memory, and
    kept for every (batch, sequence) point (§3.2: FlexGen "does not account for changes in
    batch size or sequence length", "the mapping of FlexGen remains static when batch sizes
    and sequence lengths change"; Eq. 1 bounds each side's *peak* memory). Footprints grow
    with the KV cache, so the plan fits every point that does not exceed the peak."""
    if not points:
        raise SpecError("points", "FlexGen's static plan needs at least one point")
    peak = max(points, key=lambda p: shapes.total_bytes(p.kv_tokens) + p.batch)
    return flexgen_lp_mapping(shapes, hw, peak)


# --- systems -------------------------------------------------------------------------------


def _single_side(shapes: LayerShapes, side: Side, point: Point) -> MappingTables:
    # every unit on one side: the other slot is never given work
    return MappingTables(shapes, H2M2Hardware(side, side, 1e6), point)


def _all_on_one(tables: MappingTables) -> Mapping:
    N = tables.N
    return Mapping(N, N, N)


def run_system(
    shapes: LayerShapes,
    hw: H2M2Hardware,
    point: Point,
    system: str,
    *,
    tables: MappingTables | None = None,
    decided: Mapping | None = None,
) -> Evaluation:
    """One generation iteration of ``system`` (one of :data:`SYSTEMS`).

    ``decided`` replaces the system's own decision at this point by a mapping decided
    elsewhere (FlexGen's static plan, see :func:`flexgen_static_mapping`); it must fit.
    """
    if system not in SYSTEMS:
        raise SpecError("mapping", f"unknown H2M2 system {system!r}; one of {', '.join(SYSTEMS)}")
    ops = shapes.ops_per_iteration(point.batch, point.kv_tokens)
    total = shapes.total_bytes(point.kv_tokens)

    if system in ("lpddr-only", "hierarchical", "8-hbm"):
        return _homogeneous(shapes, hw, point, system, ops, total)

    abstraction = system == "h2m2"
    tab = tables
    if tab is None or tab.abstraction != abstraction:
        tab = MappingTables(shapes, hw, point, abstraction=abstraction)
    if decided is not None:
        if not tab.feasible(decided):
            raise CapacityError("mapping", f"{decided} does not fit at {point.label}")
        m = decided
    elif system == "h2m2":
        m = greedy_mapping(shapes, hw, point)
    elif system == "oracle":
        m = oracle_mapping(tab)
    elif system == "sublayer":
        m = sublayer_mapping(tab)
    elif system == "flexgen-lp":
        m = flexgen_lp_mapping(shapes, hw, point, tab)
    else:
        m = major_mapping(tab, {"q-major": "qkv", "a-major": "attn", "f-major": "fc"}[system])
    return tab.evaluate(m, system)


def _homogeneous(
    shapes: LayerShapes, hw: H2M2Hardware, point: Point, system: str, ops: float, total: float
) -> Evaluation:
    L = shapes.n_layers
    if system == "lpddr-only":
        side = hw.lpddr_only()
        if total > side.capacity_bytes:
            raise CapacityError("model", f"does not fit LPDDR-only memory at {point.label}")
        tab = _single_side(shapes, side, point)
        m = _all_on_one(tab)
        read, _, _ = tab.traffic(m)
        return Evaluation(system, L * tab.layer_time(m), None, 0.0, read, 0.0, ops, 0.0, total)
    if system == "8-hbm":
        side = hw.multi_hbm(MULTI_HBM_DEVICES)
        if total > side.capacity_bytes:
            raise CapacityError("model", f"does not fit 8-HBM memory at {point.label}")
        tab = _single_side(shapes, side, point)
        m = _all_on_one(tab)
        read, _, _ = tab.traffic(m)
        # tensor parallelism over the devices: a ring all-reduce after the attention
        # projection and after the FFN (2 (p-1)/p of the activations each way)
        p = MULTI_HBM_DEVICES
        act = point.batch * shapes.hidden * shapes.a_bytes
        ring = 2 * (p - 1) / p * act / (A100_NVLINK_GBPS_PER_DIRECTION * 1e9)
        comm = 2 * ring
        seconds = L * (tab.layer_time(m) + comm)
        moved = L * 2 * 2 * (p - 1) / p * act * p
        return Evaluation(
            system,
            seconds,
            None,
            read + 2 * moved,
            0.0,
            moved,
            ops,
            total,
            0.0,
            {"comm_s": L * comm},
        )
    # strict hierarchy (Fig. 4c): both chips beside the HBM, which caches the LPDDR
    side = hw.hbm_both_chips()
    # The footprint must fit the two memories together (the most permissive reading: an
    # exclusive cache; an inclusive one would hold it all in the LPDDR), as every other
    # mapping's footprint must fit the memory it uses.
    room = hw.hbm.capacity_bytes + hw.lpddr.capacity_bytes
    if total > room:
        raise CapacityError("model", f"does not fit hierarchical HBM+LPDDR memory at {point.label}")
    if total <= side.capacity_bytes:
        tab = _single_side(shapes, side, point)
        m = _all_on_one(tab)
        read, _, _ = tab.traffic(m)
        return Evaluation(
            system,
            L * tab.layer_time(m),
            None,
            read,
            0.0,
            0.0,
            ops,
            total,
            0.0,
            {"hit_fraction": 1.0},
        )
    # The iteration scans the whole footprint once, in the same order every time: with the
    # footprint above the HBM capacity an LRU cache evicts every page before its reuse
    # (hit fraction 0, see memory.lru_hit_fraction), so every access migrates its page on
    # demand: LPDDR read, interconnect, HBM write, then the chip's HBM read. Pages stream
    # (the next migrates while the chips work on the current one); the first page of each
    # kernel is exposed.
    stream_bps = min(hw.lpddr.bw_bytes_per_s, hw.link_gbps * 1e9, side.bw_bytes_per_s / 2.0)
    fault = PAGE_BYTES / stream_bps + hw.lpddr.latency_s
    streaming = replace(side, bw_gbps=stream_bps / 1e9, fault_s=fault)
    tab = _single_side(shapes, streaming, point)
    m = _all_on_one(tab)
    read, _, _ = tab.traffic(m)
    return Evaluation(
        system,
        L * tab.layer_time(m),
        None,
        2.0 * read,
        read,
        read,
        ops,
        side.capacity_bytes,
        total,
        {"hit_fraction": 0.0},
    )
