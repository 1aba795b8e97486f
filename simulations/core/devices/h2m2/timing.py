# ruff: noqa: N806  (N, L, B, D, H, F: the paper's symbols for heads, layers, batch and widths)
"""Time, traffic and footprint of every head-aware kernel-memory mapping (H2M2 §3.1, Fig. 5b).

A mapping is ``(nQ, nA, nF)``: how many of the ``N`` units of qkv-linear, attention and fc
sit on the HBM side (the rest on the LPDDR side). With head-aware granularity each kernel
runs on both chips at once and a barrier follows it (§3.1), so a layer's time is

    Σ_kernels max(t_HBM(kernel), t_LPDDR(kernel)) + barriers + activation exchanges,

where the exchanges move, over the interconnect, the activations a side needs but the other
side produced: Q/K/V of heads whose qkv-linear and attention sit on different sides, the
attention output and fc outputs (fc's inputs are copied to both sides, §3.1). Every term is a
function of one or two of ``nQ, nA, nF``, so the time of all (N+1)³ mappings is a broadcast
sum of small tables (:class:`MappingTables`), which is how the Oracle's exhaustive search
stays fast.

Homogeneous systems (LPDDR-only, the strict hierarchy, 8-HBM) are the same tables with every
unit on one side, which keeps all systems on one cost model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from .accel import Side
from .board import H2M2Hardware
from .shapes import LayerShapes, Point, page_ceil

FloatArray = npt.NDArray[Any]
IntArray = npt.NDArray[Any]

#: §4.2.1: "our system employs a 2MB huge page"
PAGE_BYTES = 2 * 2**20


@dataclass(frozen=True)
class Mapping:
    """Units of qkv-linear, attention and fc on the HBM side."""

    n_qkv: int
    n_attn: int
    n_fc: int

    def as_tuple(self) -> tuple[int, int, int]:
        """(nQ, nA, nF)."""
        return (self.n_qkv, self.n_attn, self.n_fc)


@dataclass
class _Kernel:
    """One kernel of a sublayer: its time on each side for n = 0..N HBM units, the traffic
    each side's memory serves, and what follows it (barrier and in-sublayer exchange)."""

    t_hbm: FloatArray
    t_lpddr: FloatArray
    bytes_hbm: FloatArray
    bytes_lpddr: FloatArray
    after_s: FloatArray
    link_bytes: FloatArray


def _works(n: IntArray, total: int) -> tuple[FloatArray, FloatArray]:
    """1.0 where the HBM side (resp. LPDDR side) has units of this sublayer."""
    return (n > 0).astype(np.float64), (n < total).astype(np.float64)


Footprint = dict[str, tuple[FloatArray, FloatArray]]


def footprints(
    s: LayerShapes, p: Point, page: float = PAGE_BYTES
) -> tuple[Footprint, Footprint, float]:
    """Bytes each sublayer puts on the HBM and LPDDR sides for n = 0..N HBM units, over all
    layers: page-rounded (every (layer, side, tensor) is one logically contiguous region
    backed by whole pages, §4.2; the KV cache of a layer and side is one growing K and one
    growing V region), the same unrounded, and the page-rounded activation buffers one side
    keeps (reused by every layer)."""
    N, L, D = s.units, s.n_layers, s.hidden
    n = np.arange(N + 1, dtype=np.int64)
    kv_h, kv_l = s.kv_heads_hbm(n), s.kv_heads_lpddr(n)
    w = s.w_bytes
    cq_h = s.qkv_cols(n, kv_h) * D * w
    cq_l = s.qkv_cols(N - n, kv_l) * D * w
    ca_h = p.kv_tokens * s.head_dim * kv_h * s.kv_bytes
    ca_l = p.kv_tokens * s.head_dim * kv_l * s.kv_bytes
    u_h = s.fc_cols(n, s.ffn)
    p_h = s.fc_cols(n, D)
    d_h = s.fc_cols(n, D)
    gate = 1 if s.gated else 0
    fc_h = [s.q_width * p_h * w, D * u_h * w, gate * D * u_h * w, s.ffn * d_h * w]
    fc_l = [
        s.q_width * (D - p_h) * w,
        D * (s.ffn - u_h) * w,
        gate * D * (s.ffn - u_h) * w,
        s.ffn * (D - d_h) * w,
    ]
    raw: Footprint = {
        "qkv": (L * cq_h.astype(np.float64), L * cq_l.astype(np.float64)),
        "attn": (L * 2.0 * ca_h, L * 2.0 * ca_l),
        "fc": (
            L * np.asarray(np.sum(fc_h, axis=0), dtype=np.float64),
            L * np.asarray(np.sum(fc_l, axis=0), dtype=np.float64),
        ),
    }
    cap: Footprint = {
        "qkv": (L * page_ceil(cq_h, page), L * page_ceil(cq_l, page)),
        "attn": (L * 2 * page_ceil(ca_h, page), L * 2 * page_ceil(ca_l, page)),
        "fc": (
            L * np.sum([page_ceil(x, page) for x in fc_h], axis=0),
            L * np.sum([page_ceil(x, page) for x in fc_l], axis=0),
        ),
    }
    act = p.batch * s.a_bytes * (2 * D + 3 * s.q_width + s.up_mult * s.ffn)
    return cap, raw, float(page_ceil(act, page))


