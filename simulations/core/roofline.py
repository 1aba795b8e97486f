"""Roofline data a page can chart (GLITCHES Fig. 2): per device, the compute and bandwidth
roofs (datasheet and as achieved by the runtime), the ridge point, and where each phase of
a workload sits (operational intensity, attainable and achieved performance).

Everything is returned as plain dicts and lists of floats (JSON-ready).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .devices import build_device_model
from .devices.base import PhaseCost
from .errors import SpecError
from .spec import DeviceSpec, ModelSpec, RuntimeProfile, check_count


def stack_peak_ops(device: DeviceSpec, runtime: RuntimeProfile) -> float:
    """Peak operations per second of ``device`` at the stack's precision, as its device
    family charts it (:meth:`~simulations.core.devices.base.DeviceModel.peak_ops_per_s`:
    an FPGA's roof is its accelerator design's peak, not the chip's)."""
    return build_device_model(device, runtime).peak_ops_per_s()


def roof(
    device: DeviceSpec,
    runtime: RuntimeProfile,
    *,
    intensity_range: tuple[float, float] = (0.1, 10_000.0),
    points: int = 61,
) -> dict[str, Any]:
    """The roofline of ``device`` under ``runtime``.

    ``curve`` samples attainable performance (OP/s) at log-spaced operational intensities
    (OP/byte) for the datasheet roof (``attainable_ops_per_s``) and the roof the stack
    achieves (``achieved_roof_ops_per_s``: peak × compute_eff, bandwidth × bw_eff).
    """
    lo, hi = intensity_range
    if not (0 < lo < hi and math.isfinite(hi)):
        raise SpecError("intensity_range", "must be 0 < low < high, finite")
    check_count("points", points, minimum=2, maximum=10_000)
    peak = stack_peak_ops(device, runtime)
    bw = device.mem_bw_gbps * 1e9
    peak_a, bw_a = peak * runtime.compute_eff, bw * runtime.bw_eff
    step = (math.log10(hi) - math.log10(lo)) / (points - 1)
    xs = [10 ** (math.log10(lo) + i * step) for i in range(points)]
    return {
        "device": device.slug,
        "runtime": runtime.slug,
        "peak_ops_per_s": peak,
        "bw_bytes_per_s": bw,
        "ridge_flop_per_byte": peak / bw,
        "achieved_peak_ops_per_s": peak_a,
        "achieved_bw_bytes_per_s": bw_a,
        "achieved_ridge_flop_per_byte": peak_a / bw_a,
        "curve": {
            "intensity_flop_per_byte": xs,
            "attainable_ops_per_s": [min(peak, bw * x) for x in xs],
            "achieved_roof_ops_per_s": [min(peak_a, bw_a * x) for x in xs],
        },
    }


def point(
    device: DeviceSpec, runtime: RuntimeProfile, phase: str, cost: PhaseCost
) -> dict[str, Any]:
    """Where one simulated phase sits on the roofline of ``device``."""
    if cost.bytes <= 0 or cost.seconds <= 0:
        raise SpecError("cost", "needs positive bytes and seconds")
    peak = stack_peak_ops(device, runtime)
    bw = device.mem_bw_gbps * 1e9
    oi = cost.flops / cost.bytes
    attainable = min(peak, bw * oi)
    achieved = cost.flops / cost.seconds
    return {
        "device": device.slug,
        "phase": phase,
        "intensity_flop_per_byte": oi,
        "attainable_ops_per_s": attainable,
        "achieved_ops_per_s": achieved,
        "bound": "compute" if oi >= peak / bw else "memory",
        "compute_utilisation": achieved / peak,
        "bandwidth_utilisation": cost.bytes / cost.seconds / bw,
    }


def phase_points(
    device: DeviceSpec,
    runtime: RuntimeProfile,
    model: ModelSpec,
    prompt_tokens: int,
    output_tokens: int,
    batch: int = 1,
) -> list[dict[str, Any]]:
    """Roofline points of the prefill of ``batch`` prompts and of the average decode step
    while ``output_tokens`` tokens are generated (context grows from ``prompt_tokens``)."""
    check_count("prompt_tokens", prompt_tokens)
    check_count("output_tokens", output_tokens)
    check_count("batch", batch)
    dm = build_device_model(device, runtime)
    pre = dm.prefill(model, [prompt_tokens] * batch)
    s = j = f = b = 0.0
    for i in range(output_tokens):
        c = dm.decode_step(model, batch, batch * (prompt_tokens + i))
        s, j, f, b = s + c.seconds, j + c.joules, f + c.flops, b + c.bytes
    n = output_tokens
    dec = PhaseCost(seconds=s / n, joules=j / n, flops=f / n, bytes=b / n)
    return [point(device, runtime, "prefill", pre), point(device, runtime, "decode", dec)]


def figure(
    systems: Sequence[tuple[DeviceSpec, RuntimeProfile]],
    model: ModelSpec,
    prompt_tokens: int,
    output_tokens: int,
    batch: int = 1,
) -> dict[str, Any]:
    """A roofline chart: one roof and two phase points per (device, runtime)."""
    return {
        "model": model.slug,
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "batch": batch,
        "series": [
            {
                **roof(dev, rt),
                "points": phase_points(dev, rt, model, prompt_tokens, output_tokens, batch),
            }
            for dev, rt in systems
        ],
    }
