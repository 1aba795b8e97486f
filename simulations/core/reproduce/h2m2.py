"""Reproduction of H2M2 (Hwang et al.): Figs. 6, 7, 8, 12, 13, 15, 16, 17, 18, 19, Table 3.

Every simulated figure comes from the cost model in :mod:`simulations.core.policies.h2m2`
(Tables 1–2 hardware, INT8 weights/activations/KV cache as §5.1 says "INT8 precision for all
three models", generation phase) at the batch/sequence points stated in each check's note;
the paper's value is only the target beside it.

Baseline (every speedup's denominator): the LPDDR-only memory of Fig. 4(b) *with
sublayer-granular mapping* (Fig. 5a) — §3.1 "normalized to the baseline: LPDDR-only
homogeneous memory (Figure 4(b)) with sublayer-granular mapping (Figure 5(a))" — on the two
chips §5.1 gives every configuration ("All comparison configurations, including the baseline
system configuration, consist of two accelerator chips"); under Fig. 5(a) "parallelization is
not available", so the chips take turns, one chip per kernel beside 544 GB/s
(:meth:`~simulations.core.devices.h2m2.board.H2M2Hardware.lpddr_only`, which gives the
full argument). Each H2M2/Oracle/Best speedup check also lists, in ``details``, the speedup
over a pooled baseline whose two chips split every kernel (head-aware granularity on LPDDR,
which §3.1 presents as the paper's contribution, not its baseline; 3-7 % lower, because one
chip's array already takes weights at 512 GB/s against the LPDDR's 544) and ``ideal_bound``:
the most any mapping could gain at that point on Tables 1–2 (see :func:`ideal_bound`).

Points: the figures' x-axes are images; the text fixes the batch per model (§5.1) and
constrains the sequence lengths, which are taken as doubling series (the paper's labels,
e.g. "B16 S512", are powers of two), chosen from the text alone:

* GPT3-175B B32 S256–2048: Fig. 3's range, the only one the text gives for GPT3 B32.
* Chinchilla-70B B64 S256–4096: §5.2.1 "we use longer sequence lengths ... for
  Chinchilla-70B" than for GPT3 (so beyond 2048, as GPT3's range already reaches its own
  2048 context), with a point below 512 where "strict hierarchical memory outperforms
  asymmetric memory"; 4096 is the longest doubling whose footprint (408 GB) fits the 512 GB
  LPDDR-only baseline.
* Llama2-70B B128 S512–8192: §5.2.3 "larger batch size and sequence lengths compared to
  those in Figure 13" (one octave above Chinchilla's), whose shortest points (footprint under
  96 GB) are the "shorter sequence lengths" where Hierarchical wins.
* Fig. 6: batch 16 and 32 at S512–2048.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from simulations.core.devices.h2m2.board import TABLE4_VARIANTS, H2M2Hardware
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import Mapping, MappingTables
from simulations.core.policies.h2m2.dynamic import dynamic_study
from simulations.core.policies.h2m2.energy import memory_energy_j
from simulations.core.policies.h2m2.mapping import flexgen_static_mapping, run_system
from simulations.core.policies.h2m2.memory import eq2_fragmentation
from simulations.core.policies.h2m2.models import paper_model

from .base import Check, runner

# --- paper targets (read from papers/h2m2.md; compared against, never fed to the model) ---
PAPER_TARGETS = {
    "fig6.head_aware": 1.50,
    "fig6.sublayer": 1.27,
    "fig7.flexgen": 1.30,
    "fig7.best": 1.50,
    "fig7.flexgen_of_best": 0.87,
    "fig8.q_major": 1.22,
    "fig8.a_major": 1.40,
    "fig8.f_major": 1.12,
    "fig12.h2m2": 1.46,
    "fig12.h2m2_of_oracle": 0.97,
    "fig12.hierarchical": 1.07,
    "fig13.h2m2": 1.55,
    "fig13.h2m2_of_oracle": 0.95,
    "fig13.hierarchical": 1.33,
    "fig15.h2m2": 2.94,
    "fig15.oracle": 3.00,
    "fig15.hierarchical": 2.75,
    "table3.gpt3.abstraction": 0.80,
    "table3.gpt3.mapping": 2.56,
    "table3.chinchilla.abstraction": 1.01,
    "table3.chinchilla.mapping": 3.76,
    "table3.llama2.abstraction": 1.36,
    "table3.llama2.mapping": 0.60,
    "fig16.h2m2": 1.48,
    "fig16.flexgen": 1.25,
    "fig16.h2m2_of_oracle": 0.96,
    "fig18.8hbm": 2.29,
    "fig19.h2m2": 0.76,
    "fig19.8hbm": 1.31,
}
SPEEDUP_TOL = 0.10
OVERHEAD_TOL_POINTS = 1.5


@dataclass(frozen=True)
class Study:
    """A model at the paper's batch over the chosen sequence lengths."""

    key: str
    slug: str
    batch: int
    seqs: tuple[int, ...]

    @property
    def points(self) -> list[Point]:
        """The (batch, sequence) points."""
        return [Point(self.batch, float(s)) for s in self.seqs]

    def describe(self) -> str:
        """Points as the note prints them."""
        return f"{self.slug} B{self.batch} S{'/'.join(str(s) for s in self.seqs)}"


