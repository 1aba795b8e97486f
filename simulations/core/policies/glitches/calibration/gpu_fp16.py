"""Fit the HuggingFace eager FP16 GPU profile (``hf-eager-fp16``) to GLITCHES Table I.

Measurements (GLITCHES Table I, LLaMA2-7B, prefill 1536 tokens, 512 decode steps):
A100 80GB PCIe and V100S prefill latency, mean decode latency per token, and the power of
each phase.

Procedure
1. Structure, counted from the stack and not fitted: 48 kernels per decoder layer (HF
   ``LlamaDecoderLayer`` eager FP16: two RMSNorms of 8 kernels — cast, pow, mean, add,
   rsqrt, mul, cast, mul — q/k/v projections 3, rotary embedding 12 — cos/sin gathers 2,
   rotate_half neg+cat 2 × 2, mul/mul/add 3 × 2 —, KV-cache concatenation 2, score matmul,
   scaling, mask add, softmax, cast, value matmul, transpose-contiguous (7), o_proj,
   residual add, gate, SiLU, up, mul, down, residual add (8)); 20 kernels per forward pass
   outside the layers (embedding, final RMSNorm 8, LM head, logits cast, argmax, input-id and
   attention-mask concatenation, position ids 3, stopping criteria 2); eager attention that
   materialises the score matrix.
2. Latency: one set of ``compute_eff``, ``bw_eff`` and ``kernel_launch_us`` minimising the
   squared relative errors of all four latencies at once (both GPUs).
3. Power: ``power_compute_frac``, ``power_memory_frac``, ``power_wait_frac`` in [0, 1]
   (fractions of each GPU's TDP while executing compute-bound kernels, memory-bound kernels,
   or waiting for the host) minimising the squared relative errors of the four powers, with
   the latency parameters of step 2.
4. Leave-one-out: fit step 2 on one GPU and predict the other. One GPU's decode time alone
   cannot separate host overhead from weight streaming, so ``bw_eff`` is held at its
   physical bound 1.0 and ``compute_eff`` and ``kernel_launch_us`` are fitted.

Run ``python -m simulations.core.policies.glitches.calibration.gpu_fp16`` to print the
fitted values (what ``data/runtimes/gpu.json`` must hold) and the residuals; ``--check``
compares with the file.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from simulations.core.calibration.common import (
    calibration_main,
    round_sig,
    table,
    with_fitted,
)
from simulations.core.catalog import builtin_catalog
from simulations.core.devices.gpu import GpuModel
from simulations.core.graph import PhaseGraph, decode_graph, prefill_graph
from simulations.core.reproduce.targets import load_targets
from simulations.core.spec import DeviceKind, DeviceSpec, RuntimeProfile

from .table1 import DECODE_STEPS, PROMPT_TOKENS, decode_average, llama2_7b

SLUG = "hf-eager-fp16"
FILENAME = "gpu.json"
#: Catalog slug → GLITCHES table key.
DEVICES = {"a100-80gb": "a100", "v100s": "v100s"}
KERNELS_PER_LAYER = 48
KERNELS_PER_PASS = 20
#: bw_eff used when a single GPU cannot identify it (leave-one-out).
BW_EFF_BOUND = 1.0

LATENCY_KEYS = ("compute_eff", "bw_eff", "kernel_launch_us")
POWER_KEYS = ("power_compute_frac", "power_memory_frac", "power_wait_frac")
#: The GLITCHES targets this script fits (read by simulations.core.reproduce.basis: their
#: checks are calibration, never predictions).
FITS = {
    "glitches.table1.a100.prefill_ms": (
        "hf-eager-fp16's compute_eff, bw_eff and kernel_launch_us are fitted to the four "
        "Table I A100/V100S latencies at once."
    ),
    "glitches.table1.a100.decode_ms": (
        "hf-eager-fp16's compute_eff, bw_eff and kernel_launch_us are fitted to the four "
        "Table I A100/V100S latencies at once."
    ),
    "glitches.table1.a100.prefill_w": (
        "hf-eager-fp16's three power fractions of TDP are fitted to the four Table I "
        "A100/V100S powers at once."
    ),
    "glitches.table1.a100.decode_w": (
        "hf-eager-fp16's three power fractions of TDP are fitted to the four Table I "
        "A100/V100S powers at once."
    ),
    "glitches.table1.v100s.prefill_ms": (
        "hf-eager-fp16's compute_eff, bw_eff and kernel_launch_us are fitted to the four "
        "Table I A100/V100S latencies at once."
    ),
    "glitches.table1.v100s.decode_ms": (
        "hf-eager-fp16's compute_eff, bw_eff and kernel_launch_us are fitted to the four "
        "Table I A100/V100S latencies at once."
    ),
    "glitches.table1.v100s.prefill_w": (
        "hf-eager-fp16's three power fractions of TDP are fitted to the four Table I "
        "A100/V100S powers at once."
    ),
    "glitches.table1.v100s.decode_w": (
        "hf-eager-fp16's three power fractions of TDP are fitted to the four Table I "
        "A100/V100S powers at once."
    ),
}


def structure() -> RuntimeProfile:
    """The stack's counted structure with neutral efficiencies (the starting point)."""
    return RuntimeProfile(
        slug=SLUG,
        name="HuggingFace Transformers eager FP16",
        device_kind=DeviceKind.GPU,
        weight_bits=16,
        act_bits=16,
        kv_bits=16,
        compute_eff=1.0,
        bw_eff=1.0,
        kernel_launch_us=0.0,
        kernels_per_layer=KERNELS_PER_LAYER,
        params={"kernels_per_pass": KERNELS_PER_PASS, "fused_attention": 0},
    )


