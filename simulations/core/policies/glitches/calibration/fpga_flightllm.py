"""Fit the FlightLLM W4A8 FPGA profile (``flightllm-w4a8``) to GLITCHES (U280).

Measurements: GLITCHES Table I (U280, LLaMA2-7B: prefill 1536 tokens 5001.20 ms, decode
21.50 ms per token averaged over 512 steps, 46.0 W in both phases, with prefetching) and
§V-B / Fig. 9 (decode speedup of prefetch ratio M = 4 over M = 1: 1.20× at sequence 128,
1.16× at sequence 1024).

Fixed design facts, not fitted:
- design peak 6.91 TOPS (GLITCHES Table II, note 2) and clock 225 MHz (§V-A, device spec);
- weight tile of 8 KB and metadata tile of 256 B per MV instruction (§V-B: q_proj loads
  grow from 8 KB to 32 KB and from 256 B to 1 KB at M = 4);
- weights 4 bit, activations and KV cache 8 bit ("about W4A8", §V-A; the KV cache is
  quantised before it reaches the FPGA, §III-C);
- per-channel on-chip weight buffer of 72 KB (two URAM288 blocks). Not published: an
  assumption. It only decides from which M on two prefetches stop fitting (M = 8 here).
- default prefetch ratio 4 (the configuration GLITCHES runs).

Fitted (least squares over the four latency figures at once):
- ``compute_eff`` — achieved fraction of the design peak (fixed mainly by prefill);
- ``bw_eff`` — achieved fraction of each HBM pseudo-channel's peak on long LD streams;
- ``ld_overhead_cycles`` — per-instruction cycles of a channel before its data flows.
``power_w``: least squares of the two Table I powers (a single FPGA measurement: the power
check is a calibration target, not an independent prediction).

Run ``python -m simulations.core.policies.glitches.calibration.fpga_flightllm``
(``--check`` compares with ``data/runtimes/fpga.json``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from scipy.optimize import least_squares

from simulations.core.calibration.common import (
    calibration_main,
    round_sig,
    table,
    with_fitted,
)
from simulations.core.catalog import builtin_catalog
from simulations.core.devices.fpga import FpgaModel
from simulations.core.reproduce.targets import load_targets
from simulations.core.spec import DeviceKind, RuntimeProfile

from .table1 import PROMPT_TOKENS, decode_average, llama2_7b

SLUG = "flightllm-w4a8"
FILENAME = "fpga.json"
DEVICE = "u280"
DESIGN = {
    "design_peak_tops": 6.91,
    "tile_weight_bytes": 8192,
    "tile_meta_bytes": 256,
    "buffer_kb_per_channel": 72,
    "prefetch_ratio": 4,
}
FIELD_KEYS = ("compute_eff", "bw_eff")
#: Context lengths of Fig. 9 (decode steps with this many cached tokens).
FIG9_SEQS = (128, 1024)
#: The GLITCHES targets this script fits (read by simulations.core.reproduce.basis: their
#: checks are calibration, never predictions).
FITS = {
    "glitches.table1.u280.prefill_ms": (
        "flightllm-w4a8's compute_eff, bw_eff and ld_overhead_cycles are fitted to the "
        "two U280 Table I latencies and the two Fig. 9 speedups at once."
    ),
    "glitches.table1.u280.decode_ms": (
        "flightllm-w4a8's compute_eff, bw_eff and ld_overhead_cycles are fitted to the "
        "two U280 Table I latencies and the two Fig. 9 speedups at once."
    ),
    "glitches.fig9.speedup_seq128": (
        "flightllm-w4a8's compute_eff, bw_eff and ld_overhead_cycles are fitted to the "
        "two U280 Table I latencies and the two Fig. 9 speedups at once."
    ),
    "glitches.fig9.speedup_seq1024": (
        "flightllm-w4a8's compute_eff, bw_eff and ld_overhead_cycles are fitted to the "
        "two U280 Table I latencies and the two Fig. 9 speedups at once."
    ),
    "glitches.table1.u280.prefill_w": (
        "flightllm-w4a8's constant power_w is the least-squares value of the two U280 "
        "Table I powers."
    ),
    "glitches.table1.u280.decode_w": (
        "flightllm-w4a8's constant power_w is the least-squares value of the two U280 "
        "Table I powers."
    ),
}


def structure() -> RuntimeProfile:
    """The design's fixed facts with neutral efficiencies."""
    return RuntimeProfile(
        slug=SLUG,
        name="FlightLLM W4A8 (GLITCHES, with data prefetching)",
        device_kind=DeviceKind.FPGA,
        weight_bits=4,
        act_bits=8,
        kv_bits=8,
        compute_eff=1.0,
        bw_eff=1.0,
        params={**DESIGN, "ld_overhead_cycles": 0.0, "power_w": 1.0},
    )