GPT3 = Study("gpt3", "gpt3-175b", 32, (256, 512, 1024, 2048))
CHINCHILLA = Study("chinchilla", "chinchilla-70b", 64, (256, 512, 1024, 2048, 4096))
LLAMA2 = Study("llama2", "llama2-70b", 128, (512, 1024, 2048, 4096, 8192))
FIG6_POINTS = [Point(b, float(s)) for b in (16, 32) for s in (512, 1024, 2048)]


@cache
def _shapes(slug: str) -> LayerShapes:
    return LayerShapes.of(paper_model(slug))


def _speedups(
    slug: str,
    points: list[Point],
    system: str,
    hw: H2M2Hardware,
    decided: Mapping | None = None,
) -> list[float]:
    shapes = _shapes(slug)
    out = []
    for p in points:
        base = run_system(shapes, hw, p, "lpddr-only").seconds
        out.append(base / run_system(shapes, hw, p, system, decided=decided).seconds)
    return out


#: appended to every check whose value is a speedup over the LPDDR-only baseline
BASELINE_NOTE = (
    " Baseline: LPDDR-only (Fig. 4b) with sublayer-granular mapping (Fig. 5a), as §3.1 "
    "normalises, on the two chips §5.1 gives every configuration; Fig. 5(a) leaves "
    "'parallelization ... not available', so each kernel runs on one chip beside 544 GB/s."
)


def _check(
    cid: str,
    quantity: str,
    simulated: Any,
    note: str,
    *,
    unit: str = "x",
    over_baseline: bool = False,
    **details: object,
) -> Check:
    return Check(
        id=cid,
        quantity=quantity,
        unit=unit,
        paper_value=PAPER_TARGETS[cid],
        simulated=float(simulated),
        tolerance=SPEEDUP_TOL,
        note=note + (BASELINE_NOTE if over_baseline else ""),
        details=dict(details),
    )


#: GB → GiB, for the cross-model probe of :func:`_opposite_signs`
GIB_PER_GB = 2**30 / 1e9


@cache
def _h2m2_means(variant: str = "table1") -> tuple[float, float, float]:
    """Mean H2M2 speedup of (GPT3, Chinchilla, Llama2): on Tables 1-2 (``table1``), over the
    pooled baseline (``pooled``), or with Table 1's capacities read as GiB (``gib``). The
    last two are probes for the notes, never inputs to a figure."""
    hw = H2M2Hardware.table1()
    if variant == "gib":
        hw = H2M2Hardware(
            replace(hw.hbm, capacity_gb=hw.hbm.capacity_gb * GIB_PER_GB),
            replace(hw.lpddr, capacity_gb=hw.lpddr.capacity_gb * GIB_PER_GB),
            hw.link_gbps,
        )
    fn = _pooled if variant == "pooled" else _speedups
    means = [float(np.mean(fn(s.slug, s.points, "h2m2", hw))) for s in (GPT3, CHINCHILLA, LLAMA2)]
    return means[0], means[1], means[2]


def _opposite_signs() -> str:
    """The misses of the three models have opposite signs on one hardware and baseline, and
    the readings the text leaves open move all three the same way."""
    figs = ("fig12", "fig13", "fig15")

    def errs(variant: str) -> str:
        m = _h2m2_means(variant)
        e = [100 * (v / PAPER_TARGETS[f"{f}.h2m2"] - 1) for v, f in zip(m, figs, strict=True)]
        return "/".join(f"{x:+.0f} %" for x in e)

    return (
        f" Across models H2M2 here is {errs('table1')} off the paper (GPT3/Chinchilla/"
        f"Llama2). The open readings move all three the same way, so none closes both signs: "
        f"over the pooled baseline {errs('pooled')}; Table 1's GB read as GiB "
        f"{errs('gib')}."
    )


def _fmt(values: list[float]) -> list[float]:
    return [round(v, 3) for v in values]


def ideal_bound(shapes: LayerShapes, hw: H2M2Hardware, point: Point) -> float:
    """The most any asymmetric mapping can gain over the baseline at ``point`` on Tables 1–2:
    baseline time / the larger of (a) the LPDDR side's share of the footprint beyond the HBM
    capacity streamed at the LPDDR bandwidth and (b) the whole iteration's array and MV-unit
    work spread perfectly over both chips (a weight-stationary array takes a 128-row weight
    tile per max(batch, 128) cycles; attention is GEMV on the MV units, §2.1, §4.1). It
    ignores barriers, exchanges, latencies and capacity-granularity, so no mapping beats it.
    A diagnostic for the notes, not an input to any figure."""
    base = run_system(shapes, hw, point, "lpddr-only").seconds
    spill = max(0.0, shapes.total_bytes(point.kv_tokens) - hw.hbm.capacity_bytes)
    traffic = spill / hw.lpddr.bw_bytes_per_s
    a = hw.hbm.accel
    chips = hw.hbm.chips + hw.lpddr.chips
    macs_w = shapes.n_layers * shapes.weight_bytes_per_layer / shapes.w_bytes
    gemm = macs_w * max(point.batch, a.mm_rows) / a.mm_rows / (a.mm_weight_bytes_per_s * chips)
    dots = shapes.n_layers * 2.0 * shapes.n_heads * point.kv_tokens
    dots *= float(np.ceil(shapes.head_dim / a.mv_width))
    attn = dots / (a.mv_lanes * a.cores * chips * a.clock_ghz * 1e9)
    return base / max(traffic, gemm + attn)