@dataclass(frozen=True, slots=True)
class Measured:
    """GLITCHES Table I for one GPU (seconds, watts)."""

    prefill_s: float
    decode_s: float
    prefill_w: float
    decode_w: float


def measured(slug: str) -> Measured:
    """Published measurements of GPU ``slug``."""
    key = DEVICES[slug]
    table1 = load_targets("glitches")
    t = lambda q: table1.value(f"glitches.table1.{key}.{q}")  # noqa: E731
    return Measured(t("prefill_ms") / 1e3, t("decode_ms") / 1e3, t("prefill_w"), t("decode_w"))


def device(slug: str) -> DeviceSpec:
    """The catalog's datasheet spec of ``slug``."""
    return builtin_catalog().device(slug)


def profile(values: dict[str, float]) -> RuntimeProfile:
    """The structure with fitted ``values`` (fields and params) applied."""
    return with_fitted(structure(), values, LATENCY_KEYS)


def predict(rt: RuntimeProfile, slug: str) -> Measured:
    """Simulated Table I figures of ``slug`` under ``rt``."""
    m = llama2_7b()
    gm = GpuModel(device(slug), rt)
    p = gm.prefill(m, [PROMPT_TOKENS])
    d_s, d_j, _, _ = decode_average(gm, m)
    return Measured(p.seconds, d_s, p.avg_power_w, d_j / d_s)


def _latency_residuals(x: np.ndarray, slugs: Sequence[str], bw_eff: float | None) -> list[float]:
    vals = {"compute_eff": x[0], "kernel_launch_us": x[1]}
    vals["bw_eff"] = x[2] if bw_eff is None else bw_eff
    rt = profile(vals)
    out = []
    for s in slugs:
        sim, meas = predict(rt, s), measured(s)
        out += [sim.prefill_s / meas.prefill_s - 1, sim.decode_s / meas.decode_s - 1]
    return out


def fit_latency(slugs: Sequence[str], bw_eff: float | None = None) -> dict[str, float]:
    """Least-squares ``compute_eff``, ``kernel_launch_us`` (and ``bw_eff`` unless given)."""
    x0 = [0.5, 10.0] + ([0.8] if bw_eff is None else [])
    lo = [0.05, 0.0] + ([0.05] if bw_eff is None else [])
    hi = [1.0, 200.0] + ([1.0] if bw_eff is None else [])
    sol = least_squares(_latency_residuals, x0, bounds=(lo, hi), args=(tuple(slugs), bw_eff))
    out = {"compute_eff": float(sol.x[0]), "kernel_launch_us": float(sol.x[1])}
    out["bw_eff"] = float(sol.x[2]) if bw_eff is None else bw_eff
    return {k: round_sig(v) for k, v in out.items()}


