"""Published figures of the four papers, with the tolerance each reproduction must meet.

Every value here is read from ``shared/papers/*.md`` (summarised in
``shared/reference/paper_targets.md``). They are *targets*: runners compare simulated values
against them and calibration scripts fit runtime profiles to the measured ones (the
GLITCHES Table I latencies and powers); no cost model reads them.

Tolerances (relative unless ``abs_tolerance``): single-device latencies, powers and
throughputs ±5 %, system ratios ±10 %, unless noted. Derived figures (operational
intensity, utilisation) get the sum of the tolerances of the figures they derive from.
Target ids are ``paper.figure.subject.quantity``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Target:
    """One published figure: value, unit, tolerance and where it is printed."""

    id: str
    quantity: str
    unit: str
    value: float
    tolerance: float
    source: str
    abs_tolerance: bool = False
    note: str = ""

    @property
    def paper(self) -> str:
        """The paper the figure belongs to (the id's first component)."""
        return self.id.split(".", 1)[0]


_T: list[Target] = []


def _add(
    id: str,
    quantity: str,
    unit: str,
    value: float,
    tolerance: float,
    source: str,
    *,
    abs_tolerance: bool = False,
    note: str = "",
) -> None:
    _T.append(Target(id, quantity, unit, value, tolerance, source, abs_tolerance, note))


# --- GLITCHES ---------------------------------------------------------------------------------
# Table I: LLaMA2-7B, prefill 1536 tokens, decode 512 tokens (per-token averages), batch 1.
_TABLE1 = {
    # device: (prefill GFLOPs, prefill GB, prefill OI, prefill W, prefill ms,
    #          decode GFLOPs, decode GB, decode OI, decode W, decode ms)
    "a100": (21137.01, 48.38, 406.91, 256.6, 175.85, 14.16, 14.08, 0.94, 167.3, 24.26),
    "v100s": (21137.01, 48.38, 406.91, 239.8, 398.80, 14.16, 14.08, 0.94, 222.5, 29.52),
    "u280": (21137.01, 21.29, 924.47, 46.0, 5001.20, 14.16, 3.96, 3.33, 46.0, 21.50),
}
for _dev, _v1 in _TABLE1.items():
    _gb_tol = 0.10 if _dev == "u280" else 0.05  # issue 3: W4A8 traffic within 10 %
    _src = "GLITCHES Table I"
    for _i, _phase in ((0, "prefill"), (5, "decode")):
        _per = "" if _phase == "prefill" else " per token"
        _add(
            f"glitches.table1.{_dev}.{_phase}_gflops",
            f"{_dev} {_phase} computation{_per}",
            "GFLOP",
            _v1[_i],
            0.02,
            _src,
        )
        _add(
            f"glitches.table1.{_dev}.{_phase}_gb",
            f"{_dev} {_phase} memory access{_per}",
            "GB",
            _v1[_i + 1],
            _gb_tol,
            _src,
        )
        _add(
            f"glitches.table1.{_dev}.{_phase}_oi",
            f"{_dev} {_phase} operational intensity",
            "OP/byte",
            _v1[_i + 2],
            0.02 + _gb_tol,
            _src,
            note="tolerance = FLOPs tolerance + bytes tolerance",
        )
        _add(
            f"glitches.table1.{_dev}.{_phase}_w",
            f"{_dev} {_phase} power",
            "W",
            _v1[_i + 3],
            0.05,
            _src,
        )
        _add(
            f"glitches.table1.{_dev}.{_phase}_ms",
            f"{_dev} {_phase} latency{_per}",
            "ms",
            _v1[_i + 4],
            0.05,
            _src,
        )

# Table II: device parameters (catalog inputs) and figures derived from Table I.
_TABLE2 = {
    # device: (peak T(FL)OPS, GB/s, $, prefill bw util, prefill compute util, prefill
    #          tok/s/W, prefill tok/s/$, decode bw util, decode compute util, decode tok/s/W,
    #          decode tok/s/$)
    "a100": (312, 1935, 17000, 0.1422, 0.3852, 2.22e-2, 3.35e-4, 0.2999, 0.0019, 0.246, 2.42e-3),
    "v100s": (130, 1134, 12000, 0.1070, 0.4077, 1.05e-2, 2.09e-4, 0.4206, 0.0037, 0.152, 2.82e-3),
    "u280": (6.91, 460, 8000, 0.0093, 0.6115, 4.35e-3, 2.50e-5, 0.4008, 0.0953, 1.01, 5.81e-3),
}
for _dev, _v2 in _TABLE2.items():
    _src = "GLITCHES Table II"
    _gb_tol = 0.10 if _dev == "u280" else 0.05
    _add(
        f"glitches.table2.{_dev}.peak_tops",
        f"{_dev} peak performance",
        "TOPS",
        _v2[0],
        0.0,
        _src,
        note="catalog input (datasheet / design peak), not modelled",
    )
    _add(
        f"glitches.table2.{_dev}.bw_gbps",
        f"{_dev} memory bandwidth",
        "GB/s",
        _v2[1],
        0.0,
        _src,
        note="catalog input (datasheet), not modelled",
    )
    _add(
        f"glitches.table2.{_dev}.cost_usd",
        f"{_dev} cost",
        "USD",
        _v2[2],
        0.0,
        _src,
        note="catalog input, not modelled",
    )
    for _i, _phase in ((3, "prefill"), (7, "decode")):
        _add(
            f"glitches.table2.{_dev}.{_phase}_bw_util",
            f"{_dev} {_phase} bandwidth utilisation",
            "fraction",
            _v2[_i],
            _gb_tol + 0.05,
            _src,
            note="traffic / latency / datasheet bandwidth; tolerance = bytes + latency",
        )
        _add(
            f"glitches.table2.{_dev}.{_phase}_compute_util",
            f"{_dev} {_phase} compute utilisation",
            "fraction",
            _v2[_i + 1],
            0.07,
            _src,
            note="FLOPs / latency / peak; tolerance = FLOPs + latency",
        )
        _add(
            f"glitches.table2.{_dev}.{_phase}_energy_eff",
            f"{_dev} {_phase} energy efficiency",
            "token/s/W",
            _v2[_i + 2],
            0.05,
            _src,
            note="one token per prefill, one per decode step: 1 / (latency × power)",
        )
        _add(
            f"glitches.table2.{_dev}.{_phase}_cost_eff",
            f"{_dev} {_phase} cost efficiency",
            "token/s/USD",
            _v2[_i + 3],
            0.05,
            _src,
            note="1 / (latency × price)",
        )

# §I / §III-A ratios quoted in the text.
_add(
    "glitches.text.u280_over_a100_prefill",
    "U280 / A100 prefill latency",
    "ratio",
    28.44,
    0.10,
    "GLITCHES §I, §III-A",
)
_add(
    "glitches.text.u280_over_v100s_prefill",
    "U280 / V100S prefill latency",
    "ratio",
    12.54,
    0.10,
    "GLITCHES §III-A",
)

# Fig. 9: data prefetching on U280 (LLaMA2-7B decode).
_add(
    "glitches.fig9.speedup_seq128",
    "decode speedup of M = 4 over M = 1 at sequence 128",
    "x",
    1.20,
    0.05,
    "GLITCHES §V-B, Fig. 9",
)
_add(
    "glitches.fig9.speedup_seq1024",
    "decode speedup of M = 4 over M = 1 at sequence 1024",
    "x",
    1.16,
    0.05,
    "GLITCHES §V-B, Fig. 9",
)
_add(
    "glitches.fig9.best_ratio",
    "best prefetch ratio among {1, 2, 4, 8, 16}",
    "M",
    4,
    0.0,
    "GLITCHES §V-B, Fig. 9",
    abs_tolerance=True,
)

# Fig. 7: system throughput and cost efficiency, averaged over the figure's grid.
for _sys, _vs, _thr, _cost, _tol in (
    ("a100_7u280", "8a100", 1.28, 2.38, 0.15),
    ("a100_7u280", "8u280", 1.23, 1.08, 0.25),
    ("v100s_7u280", "8v100s", 1.34, 1.90, 0.15),
    ("v100s_7u280", "8u280", 1.21, 1.14, 0.25),
):
    _add(
        f"glitches.fig7.{_sys}_vs_{_vs}.throughput",
        f"1x{_sys} vs {_vs}: throughput",
        "x",
        _thr,
        _tol,
        "GLITCHES §V-B, Fig. 7",
    )
    _add(
        f"glitches.fig7.{_sys}_vs_{_vs}.cost_eff",
        f"1x{_sys} vs {_vs}: cost efficiency",
        "x",
        _cost,
        _tol,
        "GLITCHES §V-B, Fig. 7",
    )

# Fig. 8: KV-cache transfer GPU -> host -> U280 against the GPU prefill, over sequence lengths.
# The paper states no numbers: "in most cases (especially with longer input tokens) ... the
# data transmission latency is less than the GPU prefill latency" (§V-B).
for _gpu in ("a100", "v100s"):
    _add(
        f"glitches.fig8.{_gpu}.longer_inputs_below_prefill",
        f"{_gpu}: KV transfer below prefill at every longer input (1 = yes)",
        "bool",
        1.0,
        0.0,
        "GLITCHES §V-B, Fig. 8",
        abs_tolerance=True,
    )
    _add(
        f"glitches.fig8.{_gpu}.fraction_below_prefill",
        f"{_gpu}: share of swept lengths with KV transfer below prefill ('most cases')",
        "fraction",
        1.0,
        0.49,
        "GLITCHES §V-B, Fig. 8",
        abs_tolerance=True,
        note="'most cases' read as more than half: within 0.49 of 1",
    )

# --- Neo --------------------------------------------------------------------------------------
for _id, _q, _v in (
    ("neo.fig6.h100x2_llama3.1-70b_ac", "2xH100 + LLaMa-3.1-70B (AC) throughput at 2 s", 1.143),
    ("neo.fig6.a10g_llama3.1-8b_ac", "A10G + LLaMa-3.1-8B (AC) throughput at 2 s", 1.064),
    ("neo.fig6.t4_llama2-7b_osc", "T4 + LLaMa-2-7B (OSC) throughput at 1 s", 6.63),
    ("neo.fig9.h100_max", "synthetic workloads, H100: best gain", 1.14),
    ("neo.fig9.a10g_max", "synthetic workloads, A10G: best gain", 1.26),
    ("neo.fig9.t4_max", "synthetic workloads, T4: best gain", 7.5),
    ("neo.fig10.g5_2xlarge", "A10G g5.2xlarge CPU sensitivity", 1.122),
    ("neo.fig10.g5_4xlarge", "A10G g5.4xlarge CPU sensitivity", 1.133),
    ("neo.fig10.g5_8xlarge", "A10G g5.8xlarge CPU sensitivity", 1.297),
    ("neo.fig10.g5_16xlarge", "A10G g5.16xlarge CPU sensitivity", 1.793),
):
    # Issue 5: each relative gain (throughput ratio) within 20 %.
    _add(_id, f"Neo over GPU-only: {_q}", "x", _v, 0.20, "Neo §5")
_add(
    "neo.fig8.fastdecode_long_output",
    "FastDecode+ throughput relative to GPU-only at long outputs (input 2000)",
    "x",
    0.60,
    0.10,
    "Neo §5, Fig. 8b",
    note="the paper says 'below 60 %': a simulated value at or under 0.60 also agrees",
)
# Qualitative shapes of Neo §5 (issue 5), as fractions / bounds.
_add(
    "neo.fig9.rise_then_fall",
    "fraction of Fig. 9/10 output sweeps whose gain rises, peaks inside, then falls",
    "fraction",
    1.0,
    0.0,
    "Neo §5.4: gains first grow to the maximum point ... then gradually drop",
    abs_tolerance=True,
)
_add(
    "neo.fig9.worst_ratio",
    "lowest Neo / GPU-only throughput over every synthetic point (lower bound)",
    "x",
    0.95,
    0.0,
    "Neo §5.3-5.4: Neo can fall back to GPU-only; 'slightly worse' at short outputs",
    note="a lower bound: 'never below GPU-only by more than a few %' read as 5 %",
)
_add(
    "neo.fig10.order",
    "peak gains ordered by CPU bandwidth (g5.2x ≈ g5.4x < g5.8x < g5.16x)",
    "bool",
    1.0,
    0.0,
    "Neo §5.5, Fig. 10a",
    abs_tolerance=True,
)
_add(
    "neo.fig8a.fastdecode_load",
    "FastDecode+ sustains less load than Neo at 2 s per-token latency (2xH100, AC)",
    "bool",
    1.0,
    0.0,
    "Neo §5.3, Fig. 8a",
    abs_tolerance=True,
)

# --- HeteroLLM --------------------------------------------------------------------------------
_H = "HeteroLLM §5"
_add(
    "heterollm.prefill.llama8b_seq1024_tok_s",
    "Hetero-tensor prefill, Llama-8B, seq 1024",
    "token/s",
    247.9,
    0.05,
    _H,
)
_add(
    "heterollm.prefill.internlm1.8b_tok_s",
    "Hetero-tensor prefill, InternLM-1.8B (best)",
    "token/s",
    1092,
    0.05,
    _H,
)
_add(
    "heterollm.prefill.tensor_over_layer_avg",
    "Hetero-tensor over Hetero-layer (average)",
    "x",
    1.302,
    0.10,
    _H,
)
_add(
    "heterollm.prefill.tensor_over_layer_max",
    "Hetero-tensor over Hetero-layer (max)",
    "x",
    1.408,
    0.10,
    _H,
)
for _k, _v in (("online_prepare", 2.24), ("padding", 2.21), ("pipe", 1.35)):
    _add(
        f"heterollm.misaligned525.over_{_k}",
        f"misaligned seq 525: Hetero-tensor over {_k}",
        "x",
        _v,
        0.10,
        "HeteroLLM §5, Fig. 14",
    )
for _m, _v in (("llama8b", 14.01), ("llama3b", 29.9), ("internlm1.8b", 51.12)):
    _add(
        f"heterollm.decode.{_m}_tok_s",
        f"Hetero-tensor decode, {_m}",
        "token/s",
        _v,
        0.05,
        "HeteroLLM §5, Fig. 16",
    )
_add(
    "heterollm.decode.tensor_over_gpu_llama8b",
    "Hetero-tensor over GPU-only decode, Llama-8B",
    "x",
    1.234,
    0.10,
    _H,
)
_add("heterollm.soc.gpu_only_bw", "SoC bandwidth, GPU alone", "GB/s", 43.3, 0.05, _H)
_add("heterollm.soc.gpu_npu_bw", "SoC bandwidth, GPU + NPU", "GB/s", 59.1, 0.05, _H)
_add(
    "heterollm.sync.prefill_layer",
    "fast sync prefill gain, Hetero-layer, Llama-8B",
    "x",
    1.158,
    0.10,
    _H,
)
_add(
    "heterollm.sync.prefill_tensor",
    "fast sync prefill gain, Hetero-tensor, Llama-8B",
    "x",
    1.243,
    0.10,
    _H,
)
_add("heterollm.sync.decode_llama8b", "fast sync decode gain, Llama-8B", "x", 4.01, 0.10, _H)
_add(
    "heterollm.power.prefill_layer_w",
    "prefill power, Hetero-layer",
    "W",
    2.23,
    0.05,
    "HeteroLLM §5, Fig. 19",
)
_add(
    "heterollm.power.tensor_over_layer",
    "prefill power, Hetero-tensor over Hetero-layer",
    "x",
    1.232,
    0.10,
    "HeteroLLM §5, Fig. 19",
)

# --- H2M2 -------------------------------------------------------------------------------------
_M = "H2M2 §6"
for _model, _b, _vals in (
    ("gpt3-175b", 32, (("h2m2", 1.46), ("oracle", 1.50), ("hierarchical", 1.07))),
    ("chinchilla-70b", 64, (("h2m2", 1.55), ("hierarchical", 1.33))),
    ("llama2-70b", 128, (("h2m2", 2.94), ("oracle", 3.00), ("hierarchical", 2.75))),
):
    for _k, _v in _vals:
        _add(
            f"h2m2.speedup.{_model}_b{_b}.{_k}",
            f"{_model} batch {_b}: {_k} over LPDDR-only",
            "x",
            _v,
            0.10,
            _M,
        )
_add(
    "h2m2.speedup.gpt3-175b_b32.h2m2_of_oracle",
    "GPT3-175B: H2M2 / Oracle",
    "fraction",
    0.97,
    0.10,
    _M,
)
_add(
    "h2m2.speedup.chinchilla-70b_b64.h2m2_of_oracle",
    "Chinchilla-70B: H2M2 / Oracle",
    "fraction",
    0.95,
    0.10,
    _M,
)
for _k, _v in (
    ("head_aware", 1.50),
    ("sublayer", 1.27),
    ("flexgen_lp", 1.30),
    ("q_major", 1.22),
    ("a_major", 1.40),
    ("f_major", 1.12),
):
    _add(f"h2m2.gpt3.{_k}", f"GPT3-175B: {_k} over LPDDR-only", "x", _v, 0.10, "H2M2 §3, Figs 6-8")
_add(
    "h2m2.gpt3.flexgen_of_best",
    "GPT3-175B: FlexGen mapping / Best",
    "fraction",
    0.87,
    0.10,
    "H2M2 §3, Fig. 7",
)
_add("h2m2.dynamic.h2m2", "dynamic sequence lengths (128 iterations): H2M2", "x", 1.48, 0.10, _M)
_add("h2m2.dynamic.flexgen", "dynamic sequence lengths: FlexGen", "x", 1.25, 0.10, _M)
_add(
    "h2m2.dynamic.h2m2_of_oracle",
    "dynamic sequence lengths: H2M2 / Oracle",
    "fraction",
    0.96,
    0.10,
    _M,
)
for _model, _abs_, _map in (
    ("gpt3-175b", 0.80, 2.56),
    ("chinchilla-70b", 1.01, 3.76),
    ("llama2-70b", 1.36, 0.60),
):
    _add(
        f"h2m2.overhead.{_model}.abstraction_pct",
        f"{_model}: memory-abstraction overhead",
        "%",
        _abs_,
        0.5,
        _M,
        abs_tolerance=True,
        note="absolute tolerance in percentage points",
    )
    _add(
        f"h2m2.overhead.{_model}.mapping_pct",
        f"{_model}: mapping overhead vs optimal",
        "%",
        _map,
        0.5,
        _M,
        abs_tolerance=True,
        note="absolute tolerance in percentage points",
    )
_add("h2m2.hbm8.speedup", "8-HBM system over LPDDR-only", "x", 2.29, 0.10, _M)
_add("h2m2.energy.h2m2", "memory energy per token, H2M2 relative", "x", 0.76, 0.10, _M)
_add("h2m2.energy.hbm8", "memory energy per token, 8-HBM relative", "x", 1.31, 0.10, _M)


TARGETS: dict[str, Target] = {t.id: t for t in _T}
if len(TARGETS) != len(_T):  # pragma: no cover - guards against copy-paste ids
    raise RuntimeError("duplicate target ids")


def target(id: str) -> Target:
    """The target ``id``; KeyError names it when unknown."""
    try:
        return TARGETS[id]
    except KeyError:
        raise KeyError(f"unknown target {id!r}") from None


def for_paper(paper: str) -> list[Target]:
    """Every target of ``paper`` in definition order."""
    return [t for t in _T if t.paper == paper]