def _pooled(slug: str, points: list[Point], system: str, hw: H2M2Hardware) -> list[float]:
    """Speedups over an LPDDR-only memory whose two chips split every kernel (the reading
    the paper's text rules out, §3.1; reported so the baseline's weight can be judged)."""
    shapes = _shapes(slug)
    pooled = H2M2Hardware(hw.lpddr_only_pooled(), hw.lpddr_only_pooled(), 1e6)
    out = []
    for p in points:
        base = run_system(shapes, pooled, p, "sublayer").seconds
        out.append(base / run_system(shapes, hw, p, system).seconds)
    return out


def _bounds(study_slug: str, points: list[Point], hw: H2M2Hardware) -> list[float]:
    return [ideal_bound(_shapes(study_slug), hw, p) for p in points]


def _bound_sweep(study: Study, hw: H2M2Hardware) -> tuple[list[int], list[float]]:
    """:func:`ideal_bound` over every sequence length (steps of 128) whose footprint the
    LPDDR-only baseline can hold at the study's batch, for the notes."""
    shapes = _shapes(study.slug)
    seqs = [
        q
        for q in range(128, 65537, 128)
        if shapes.total_bytes(study.batch * q) <= hw.lpddr.capacity_bytes
    ]
    return seqs, [ideal_bound(shapes, hw, Point(study.batch, float(q))) for q in seqs]


def _peak_phrase(study: Study, hw: H2M2Hardware, target: float) -> str:
    seqs, b = _bound_sweep(study, hw)
    top = int(np.argmax(b))
    above = [q for q, v in zip(seqs, b, strict=True) if v >= target]
    where = f"only for S{above[0]}-{above[-1]}" if above else "at no sequence length"
    return (
        f"over S128-{seqs[-1]} at B{study.batch}, ideal_bound peaks at {b[top]:.2f}x "
        f"(S{seqs[top]}) and reaches {target:.2f}x {where}"
    )


def _floor_phrase(study: Study, hw: H2M2Hardware, target: float) -> str:
    seqs, b = _bound_sweep(study, hw)
    top = int(np.argmax(b))
    below = [q for q, v in zip(seqs[top:], b[top:], strict=True) if v <= target]
    where = f"only from S{below[0]}" if below else "nowhere"
    return f"ideal_bound at B{study.batch} is at or under {target:.2f}x {where}"


def _gpt3_gap(hw: H2M2Hardware) -> str:
    """Why the GPT3-175B speedups sit above the paper's (Figs. 6, 7, 8, 12, 18), with the
    numbers computed here."""
    best = _speedups("gpt3-175b", GPT3.points, "oracle", hw)
    pooled = _pooled("gpt3-175b", GPT3.points, "oracle", hw)
    bound = _bounds("gpt3-175b", GPT3.points, hw)
    short = [1.0 - o / b for o, b in zip(best, bound, strict=True)]
    paper = PAPER_TARGETS["fig7.best"]
    excess = 100 * (np.mean(best) / paper - 1)
    return (
        f" The model's Oracle runs within {100 * min(short):.0f}-{100 * max(short):.0f} % of "
        "ideal_bound at every point (the LPDDR side streams the footprint beyond 96 GB at "
        f"544 GB/s), so these speedups exceed the paper's by ~{excess:.0f} %: the paper's "
        f"Best ({paper:.2f}) is {100 * paper / np.mean(bound):.0f} % of the same bound's "
        "average. Its cycle-level simulator (cross-validated against mNPUsim and DRAMsim3, "
        "§5.1) loses that against Tables 1-2 without saying where (DRAM timing, tile "
        "prologues and kernel scheduling are unpublished). Ratios between mappings are "
        "unaffected: see fig7.flexgen_of_best, fig12.h2m2_of_oracle, the majors' 'of Best'. "
        f"Over the pooled baseline Best would be {np.mean(pooled):.2f}x, within 10 % of the "
        "paper's, but §3.1 names the sublayer-granular baseline, so the check keeps it."
        + _opposite_signs()
    )