def fit_power(latency: dict[str, float], slugs: Sequence[str]) -> dict[str, float]:
    """Least-squares power fractions given the latency parameters."""
    # Energy is linear in the three fractions: E = TDP (pc·t_comp + pm·t_mem + pw·t_wait).
    m = llama2_7b()
    rows, target_w = [], []
    for s in slugs:
        dev = device(s)
        gm = GpuModel(dev, profile(latency))
        phases = (
            ([prefill_graph(m, [PROMPT_TOKENS])], measured(s).prefill_w),
            (_decode_graphs(gm), measured(s).decode_w),
        )
        for graphs, meas_w in phases:
            tc = tm = tw = 0.0
            for g in graphs:
                tl = gm.timeline(g)
                tc += tl["compute_bound_s"]
                tm += tl["memory_bound_s"]
                tw += tl["host_wait_s"]
            total = tc + tm + tw
            # Relative residual: divide the row by the measured power.
            rows.append(
                [
                    dev.board_power_w * tc / total / meas_w,
                    dev.board_power_w * tm / total / meas_w,
                    dev.board_power_w * tw / total / meas_w,
                ]
            )
            target_w.append(1.0)
    a, b = np.array(rows), np.array(target_w)
    sol = least_squares(lambda x: a @ x - b, [0.8, 0.6, 0.3], bounds=([0, 0, 0], [1, 1, 1]))
    return {k: round_sig(float(v)) for k, v in zip(POWER_KEYS, sol.x, strict=True)}


def _decode_graphs(gm: GpuModel) -> list[PhaseGraph]:
    """The 512 decode passes of the GLITCHES workload."""
    m = llama2_7b()
    return [decode_graph(m, 1, PROMPT_TOKENS + i, gm.precision) for i in range(DECODE_STEPS)]


def fitted_values(slugs: Sequence[str] = tuple(DEVICES)) -> dict[str, float]:
    """Every fitted value of the profile (what the catalog must hold)."""
    lat = fit_latency(slugs)
    return {**lat, **fit_power(lat, slugs)}


def fit(slugs: Sequence[str] = tuple(DEVICES)) -> RuntimeProfile:
    """The fitted profile."""
    return profile(fitted_values(slugs))


def residuals(
    rt: RuntimeProfile, slugs: Sequence[str] = tuple(DEVICES)
) -> list[dict[str, float | str]]:
    """Simulated vs measured figures of every GPU."""
    out: list[dict[str, float | str]] = []
    for s in slugs:
        sim, meas = predict(rt, s), measured(s)
        for q in ("prefill_s", "decode_s", "prefill_w", "decode_w"):
            a, b = getattr(sim, q), getattr(meas, q)
            out.append(
                {"device": s, "quantity": q, "simulated": a, "measured": b, "rel_err": a / b - 1}
            )
    return out


def leave_one_out() -> list[dict[str, float | str]]:
    """Fit latencies on each GPU alone (``bw_eff`` at its bound) and predict the other."""
    out: list[dict[str, float | str]] = []
    slugs = list(DEVICES)
    for train in slugs:
        lat = fit_latency([train], bw_eff=BW_EFF_BOUND)
        rt = profile(lat)
        for test in slugs:
            if test == train:
                continue
            sim, meas = predict(rt, test), measured(test)
            for q in ("prefill_s", "decode_s"):
                a, b = getattr(sim, q), getattr(meas, q)
                out.append(
                    {
                        "train": train,
                        "test": test,
                        "quantity": q,
                        "simulated": a,
                        "measured": b,
                        "rel_err": a / b - 1,
                        **lat,
                    }
                )
    return out


def _report(values: dict[str, float]) -> None:
    rt = profile(values)
    print("\nresiduals (both GPUs, one profile):")
    print(
        table(
            [
                (r["device"], r["quantity"], r["simulated"], r["measured"], f"{r['rel_err']:+.2%}")
                for r in residuals(rt)
            ],
            ("device", "quantity", "simulated", "measured", "rel_err"),
        )
    )
    print(f"\nleave-one-out (latency fitted on one GPU, bw_eff held at {BW_EFF_BOUND}):")
    print(
        table(
            [
                (
                    r["train"],
                    r["test"],
                    r["quantity"],
                    r["simulated"],
                    r["measured"],
                    f"{r['rel_err']:+.2%}",
                )
                for r in leave_one_out()
            ],
            ("fit on", "predict", "quantity", "simulated", "measured", "rel_err"),
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the fitted values and residuals; ``--check`` compares with the catalog."""
    return calibration_main(
        argv, doc=__doc__, slug=SLUG, filename=FILENAME, values=fitted_values, report=_report
    )


if __name__ == "__main__":
    sys.exit(main())