class MappingTables:
    """Per-unit-count tables of one (model, hardware, iteration) for vectorised evaluation.

    ``abstraction`` adds the memory abstraction's TLB misses (§4.2.1) on a side whose pages
    outnumber its TLB entries (its reach); the Oracle is evaluated without it (§5.2.1).
    """

    def __init__(
        self,
        shapes: LayerShapes,
        hw: H2M2Hardware,
        point: Point,
        *,
        abstraction: bool = False,
        page_bytes: float = PAGE_BYTES,
    ) -> None:
        self.shapes = shapes
        self.hw = hw
        self.point = point
        self.page_bytes = page_bytes
        self.abstraction = abstraction
        self.N = shapes.units
        self.n = np.arange(self.N + 1, dtype=np.int64)
        acc = hw.hbm.accel
        self.barrier_s = acc.hbm_latency_ns * 1e-9 + acc.lpddr_latency_ns * 1e-9
        self.link_bps = hw.link_gbps * 1e9
        self._build()

    # --- construction -------------------------------------------------------------------

    def _sides(self, miss: bool) -> tuple[Side, Side]:
        if not miss:
            return self.hw.hbm, self.hw.lpddr
        t = self.hw.hbm.accel.tlb_miss_ns * 1e-9
        return (
            replace(self.hw.hbm, tlb_miss_s=t, page_bytes=self.page_bytes),
            replace(self.hw.lpddr, tlb_miss_s=t, page_bytes=self.page_bytes),
        )

    def _exchange(self, to_lpddr: FloatArray, to_hbm: FloatArray) -> FloatArray:
        nbytes = to_lpddr + to_hbm
        return np.where(nbytes > 0, nbytes / self.link_bps + self.barrier_s, 0.0)

    def _kernels(self, hbm: Side, lpddr: Side) -> dict[str, list[_Kernel]]:
        s, p = self.shapes, self.point
        n, N = self.n, self.N
        B = p.batch
        a, w = s.a_bytes, s.w_bytes
        D, H, F = s.hidden, s.head_dim, s.ffn
        qw = s.q_width
        on_h, on_l = _works(n, N)
        zeros = np.zeros(N + 1)
        bar = np.full(N + 1, self.barrier_s)

        # qkv-linear: layer norm on each working side, then one fused GEMM per side
        kv_h, kv_l = s.kv_heads_hbm(n), s.kv_heads_lpddr(n)
        cols_h, cols_l = s.qkv_cols(n, kv_h), s.qkv_cols(N - n, kv_l)
        ln = float(B * D)
        qkv = _Kernel(
            hbm.vector_s(ln * on_h, ln * a * on_h, passes=2)
            + hbm.gemm_s(B, D, cols_h, act_bytes=a, weight_bytes=w),
            lpddr.vector_s(ln * on_l, ln * a * on_l, passes=2)
            + lpddr.gemm_s(B, D, cols_l, act_bytes=a, weight_bytes=w),
            (D * cols_h * w + B * a * (2 * D + cols_h)) * on_h,
            (D * cols_l * w + B * a * (2 * D + cols_l)) * on_l,
            bar,
            zeros,
        )

        # attention: q·Kᵀ, softmax, ·V fused per side over its heads' KV cache
        kv_tok = p.kv_tokens
        kvb_h = kv_tok * 2 * H * kv_h * s.kv_bytes
        kvb_l = kv_tok * 2 * H * kv_l * s.kv_bytes
        attn = _Kernel(
            hbm.attention_s(n, kvb_h, kv_tok, H),
            lpddr.attention_s(N - n, kvb_l, kv_tok, H),
            kvb_h,
            kvb_l,
            bar,
            zeros,
        )

        # fc: projection, (residual + layer norm) + FFN up (+gate) + activation, FFN down —
        # every matrix split column-wise, inputs copied to both sides
        p_h = s.fc_cols(n, D)
        p_l = D - p_h
        u_h = s.fc_cols(n, F)
        u_l = F - u_h
        d_h = s.fc_cols(n, D)
        d_l = D - d_h
        m = s.up_mult
        proj = _Kernel(
            hbm.gemm_s(B, qw, p_h, act_bytes=a, weight_bytes=w),
            lpddr.gemm_s(B, qw, p_l, act_bytes=a, weight_bytes=w),
            (qw * p_h * w + B * a * (qw + p_h)) * on_h,
            (qw * p_l * w + B * a * (qw + p_l)) * on_l,
            self._exchange(B * a * p_h * on_l, B * a * p_l * on_h),
            B * a * (p_h * on_l + p_l * on_h),
        )
        up = _Kernel(
            hbm.vector_s(ln * 3 * on_h, 2 * ln * a * on_h)
            + hbm.gemm_s(B, D, m * u_h, act_bytes=a, weight_bytes=w)
            + hbm.vector_s(B * u_h * m, 0.0 * u_h),
            lpddr.vector_s(ln * 3 * on_l, 2 * ln * a * on_l)
            + lpddr.gemm_s(B, D, m * u_l, act_bytes=a, weight_bytes=w)
            + lpddr.vector_s(B * u_l * m, 0.0 * u_l),
            (D * m * u_h * w + B * a * (3 * D + m * u_h)) * on_h,
            (D * m * u_l * w + B * a * (3 * D + m * u_l)) * on_l,
            self._exchange(B * a * u_h * on_l, B * a * u_l * on_h),
            B * a * (u_h * on_l + u_l * on_h),
        )
        down = _Kernel(
            hbm.gemm_s(B, F, d_h, act_bytes=a, weight_bytes=w),
            lpddr.gemm_s(B, F, d_l, act_bytes=a, weight_bytes=w),
            (F * d_h * w + B * a * (F + d_h)) * on_h,
            (F * d_l * w + B * a * (F + d_l)) * on_l,
            bar,
            zeros,
        )
        return {"qkv": [qkv], "attn": [attn], "fc": [proj, up, down]}

    def _build(self) -> None:
        s, p = self.shapes, self.point
        n, N = self.n, self.N
        B, a = p.batch, s.a_bytes
        D, H = s.hidden, s.head_dim
        page = self.page_bytes

        self.kernels = self._kernels(*self._sides(False))
        self.kernels_tlb = self._kernels(*self._sides(True)) if self.abstraction else None

        # cross-sublayer exchanges (index order [first sublayer's n, second's n])
        per_head = B * H * a * (1.0 + 2.0 / s.group)
        diff = np.abs(n[:, None] - n[None, :]).astype(np.float64)
        self.x_qa_bytes = diff * per_head
        on_h, on_l = _works(n, N)
        self.x_af_bytes = (
            B * H * a * ((N - n)[:, None] * on_h[None, :] + n[:, None] * on_l[None, :])
        )
        d_h = s.fc_cols(n, D).astype(np.float64)
        self.x_fq_bytes = (
            B * a * ((D - d_h)[:, None] * on_h[None, :] + d_h[:, None] * on_l[None, :])
        )
        link = self.link_bps
        self.x_qa = np.where(self.x_qa_bytes > 0, self.x_qa_bytes / link, 0.0)
        self.x_af = np.where(self.x_af_bytes > 0, self.x_af_bytes / link + self.barrier_s, 0.0)
        self.x_fq = np.where(self.x_fq_bytes > 0, self.x_fq_bytes / link + self.barrier_s, 0.0)

        self.cap, self.raw_bytes, self.act_bytes = footprints(s, p, page)

    # --- per-sublayer times ---------------------------------------------------------------

    def _sublayer(self, name: str, kernels: dict[str, list[_Kernel]]) -> FloatArray:
        return np.asarray(
            sum(np.maximum(k.t_hbm, k.t_lpddr) + k.after_s for k in kernels[name]),
            dtype=np.float64,
        )

    @cached_property
    def t(self) -> dict[str, FloatArray]:
        """Per-layer time of each sublayer for n = 0..N HBM units (no TLB misses)."""
        return {k: self._sublayer(k, self.kernels) for k in ("qkv", "attn", "fc")}

    def side_times(self, name: str, tlb: tuple[bool, bool] = (False, False)) -> list[tuple]:
        """(t_hbm, t_lpddr, after) per kernel of sublayer ``name``; ``tlb`` selects the
        TLB-missing variant per side."""
        out = []
        plain = self.kernels[name]
        miss = self.kernels_tlb[name] if self.kernels_tlb is not None else plain
        for k0, k1 in zip(plain, miss, strict=True):
            th = k1.t_hbm if tlb[0] else k0.t_hbm
            tl = k1.t_lpddr if tlb[1] else k0.t_lpddr
            out.append((th, tl, k0.after_s))
        return out

    # --- whole-mapping quantities ----------------------------------------------------------

    def footprint(self, m: Mapping) -> tuple[float, float]:
        """Bytes (page-rounded, with activation buffers) on the HBM and LPDDR sides."""
        idx = {"qkv": m.n_qkv, "attn": m.n_attn, "fc": m.n_fc}
        h = sum(float(self.cap[k][0][i]) for k, i in idx.items()) + self.act_bytes
        lp = sum(float(self.cap[k][1][i]) for k, i in idx.items()) + self.act_bytes
        return h, lp

    def feasible(self, m: Mapping) -> bool:
        """Whether ``m`` fits both capacities."""
        h, lp = self.footprint(m)
        return h <= self.hw.hbm.capacity_bytes and lp <= self.hw.lpddr.capacity_bytes

    def layer_time(self, m: Mapping, *, with_abstraction: bool = False) -> float:
        """Seconds of one decoder layer under ``m``."""
        q, a_, f = m.as_tuple()
        if with_abstraction and self.kernels_tlb is not None:
            h, lp = self.footprint(m)
            entries = self.hw.hbm.accel.tlb_entries
            reach = entries * self.page_bytes
            tlb = (h > reach, lp > reach)
            total = 0.0
            for name, i in (("qkv", q), ("attn", a_), ("fc", f)):
                for th, tl, after in self.side_times(name, tlb):
                    total += max(float(th[i]), float(tl[i])) + float(after[i])
        else:
            total = float(self.t["qkv"][q] + self.t["attn"][a_] + self.t["fc"][f])
        total += float(self.x_qa[q, a_] + self.x_af[a_, f] + self.x_fq[f, q])
        return total

    def traffic(self, m: Mapping) -> tuple[float, float, float]:
        """Bytes one iteration reads/writes in HBM, in LPDDR, and moves over the link."""
        idx = {"qkv": m.n_qkv, "attn": m.n_attn, "fc": m.n_fc}
        bh = bl = link = 0.0
        for name, i in idx.items():
            for k in self.kernels[name]:
                bh += float(k.bytes_hbm[i])
                bl += float(k.bytes_lpddr[i])
                link += float(k.link_bytes[i])
        q, a_, f = m.as_tuple()
        link += float(self.x_qa_bytes[q, a_] + self.x_af_bytes[a_, f] + self.x_fq_bytes[f, q])
        L = self.shapes.n_layers
        return bh * L, bl * L, link * L

    # --- the whole space at once (Oracle) ------------------------------------------------

    def evaluate(self, m: Mapping, system: str) -> Evaluation:
        """One generation iteration of all layers under the head-aware mapping ``m``, named
        ``system`` in the result; with :attr:`abstraction`, its time includes the memory
        abstraction's TLB misses (and ``extra`` the time without them)."""
        L = self.shapes.n_layers
        ops = self.shapes.ops_per_iteration(self.point.batch, self.point.kv_tokens)
        per_layer = self.layer_time(m, with_abstraction=self.abstraction)
        bh, bl, link = self.traffic(m)
        used_h, used_l = self.footprint(m)
        extra: dict[str, float] = {}
        if self.abstraction:
            extra["seconds_without_abstraction"] = L * self.layer_time(m)
        # data crossing the interconnect is read from one memory and written to the other
        return Evaluation(
            system, L * per_layer, m, bh + link, bl + link, link, ops, used_h, used_l, extra
        )

    def all_times(self) -> FloatArray:
        """Per-layer time of every mapping, shape (N+1, N+1, N+1) indexed [nQ, nA, nF]."""
        tq, ta, tf = self.t["qkv"], self.t["attn"], self.t["fc"]
        total = tq[:, None, None] + ta[None, :, None] + tf[None, None, :]
        total = total + self.x_qa[:, :, None]
        total = total + self.x_af[None, :, :]
        total = total + self.x_fq.T[:, None, :]
        return np.asarray(total, dtype=np.float64)

    def all_feasible(self) -> npt.NDArray[np.bool_]:
        """Capacity mask of every mapping, shape (N+1, N+1, N+1)."""
        cap_h = self.hw.hbm.capacity_bytes - self.act_bytes
        cap_l = self.hw.lpddr.capacity_bytes - self.act_bytes
        (qh, ql), (ah, al), (fh, fl) = self.cap["qkv"], self.cap["attn"], self.cap["fc"]
        ok_h = qh[:, None, None] + ah[None, :, None] + fh[None, None, :] <= cap_h
        ok_l = ql[:, None, None] + al[None, :, None] + fl[None, None, :] <= cap_l
        return np.asarray(ok_h & ok_l)


@dataclass
class Evaluation:
    """Outcome of one system at one iteration."""

    system: str
    seconds: float
    mapping: Mapping | None
    bytes_hbm: float
    bytes_lpddr: float
    bytes_link: float
    ops: float
    hbm_used: float = 0.0
    lpddr_used: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