def _chinchilla_gap(h2m2: list[float], hier: list[float], hw: H2M2Hardware) -> str:
    """Why Fig. 13's H2M2 sits above the paper's, from this model's own numbers."""
    n = len(h2m2)
    # what the other points would have to average for the paper's mean, given the first
    need = (PAPER_TARGETS["fig13.h2m2"] * n - h2m2[0]) / (n - 1)
    return (
        f" The paper's {PAPER_TARGETS['fig13.h2m2']:.2f} is out of reach at the points the "
        "text allows: from S512 the footprint passes 96 GB, but up to S1024 it exceeds HBM by "
        "at most 54 GB, so the LPDDR side carries little and H2M2 is bounded only by the two "
        "chips' arrays (ideal_bound in details; the model sits just below it). With the "
        f"S256 point at {h2m2[0]:.2f}x (footprint under HBM, where Hierarchical wins), the "
        f"paper's mean needs the other {n - 1} points at {need:.2f}x, and "
        f"{_floor_phrase(CHINCHILLA, hw, need)}. The paper does not say what limits its H2M2 "
        "at moderate overflow. The fits-in-HBM gain need not differ: Hierarchical "
        f"here averages {np.mean(hier):.2f}x (paper {PAPER_TARGETS['fig13.hierarchical']:.2f}) "
        f"with S256 at {hier[0]:.2f}x (the same two chips on a footprint that fits) and "
        "about 1x beyond 96 GB, which meets the paper's average, so the gap sits in H2M2 "
        "at moderate overflow." + _opposite_signs()
    )


def _resident_phrase(hw: H2M2Hardware) -> str:
    """Hierarchical speedups under the other cache reading (a probe for the fig15 note, never
    a figure): the HBM keeps 96 GB of the footprint resident and the rest is migrated from
    LPDDR every iteration, either after the chips' work or overlapped with it."""
    roomy = H2M2Hardware(replace(hw.hbm, capacity_gb=1e6), hw.lpddr, hw.link_gbps)
    stream = min(hw.lpddr.bw_bytes_per_s, hw.link_gbps * 1e9, hw.hbm.bw_bytes_per_s / 2.0)
    after, overlapped = [], []
    for study in (GPT3, CHINCHILLA, LLAMA2):
        shapes = _shapes(study.slug)
        a, o = [], []
        for p in study.points:
            base = run_system(shapes, hw, p, "lpddr-only").seconds
            work = run_system(shapes, roomy, p, "hierarchical").seconds
            spill = max(0.0, shapes.total_bytes(p.kv_tokens) - hw.hbm.capacity_bytes)
            a.append(base / (work + spill / stream))
            o.append(base / max(work, spill / stream))
        after.append(float(np.mean(a)))
        overlapped.append(float(np.mean(o)))
    return (
        f"{'/'.join(f'{v:.2f}' for v in after)}x with migration after the work and "
        f"{'/'.join(f'{v:.2f}' for v in overlapped)}x overlapped"
    )


def _llama2_gap(hw: H2M2Hardware) -> str:
    """Why Fig. 15's speedups sit below the paper's: Table 2's compute at B128."""
    shapes = _shapes(LLAMA2.slug)
    chips = hw.hbm.chips + hw.lpddr.chips
    peak = hw.hbm.accel.mm_peak_ops * chips
    gemm_ops = 2.0 * LLAMA2.batch * shapes.n_layers * shapes.weight_bytes_per_layer
    gemm_ops /= shapes.w_bytes
    return (
        " The paper's averages exceed what Table 2's compute allows: at B128 every 128x128 "
        f"array is full, so both chips together ({peak / 1e12:.0f} INT8 TOPS) need >= "
        f"{1e3 * gemm_ops / peak:.0f} ms for the {gemm_ops / 1e12:.1f} TOP of GEMMs, plus "
        "attention on the MV units, while the 544 GB/s baseline streams the footprint; "
        f"{_peak_phrase(LLAMA2, hw, PAPER_TARGETS['fig15.oracle'])}. The 'shorter sequence "
        "lengths' where Hierarchical wins (footprint < 96 GB, S512 and S1024 here) are "
        "bounded well below that (ideal_bound in details), so the paper's average cannot be "
        "reached on Tables 1-2 against a 544 GB/s LPDDR baseline; the paper does not say "
        "what makes its baseline slower or its chips faster. GQA is applied throughout (KV "
        "cache, K/V weights, the hierarchy's migrated footprint and GQA attention on the MV "
        "units, which reuse each K/V element for the group's 8 query heads; the MM array "
        "would see only 8 query rows and is slower). Re-reading each KV head once per "
        "query head would give attention MHA-sized traffic and lift every Llama2 point, "
        "but §5.2.3 presents GQA as 'allowing multiple heads to share the KV cache' to "
        "'address memory bandwidth limitations', so the model reads it once per group."
        + _opposite_signs()
    )