def profile(values: dict[str, float]) -> RuntimeProfile:
    """The structure with fitted ``values`` applied."""
    return with_fitted(structure(), values, FIELD_KEYS)


def predict(rt: RuntimeProfile) -> dict[str, float]:
    """Simulated U280 figures: latencies, power and the Fig. 9 speedups."""
    m = llama2_7b()
    fm = FpgaModel(builtin_catalog().device(DEVICE), rt)
    p = fm.prefill(m, [PROMPT_TOKENS])
    d_s, d_j, _, _ = decode_average(fm, m)
    out = {
        "prefill_s": p.seconds,
        "decode_s": d_s,
        "prefill_w": p.avg_power_w,
        "decode_w": d_j / d_s,
    }
    m1 = fm.with_prefetch(1)
    m4 = fm.with_prefetch(4)
    for s in FIG9_SEQS:
        out[f"speedup_seq{s}"] = m1.decode_step(m, 1, s).seconds / m4.decode_step(m, 1, s).seconds
    return out


def measured() -> dict[str, float]:
    """The published U280 figures (seconds, watts, ratios)."""
    t = load_targets("glitches").value
    return {
        "prefill_s": t("glitches.table1.u280.prefill_ms") / 1e3,
        "decode_s": t("glitches.table1.u280.decode_ms") / 1e3,
        "prefill_w": t("glitches.table1.u280.prefill_w"),
        "decode_w": t("glitches.table1.u280.decode_w"),
        "speedup_seq128": t("glitches.fig9.speedup_seq128"),
        "speedup_seq1024": t("glitches.fig9.speedup_seq1024"),
    }


_FITTED = ("prefill_s", "decode_s", "speedup_seq128", "speedup_seq1024")


def fitted_values() -> dict[str, float]:
    """Every fitted value of the profile (what the catalog must hold)."""
    meas = measured()

    def res(x: Sequence[float]) -> list[float]:
        sim = predict(profile({"compute_eff": x[0], "bw_eff": x[1], "ld_overhead_cycles": x[2]}))
        return [sim[k] / meas[k] - 1 for k in _FITTED]

    sol = least_squares(res, [0.6, 0.5, 30.0], bounds=([0.05, 0.05, 0.0], [1.0, 1.0, 1000.0]))
    out = {
        "compute_eff": float(sol.x[0]),
        "bw_eff": float(sol.x[1]),
        "ld_overhead_cycles": float(sol.x[2]),
    }
    out = {k: round_sig(v) for k, v in out.items()}
    # Energy is power × time with one constant power: the least-squares power of the two
    # relative residuals is their harmonic-weighted mean.
    w = [meas["prefill_w"], meas["decode_w"]]
    out["power_w"] = round_sig(sum(1 / x for x in w) / sum(1 / x**2 for x in w))
    return out


def fit() -> RuntimeProfile:
    """The fitted profile."""
    return profile(fitted_values())


def _report(values: dict[str, float]) -> None:
    sim, meas = predict(profile(values)), measured()
    print("\nresiduals (U280):")
    print(
        table(
            [(k, sim[k], meas[k], f"{sim[k] / meas[k] - 1:+.2%}") for k in meas],
            ("quantity", "simulated", "measured", "rel_err"),
        )
    )
    fm = FpgaModel(builtin_catalog().device(DEVICE), profile(values))
    m = llama2_7b()
    print("\nFig. 9 sweep (decode speedup over M = 1):")
    rows = []
    for s in FIG9_SEQS:
        base = fm.with_prefetch(1).decode_step(m, 1, s).seconds
        rows.append(
            (
                s,
                *(
                    base / fm.with_prefetch(r).decode_step(m, 1, s).seconds
                    for r in (1, 2, 4, 8, 16)
                ),
            )
        )
    print(table(rows, ("seq", "M=1", "M=2", "M=4", "M=8", "M=16")))


def main(argv: Sequence[str] | None = None) -> int:
    """Print the fitted values and residuals; ``--check`` compares with the catalog."""
    return calibration_main(
        argv, doc=__doc__, slug=SLUG, filename=FILENAME, values=fitted_values, report=_report
    )


if __name__ == "__main__":
    sys.exit(main())
