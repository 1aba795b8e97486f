"""Reproduction of H2M2 (Hwang et al.): Figs. 6, 7, 8, 12, 13, 15, 16, 17, 18, 19, Table 3.

Every simulated figure comes from the cost model in :mod:`simulations.core.policies.h2m2`
(Tables 1–2 hardware, INT8, generation phase) at the batch/sequence points stated in each
check's note; the paper's value is only the target beside it.

Points: the paper's figures show batch/sequence pairs on their x-axes but the text does not
list them all. This reproduction uses, per model, the batch the paper fixes (§5.1) and
sequence lengths chosen from the text before any result was seen: GPT3-175B B32 S256–2048
(Fig. 3's range), Chinchilla-70B B64 S256–2048 (its context is 2048; §5.2.1 has S < 512 as the
regime where everything fits HBM), Llama2-70B B128 S512–4096 ("larger sequence lengths than
Fig. 13", up to its 4096 context); Fig. 6 adds batch 16.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from simulations.core.policies.h2m2.dynamic import dynamic_study
from simulations.core.policies.h2m2.energy import memory_energy_j
from simulations.core.policies.h2m2.evaluate import MappingTables
from simulations.core.policies.h2m2.hardware import TABLE4_VARIANTS, H2M2Hardware
from simulations.core.policies.h2m2.kernels import LayerShapes
from simulations.core.policies.h2m2.mapping import run_system
from simulations.core.policies.h2m2.memory import eq2_fragmentation
from simulations.core.policies.h2m2.models import paper_model
from simulations.core.policies.h2m2.workload import Point

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
CHINCHILLA = Study("chinchilla", "chinchilla-70b", 64, (256, 512, 1024, 2048))
LLAMA2 = Study("llama2", "llama2-70b", 128, (512, 1024, 2048, 4096))
FIG6_POINTS = [Point(b, float(s)) for b in (16, 32) for s in (512, 1024, 2048)]


@cache
def _shapes(slug: str) -> LayerShapes:
    return LayerShapes.of(paper_model(slug))


def _speedups(slug: str, points: list[Point], system: str, hw: H2M2Hardware) -> list[float]:
    shapes = _shapes(slug)
    out = []
    for p in points:
        base = run_system(shapes, hw, p, "lpddr-only").seconds
        out.append(base / run_system(shapes, hw, p, system).seconds)
    return out


def _check(
    cid: str, quantity: str, simulated: Any, note: str, *, unit: str = "x", **details: object
) -> Check:
    return Check(
        id=cid,
        quantity=quantity,
        unit=unit,
        paper_value=PAPER_TARGETS[cid],
        simulated=float(simulated),
        tolerance=SPEEDUP_TOL,
        note=note,
        details=dict(details),
    )


def _fmt(values: list[float]) -> list[float]:
    return [round(v, 3) for v in values]


@runner("h2m2")
def speedup_checks() -> list[Check]:
    """Figs. 6, 7, 8, 12, 13, 15, 18 and Table 3."""
    hw = H2M2Hardware.table1()
    checks: list[Check] = []
    g = GPT3.describe()

    head = _speedups("gpt3-175b", FIG6_POINTS, "oracle", hw)
    sub = _speedups("gpt3-175b", FIG6_POINTS, "sublayer", hw)
    pts6 = "gpt3-175b B16/B32 × S512/1024/2048"
    checks.append(
        _check(
            "fig6.head_aware",
            "head-aware granularity speedup over LPDDR-only",
            np.mean(head),
            f"{pts6}; both granularities at their best mapping (§3.1)",
            per_point=_fmt(head),
        )
    )
    checks.append(
        _check(
            "fig6.sublayer",
            "sublayer granularity speedup over LPDDR-only",
            np.mean(sub),
            f"{pts6}; best of the 8 whole-sublayer mappings. Our model runs every "
            "sublayer at the speed of one chip, so the idle chip costs more than in the "
            "paper's simulator",
            per_point=_fmt(sub),
        )
    )

    best = _speedups("gpt3-175b", GPT3.points, "oracle", hw)
    flex = _speedups("gpt3-175b", GPT3.points, "flexgen-lp", hw)
    flex_note = (
        f"{g}; Eq. 1 with FLOPs-per-side objective and both capacities (as §3.2 describes "
        "FlexGen's model), solved per point by scipy HiGHS. In our cost model GEMM weights "
        "and KV bytes cost nearly the same per byte on LPDDR (the array's weight-shift "
        "limit makes B32 GEMMs as slow on either side), so FlexGen's choice to leave "
        "attention in LPDDR costs less than in the paper"
    )
    checks.append(
        _check(
            "fig7.flexgen",
            "FlexGen LP mapping speedup",
            np.mean(flex),
            flex_note,
            per_point=_fmt(flex),
        )
    )
    checks.append(
        _check(
            "fig7.best",
            "Best (exhaustive) mapping speedup",
            np.mean(best),
            f"{g}; exhaustive search of all (N+1)^3 mappings",
            per_point=_fmt(best),
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
                "the other two searched exhaustively (N^2)",
                per_point=_fmt(v),
            )
        )

    for study, fig in ((GPT3, "fig12"), (CHINCHILLA, "fig13"), (LLAMA2, "fig15")):
        h = _speedups(study.slug, study.points, "h2m2", hw)
        o = _speedups(study.slug, study.points, "oracle", hw)
        hier = _speedups(study.slug, study.points, "hierarchical", hw)
        d = study.describe()
        gap = {
            "fig13": " Our asymmetric system gains much more than the paper's for Chinchilla: at "
            "these footprints (86-236 GB) most data fits the 96 GB HBM and the LPDDR side holds "
            "little, so the bandwidth model gives >2x; the paper's simulator reports 1.55x "
            "without stating what limits it",
            "fig15": " Llama2-70B at B128 is compute-bound on the 128x128 arrays once its "
            "weights sit in HBM (2 x 131 INT8 TOPS for 17.5 TOP per iteration), which caps "
            "every system's speedup near 2-2.5x; the paper's ~3x needs more compute than "
            "Table 2 gives or a slower baseline",
        }.get(fig, "")
        checks.append(
            _check(
                f"{fig}.h2m2",
                "H2M2 (greedy + abstraction) speedup",
                np.mean(h),
                f"{d}; Algorithm 1 with TLB costs.{gap}",
                per_point=_fmt(h),
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
        checks.append(
            _check(
                f"{fig}.hierarchical",
                "strict hierarchical memory speedup",
                np.mean(hier),
                f"{d}; HBM as an LRU page cache of LPDDR with on-demand migration: "
                "a footprint above 96 GB thrashes (cyclic reuse), one that fits "
                "runs at HBM speed",
                per_point=_fmt(hier),
            )
        )
        checks.extend(_table3(study, hw))

    e8 = _speedups("gpt3-175b", GPT3.points, "8-hbm", hw)
    checks.append(
        _check(
            "fig18.8hbm",
            "8-HBM speedup",
            np.mean(e8),
            f"{g}; eight 96 GB HBM3 stacks, the same two chips, ring all-reduce "
            "over A100 NVLink (300 GB/s per direction) twice per layer; the "
            "paper's measured A100 communication cost is not published",
            per_point=_fmt(e8),
        )
    )
    checks.extend(_energy_checks(hw))
    return checks


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
            "greedy (no abstraction) over Oracle. Algorithm 1's fixed order balances qkv-linear "
            "before fc; when HBM runs short (Llama2 S4096) the Oracle instead gives that "
            "capacity to fc, whose LPDDR half then dominates, so the greedy loses most there; "
            "our greedy is closer to the Oracle than the paper's on Chinchilla",
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
            note + ". An access-energy model cannot make 8-HBM cost more than LPDDR-only "
            "when an HBM bit is cheaper than an LPDDR bit (the paper's H2M2 figure needs "
            "exactly that); the paper's 1.31x must include costs it does not describe",
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
    return [
        _check(
            "fig16.h2m2",
            "H2M2 speedup, dynamic lengths",
            res.mean("h2m2"),
            note,
            kv_cache_gb_at_1_32_64_96_128=kv,
            remaps=res.remaps,
            migrated_gb=round(res.migrated_gb, 1),
        ),
        _check(
            "fig16.flexgen", "FlexGen (static) speedup, dynamic lengths", res.mean("flexgen"), note
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