@runner("h2m2")
def speedup_checks() -> list[Check]:
    """Figs. 6, 7, 8, 12, 13, 15, 18 and Table 3."""
    hw = H2M2Hardware.table1()
    checks: list[Check] = []
    g = GPT3.describe()
    gpt3_gap = _gpt3_gap(hw)

    head = _speedups("gpt3-175b", FIG6_POINTS, "oracle", hw)
    sub = _speedups("gpt3-175b", FIG6_POINTS, "sublayer", hw)
    pts6 = "gpt3-175b B16/B32 × S512/1024/2048"
    checks.append(
        _check(
            "fig6.head_aware",
            "head-aware granularity speedup over LPDDR-only",
            np.mean(head),
            f"{pts6}; both granularities at their best mapping (§3.1).{gpt3_gap}",
            per_point=_fmt(head),
            over_pooled_baseline=_fmt(_pooled("gpt3-175b", FIG6_POINTS, "oracle", hw)),
            ideal_bound=_fmt(_bounds("gpt3-175b", FIG6_POINTS, hw)),
            over_baseline=True,
        )
    )
    checks.append(
        _check(
            "fig6.sublayer",
            "sublayer granularity speedup over LPDDR-only",
            np.mean(sub),
            f"{pts6}; best of the 8 whole-sublayer mappings (Fig. 5a): one chip per "
            "sublayer, as in the baseline, so only the sublayer placed in HBM gains. At B32 "
            "a weight-stationary 128x128 array shifts in one weight row per cycle (512 GB/s "
            "per chip), so a GEMM on one chip is no faster from HBM than from LPDDR and the "
            "gain is attention's; at B32 S2048 no whole attention fits HBM (1.0x).",
            per_point=_fmt(sub),
            over_baseline=True,
        )
    )

    best = _speedups("gpt3-175b", GPT3.points, "oracle", hw)
    plan = flexgen_static_mapping(_shapes("gpt3-175b"), hw, GPT3.points)
    flex = _speedups("gpt3-175b", GPT3.points, "flexgen-lp", hw, decided=plan)
    flex_note = (
        f"{g}; Eq. 1 (FLOPs per side as the objective, both capacities; §3.2 'only considers "
        "the total capacity and FLOP assigned to each side'), solved once by scipy HiGHS at "
        f"the peak-memory point (S{int(GPT3.points[-1].seq_len)}) and kept for every point "
        f"(§3.2: static, blind to batch and sequence changes); plan (nQ, nA, nF) = "
        f"{plan.as_tuple()}. FlexGen's FLOP-balanced weight split (w ~ 0.5) is close to the "
        "Oracle's own GEMM split here, because at B32 each chip's array takes weights at "
        "512 GB/s from either memory, so GEMMs gain from the second chip rather than from "
        "HBM bandwidth; FlexGen loses mainly where its static plan leaves HBM unfilled "
        "(short sequences)."
    )
    checks.append(
        _check(
            "fig7.flexgen",
            "FlexGen LP mapping speedup",
            np.mean(flex),
            flex_note + gpt3_gap,
            per_point=_fmt(flex),
            over_baseline=True,
        )
    )
    checks.append(
        _check(
            "fig7.best",
            "Best (exhaustive) mapping speedup",
            np.mean(best),
            f"{g}; exhaustive search of all (N+1)^3 mappings.{gpt3_gap}",
            per_point=_fmt(best),
            over_pooled_baseline=_fmt(_pooled("gpt3-175b", GPT3.points, "oracle", hw)),
            ideal_bound=_fmt(_bounds("gpt3-175b", GPT3.points, hw)),
            over_baseline=True,
        )
    )
    checks.append(
        _check("fig7.flexgen_of_best", "FlexGen / Best", np.mean(flex) / np.mean(best), flex_note)
    )
    for cid, sysname in (
        ("fig8.q_major", "q-major"),
        ("fig8.a_major", "a-major"),
        ("fig8.f_major", "f-major"),
    ):
        v = _speedups("gpt3-175b", GPT3.points, sysname, hw)
        checks.append(
            _check(
                cid,
                f"{sysname} speedup",
                np.mean(v),
                f"{g}; the favoured sublayer keeps as many heads in HBM as fit, "
                "the other two searched exhaustively (N^2). Of Best: "
                f"{np.mean(v) / np.mean(best):.2f} (paper "
                f"{PAPER_TARGETS[cid] / PAPER_TARGETS['fig7.best']:.2f})."
                + (gpt3_gap if cid == "fig8.a_major" else ""),
                per_point=_fmt(v),
                over_baseline=True,
            )
        )

    for study, fig in ((GPT3, "fig12"), (CHINCHILLA, "fig13"), (LLAMA2, "fig15")):
        h = _speedups(study.slug, study.points, "h2m2", hw)
        o = _speedups(study.slug, study.points, "oracle", hw)
        hier = _speedups(study.slug, study.points, "hierarchical", hw)
        bounds = _fmt(_bounds(study.slug, study.points, hw))
        d = study.describe()
        gap = {"fig12": gpt3_gap, "fig13": _chinchilla_gap(h, hier, hw), "fig15": _llama2_gap(hw)}[
            fig
        ]
        checks.append(
            _check(
                f"{fig}.h2m2",
                "H2M2 (greedy + abstraction) speedup",
                np.mean(h),
                f"{d}; Algorithm 1 with TLB costs.{gap}",
                per_point=_fmt(h),
                over_pooled_baseline=_fmt(_pooled(study.slug, study.points, "h2m2", hw)),
                ideal_bound=bounds,
                over_baseline=True,
            )
        )
        if fig == "fig15":
            checks.append(
                _check(
                    "fig15.oracle",
                    "Oracle speedup",
                    np.mean(o),
                    f"{d}; exhaustive search, no abstraction cost.{gap}",
                    per_point=_fmt(o),
                    ideal_bound=bounds,
                    over_baseline=True,
                )
            )
        else:
            checks.append(
                _check(
                    f"{fig}.h2m2_of_oracle",
                    "H2M2 / Oracle",
                    np.mean(h) / np.mean(o),
                    f"{d}",
                    oracle=_fmt(o),
                )
            )
        hier_note = (
            f"{d}; HBM as an LRU page cache of LPDDR with on-demand migration, both chips "
            "beside the HBM: one iteration scans the whole footprint in the same order, so "
            "above 96 GB every page is evicted before its reuse (§2.2.1's reuse distances) "
            "and each access migrates (LPDDR read, interconnect, HBM write); a footprint "
            "that fits runs at HBM speed, both chips splitting every kernel (§5.2.1: it "
            "then 'become[s] equivalent to the multi-HBM memory without communication cost')."
        )
        if fig == "fig15":
            hier_note += (
                " The paper's 2.75 needs Hierarchical to stay near H2M2 at S >= 2048 "
                "(footprint > 96 GB), i.e. to keep part of the footprint resident and migrate "
                "only the rest. That cache (96 GB resident, the rest migrated at 544 GB/s "
                "every iteration, §2.3's 'migration for every access to capacity-centric "
                f"memory') gives GPT3/Chinchilla/Llama2 {_resident_phrase(hw)}: neither "
                "reaches 2.75 and both overshoot Chinchilla's 1.33. The model keeps the LRU "
                "reading the text describes: 'excessively long data reuse distances' "
                "(§2.2.1), 'lack of temporal locality' (§5.2.1). The paper does not describe its "
                "migration policy beyond 'on-demand'."
            )
        checks.append(
            _check(
                f"{fig}.hierarchical",
                "strict hierarchical memory speedup",
                np.mean(hier),
                hier_note,
                per_point=_fmt(hier),
                over_baseline=True,
            )
        )
        checks.extend(_table3(study, hw))

    e8 = _speedups("gpt3-175b", GPT3.points, "8-hbm", hw)
    h2 = _speedups("gpt3-175b", GPT3.points, "h2m2", hw)
    checks.append(
        _check(
            "fig18.8hbm",
            "8-HBM speedup",
            np.mean(e8),
            f"{g}; eight 96 GB HBM3 stacks, the same two chips both busy (§5.5 'the "
            "computational capability ... remains unchanged'; kernels split over the devices "
            "as in §2.3's model parallelism with 'frequent synchronization'), a ring "
            "all-reduce over A100 "
            "NVLink (300 GB/s per direction) twice per layer for the communication the paper "
            "measured on eight A100s but does not publish. 8-HBM / H2M2 = "
            f"{np.mean(e8) / np.mean(h2):.2f} (paper "
            f"{PAPER_TARGETS['fig18.8hbm'] / PAPER_TARGETS['fig12.h2m2']:.2f}): the absolute "
            "miss is mostly the scale gap of every GPT3 speedup here (see fig12.h2m2's note), "
            "the rest the unpublished communication cost.",
            per_point=_fmt(e8),
            over_baseline=True,
        )
    )
    checks.extend(_energy_checks(hw))
    return checks


#: Table 3's mapping overhead, per model: what the greedy loses and why
MAPPING_GAP_NOTES = {
    "gpt3": "Algorithm 1 (attention, qkv-linear, fc, each by its own min-max under the "
    "peak-execution model of §4.3.2) lands within a few % of the Oracle at every point.",
    "chinchilla": "The greedy equals the Oracle where the footprint fits or barely exceeds "
    "HBM (S256, S512) and loses most at S1024, where its fixed order leaves fc short; the "
    "paper's 3.76 % average is larger than this model's loss at any point but S1024. The "
    "paper's points and the value of its arithmetic-intensity hyperparameter (§4.3.2) are "
    "unpublished; this model's factor is derived from Tables 1-2 (see mapping.py).",
    "llama2": "Most of it is S4096 (154 GB): attention's own min-max takes 56 of 64 heads "
    "(7 of 8 KV heads) into HBM, qkv-linear its balanced half, and fc, compute-bound at "
    "B128 and last in Algorithm 1's fixed order, gets the 17 of 64 column slices HBM has "
    "left, so the LPDDR chip does ~3/4 of it; the Oracle gives up one KV head and qkv's "
    "balance to feed fc. That is Algorithm 1 as published (fixed order, per-sublayer "
    "min-max, §4.3.2), not a misreading: replaying its three steps on the full cost model "
    "gives the same mapping (tests/core/h2m2). Elsewhere the greedy is within ~2 %. The "
    "paper's 0.60 % implies its Llama2 points avoid this crossover, or its simulator "
    "punishes a stranded fc less; neither is stated.",
}


def _table3(study: Study, hw: H2M2Hardware) -> list[Check]:
    shapes = _shapes(study.slug)
    abs_pct, map_pct, frag = [], [], []
    for p in study.points:
        h = run_system(shapes, hw, p, "h2m2")
        o = run_system(shapes, hw, p, "oracle")
        plain = h.extra["seconds_without_abstraction"]
        abs_pct.append(100.0 * (h.seconds - plain) / o.seconds)
        map_pct.append(100.0 * (plain - o.seconds) / o.seconds)
        if h.mapping is not None:
            frag.append(eq2_fragmentation(shapes, p, h.mapping)["eq2_bytes"] / 1e6)
    d = study.describe()
    out = []
    for kind, vals, how in (
        (
            "abstraction",
            abs_pct,
            "TLB misses: 2048 entries × 2 MB reach per chip, flat table "
            "(one 300 ns access per miss), every page a kernel streams misses once its side "
            "exceeds the reach, stalling that core's stream",
        ),
        (
            "mapping",
            map_pct,
            "greedy (no abstraction) over Oracle, per point in details. "
            + MAPPING_GAP_NOTES[study.key],
        ),
    ):
        cid = f"table3.{study.key}.{kind}"
        out.append(
            Check(
                id=cid,
                quantity=f"{kind} overhead of H2M2 over Oracle",
                unit="%",
                paper_value=PAPER_TARGETS[cid],
                simulated=float(np.mean(vals)),
                tolerance=OVERHEAD_TOL_POINTS,
                abs_tolerance=True,
                note=f"{d}; {how}",
                details={"per_point": _fmt(vals), "eq2_fragmentation_mb": _fmt(frag)},
            )
        )
    return out


def _energy_contradiction() -> str:
    """Why no single memory-energy model meets both Fig. 19 figures (computed from the
    paper's own figures, which is all this note uses them for)."""
    e_h, e_8 = PAPER_TARGETS["fig19.h2m2"], PAPER_TARGETS["fig19.8hbm"]
    s_h, s_8 = PAPER_TARGETS["fig12.h2m2"], PAPER_TARGETS["fig18.8hbm"]
    # static power x time, one power per device: H2M2 (1 + rho) / s_h, 8-HBM 8 rho / s_8
    rho_h = e_h * s_h - 1.0
    rho_8 = e_8 * s_8 / 8.0
    return (
        "No memory-energy model §5.5 describes meets both figures. Per access: every system "
        "reads each weight and KV byte once per iteration, so H2M2 below 1 needs an HBM bit "
        "cheaper than an LPDDR bit and 8-HBM above 1 needs it dearer (its communication adds "
        "only activations). Per device power x time (a 'static power model'): H2M2's "
        f"{e_h:.2f} at {s_h:.2f}x gives P_HBM/P_LPDDR = {rho_h:.2f}, which puts 8-HBM (8 "
        f"stacks at {s_8:.2f}x) at {8 * rho_h / s_8:.2f}; 8-HBM's {e_8:.2f} gives {rho_8:.2f}, "
        f"which puts H2M2 at {(1 + rho_8) / s_h:.2f}. The CXL-PNM ratio [36] the paper uses is "
        "not printed, so this check keeps published per-bit energies and reports the gap."
    )


def _energy_checks(hw: H2M2Hardware) -> list[Check]:
    shapes = _shapes("gpt3-175b")
    rel_h, rel_8 = [], []
    for p in GPT3.points:
        ev = {k: run_system(shapes, hw, p, k) for k in ("lpddr-only", "h2m2", "8-hbm")}
        e = {k: memory_energy_j(v.bytes_hbm, v.bytes_lpddr) for k, v in ev.items()}
        rel_h.append(e["h2m2"] / e["lpddr-only"])
        rel_8.append(e["8-hbm"] / e["lpddr-only"])
    note = (
        f"{GPT3.describe()}; memory energy per token = accesses per tier × pJ/bit (HBM2 3.97 "
        "[O'Connor MICRO'17], LPDDR4 14.0 [Ha, Stanford 2018]); the paper's ratio from "
        "CXL-PNM [36] is not printed"
    )
    return [
        _check(
            "fig19.h2m2",
            "H2M2 memory energy per token / LPDDR-only",
            np.mean(rel_h),
            note,
            per_point=_fmt(rel_h),
        ),
        _check(
            "fig19.8hbm",
            "8-HBM memory energy per token / LPDDR-only",
            np.mean(rel_8),
            note + ". " + _energy_contradiction(),
            per_point=_fmt(rel_8),
        ),
    ]


@runner("h2m2")
def dynamic_checks() -> list[Check]:
    """Fig. 16: 128 iterations with requests finishing and being replaced at random."""
    hw = H2M2Hardware.table1()
    res = dynamic_study(_shapes("gpt3-175b"), hw, np.random.default_rng(16))
    note = (
        "gpt3-175b B32, 128 iterations, seed 16; each request finishes with probability 1/32 "
        "per iteration and is replaced by one of uniform length 256-2048 (the paper gives "
        "neither); greedy re-decided every iteration paying TLB misses and page migration, "
        "Oracle re-searched at no cost, FlexGen's LP solved once for the peak footprint"
    )
    kv = [round(res.kv_cache_gb[i], 1) for i in (0, 31, 63, 95, 127)]
    # the paper's Oracle is H2M2 / (H2M2 of Oracle); only used to print its FlexGen ratio
    paper_oracle = PAPER_TARGETS["fig16.h2m2"] / PAPER_TARGETS["fig16.h2m2_of_oracle"]
    paper_flex_of_oracle = PAPER_TARGETS["fig16.flexgen"] / paper_oracle
    return [
        _check(
            "fig16.h2m2",
            "H2M2 speedup, dynamic lengths",
            res.mean("h2m2"),
            note,
            kv_cache_gb_at_1_32_64_96_128=kv,
            remaps=res.remaps,
            migrated_gb=round(res.migrated_gb, 1),
            over_baseline=True,
        ),
        _check(
            "fig16.flexgen",
            "FlexGen (static) speedup, dynamic lengths",
            res.mean("flexgen"),
            note + ". FlexGen / Oracle here: "
            f"{res.mean('flexgen') / res.mean('oracle'):.2f} (paper "
            f"{paper_flex_of_oracle:.2f}). "
            "Its plan (Eq. 1 at the longest possible lengths) balances the GEMM weights by "
            "FLOPs and leaves attention in LPDDR; at B32 each chip's 128x128 weight-stationary "
            "array takes weights at 512 GB/s from either memory, so that split is what the "
            "Oracle itself picks for the GEMMs and FlexGen loses only the HBM its static plan "
            "leaves empty when sequences are short. The paper's wider gap rests on attention "
            "in LPDDR being costlier than its bytes at 544 GB/s, which Tables 1-2 do not "
            "imply; it also attributes the Fig. 16/Fig. 7 difference to 'the difference of "
            "the batch size' though §5.3 fixes Fig. 16's batch at 32, the batch of Fig. 7's "
            "caption.",
            over_baseline=True,
        ),
        _check(
            "fig16.h2m2_of_oracle",
            "H2M2 / Oracle, dynamic lengths",
            res.mean("h2m2") / res.mean("oracle"),
            note,
        ),
    ]


@runner("h2m2")
def sensitivity_checks() -> list[Check]:
    """Table 4 / Fig. 17, qualitatively: HBM capacity matters most, HBM bandwidth hardly."""
    base_hw = H2M2Hardware.table1()
    shapes = _shapes("gpt3-175b")
    perf: dict[str, float] = {}
    for name in TABLE4_VARIANTS:
        hw = base_hw.variant(name)
        perf[name] = float(
            np.mean(
                [
                    run_system(shapes, base_hw, p, "lpddr-only").seconds
                    / run_system(shapes, hw, p, "h2m2").seconds
                    for p in GPT3.points
                ]
            )
        )
    rel = {k: v / perf["Original"] for k, v in perf.items()}
    span = {
        comp: abs(rel[f"{comp}-More"] - rel[f"{comp}-Less"])
        for comp in ("HBMcap", "HBMbw", "LPDDRbw")
    }
    span["HBMChip"] = abs(rel["HBMChip-More"] - 1.0)
    span["LPDDRChip"] = abs(rel["LPDDRChip-More"] - 1.0)
    largest = max(span, key=lambda k: span[k])
    details = {
        "relative_to_original": {k: round(v, 3) for k, v in rel.items()},
        "span": {k: round(v, 3) for k, v in span.items()},
    }
    d = f"{GPT3.describe()}; H2M2 speedup of each Table 4 variant over Original"
    return [
        Check(
            "fig17.hbm_capacity_matters_most",
            "HBM capacity has the largest effect (1 = yes)",
            "bool",
            1.0,
            1.0 if largest == "HBMcap" else 0.0,
            0.0,
            True,
            f"{d}; largest span: {largest}",
            details,
        ),
        Check(
            "fig17.hbm_bandwidth_hardly",
            "HBM bandwidth ±25 % moves H2M2 by < 5 % (1 = yes)",
            "bool",
            1.0,
            1.0 if span["HBMbw"] < 0.05 else 0.0,
            0.0,
            True,
            f"{d}; 5 % is this check's reading of 'almost negligible' (§5.4)",
            details,
        ),
    ]


def tables_for_point(slug: str, point: Point) -> MappingTables:
    """Mapping tables of a paper model at ``point`` (for the benchmarks and tests)."""
    return MappingTables(_shapes(slug), H2M2Hardware.table1(), point)
