"""The result document of one simulated system (docs/architecture.md), from the engine's
outcome.

Definitions (units are in the key names):

- The measurement window runs from the first arrival to the last completion (``span_s``).
  Throughputs are totals over it: ``throughput_tok_s`` counts generated (output) tokens,
  ``prompt_tok_s`` prompt tokens (each request's prompt once, recomputation not counted).
- ``ttft_ms`` = first token − arrival; ``tpot_ms`` = (last token − first token) / (output
  tokens − 1), over requests with at least two output tokens; ``e2e_s`` = last token −
  arrival. Each is ``{mean, p50, p90, p99}`` (numpy's linear percentiles).
- ``capex_usd`` is the sum of the device prices over every placement of the system, idle
  ones included (``null`` if a device has no price, and then so is
  ``cost_efficiency_tok_s_per_usd`` = throughput / capex); a device's price is the
  scenario's quote (its ``price_usd``) when given, else the catalog's. ``prices`` lists
  each placement's price per device and ``price_source`` (``scenario``/``catalog``/
  ``null``), and each ``devices`` entry repeats its placement's two
  (:meth:`~simulations.core.spec.SystemSpec.cost_fields`). A placement that quotes its
  board power (the scenario's ``tdp_w``, which the device models then use in place of the
  catalog's) adds ``tdp_w`` and ``power_source`` (``scenario``) to both entries; a
  placement powered by the catalog's figure adds neither.
- Energy: a device's busy energy comes from its cost model; while it waits it draws its
  idle power (``idle_power_w`` of the cost model) for the rest of the window.
  ``avg_power_w`` = total energy / span, ``energy_j_per_token`` = energy / generated tokens,
  ``energy_efficiency_tok_s_per_w`` = throughput / average power.
- ``slo_attainment``: fraction of requests whose own TTFT, TPOT and end-to-end latency are
  within the scenario's targets (each percentile target read as a per-request bound);
  ``slo_met`` says whether every percentile target holds for the distribution. Both are
  ``null`` without targets.
- ``timeline``: per device instance, the first :data:`~.engine.core.DEFAULT_TIMELINE_CAP`
  (or the policy's cap) compute intervals — ``prefill``, ``decode`` and the ``idle`` gaps
  between them — plus its PCIe ``transfer`` intervals (``lane`` ``pcie-in``/``pcie-out``);
  ``intervals_dropped`` counts what the cap left out. Enough for a Gantt chart like
  GLITCHES Fig. 4.
- ``latency_cdf``: the distributions behind the percentiles, for CDF charts — TTFT (ms),
  TPOT (ms) and end-to-end latency (s) at the quantiles ``q`` (0, 0.01, …, 1; numpy's
  linear percentiles), so a page draws them without storing every request.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations.core.engine.core import IDLE, SimOutput, UnitReport
from simulations.core.spec import SloSpec, SystemSpec


def percentiles(values: np.ndarray) -> dict[str, float | None]:
    """``{mean, p50, p90, p99}`` of ``values`` (all ``None`` when empty)."""
    if values.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


#: Quantiles at which :func:`latency_cdf` samples each latency distribution.
CDF_QUANTILES: tuple[float, ...] = tuple(i / 100 for i in range(101))


def latency_cdf(
    ttft_ms: np.ndarray, tpot_ms: np.ndarray, e2e_s: np.ndarray
) -> dict[str, list[float] | None]:
    """``{q, ttft_ms, tpot_ms, e2e_s}``: each distribution at the quantiles ``q`` (a
    distribution without samples is ``None``)."""
    q = np.asarray(CDF_QUANTILES)

    def at(values: np.ndarray) -> list[float] | None:
        values = np.asarray(values, dtype=np.float64)
        return None if values.size == 0 else [float(v) for v in np.quantile(values, q)]

    return {
        "q": list(CDF_QUANTILES),
        "ttft_ms": at(ttft_ms),
        "tpot_ms": at(tpot_ms),
        "e2e_s": at(e2e_s),
    }


def _timeline(u: UnitReport, span_end: float) -> dict[str, Any]:
    intervals: list[dict[str, Any]] = []
    cursor = 0.0
    for start, end, kind, request, batch in u.timeline:
        if start > cursor + 1e-12:
            intervals.append(
                {"start_s": cursor, "end_s": start, "kind": IDLE, "request": None, "batch": 0}
            )
        intervals.append(
            {
                "start_s": start,
                "end_s": end,
                "kind": kind,
                "request": None if request < 0 else int(request),
                "batch": int(batch),
            }
        )
        cursor = end
    if not u.timeline_dropped and span_end > cursor + 1e-12:
        intervals.append(
            {"start_s": cursor, "end_s": span_end, "kind": IDLE, "request": None, "batch": 0}
        )
    transfers = [
        {
            "start_s": start,
            "end_s": end,
            "kind": kind,
            "request": None if request < 0 else int(request),
            "lane": f"pcie-{lane}",
        }
        for start, end, kind, request, _batch, lane in u.link_timeline
    ]
    return {
        "device": u.device,
        "index": u.index,
        "role": u.role,
        "intervals": intervals,
        "transfers": transfers,
        "intervals_dropped": u.timeline_dropped,
    }


def _slo(
    slo: SloSpec, ttft_ms: np.ndarray, tpot_ms: np.ndarray, tpot_mask: np.ndarray, e2e: np.ndarray
) -> tuple[float | None, bool | None]:
    n = ttft_ms.size
    ok = np.ones(n, dtype=bool)
    met = True
    any_target = False
    tpot_full = np.zeros(n)
    tpot_full[tpot_mask] = tpot_ms
    for target, values, q, per_request in (
        (slo.ttft_p90_ms, ttft_ms, 90, ttft_ms),
        (slo.ttft_p99_ms, ttft_ms, 99, ttft_ms),
        (slo.tpot_p90_ms, tpot_ms, 90, tpot_full),
        (slo.tpot_p99_ms, tpot_ms, 99, tpot_full),
        (slo.e2e_p90_s, e2e, 90, e2e),
    ):
        if target is None:
            continue
        any_target = True
        ok &= per_request <= target
        if values.size and float(np.percentile(values, q)) > target:
            met = False
    if not any_target:
        return None, None
    return float(ok.mean()), met


def request_latencies(
    arrival_s: np.ndarray,
    first_token_s: np.ndarray,
    finish_s: np.ndarray,
    output_tokens: np.ndarray,
    slo: SloSpec,
) -> dict[str, Any]:
    """The latency part of a result (``ttft_ms``, ``tpot_ms``, ``e2e_s``, ``latency_cdf``,
    ``slo_attainment``, ``slo_met``) from each request's arrival, first and last token, by
    the definitions of this module's notes — one definition for every policy, so systems
    compare on the same TTFT and TPOT whatever simulates them."""
    ttft_ms = (first_token_s - arrival_s) * 1e3
    e2e_s = finish_s - arrival_s
    multi = output_tokens > 1
    tpot_ms = (finish_s[multi] - first_token_s[multi]) / (output_tokens[multi] - 1) * 1e3
    slo_attainment, slo_met = _slo(slo, ttft_ms, tpot_ms, multi, e2e_s)
    return {
        "ttft_ms": percentiles(ttft_ms),
        "tpot_ms": percentiles(tpot_ms),
        "e2e_s": percentiles(e2e_s),
        "latency_cdf": latency_cdf(ttft_ms, tpot_ms, e2e_s),
        "slo_attainment": slo_attainment,
        "slo_met": slo_met,
    }


def system_result(system: SystemSpec, out: SimOutput, slo: SloSpec) -> dict[str, Any]:
    """The result-document entry of ``system`` from its simulated outcome ``out``."""
    req = out.requests
    arrival = req.arrival_s
    outputs = req.output_tokens
    span = out.t_end - out.t_start
    if not span > 0:
        raise ValueError("a simulated run must take time")
    gen_tokens = int(outputs.sum())
    lat = request_latencies(arrival, out.first_token_s, out.finish_s, outputs, slo)

    throughput = gen_tokens / span
    energy_by_unit = [u.busy_j + u.idle_w * max(0.0, span - u.busy_s) for u in out.units]
    energy = float(sum(energy_by_unit))
    avg_power = energy / span

    devices: list[dict[str, Any]] = []
    for p_index, p in enumerate(system.devices):
        units = [u for u in out.units if u.placement == p_index]
        if not units:
            continue
        entry = {
            "device": p.device.slug,
            "count": sum(u.group_size for u in units),
            "role": p.role,
            "runtime": p.runtime.slug,
            "busy_fraction": float(np.mean([u.busy_s / span for u in units])),
            "prefill_fraction": float(np.mean([u.prefill_s / span for u in units])),
            "decode_fraction": float(np.mean([u.decode_s / span for u in units])),
            "energy_j": float(sum(energy_by_unit[u.index] for u in units)),
            "prefill_tokens": int(sum(u.prefill_tokens for u in units)),
            "generated_tokens": int(sum(u.decode_tokens + u.prefill_outputs for u in units)),
            "memory_peak_gb": float(max(u.mem_peak_bytes for u in units) / 1e9),
            "memory_capacity_gb": float(units[0].mem_capacity_bytes / 1e9),
            **p.price_fields(),
        }
        if units[0].parallel is not None:
            entry["parallel"] = _parallel(units)
        devices.append(entry)

    return {
        "name": system.name,
        "policy": system.policy,
        "requests": len(req),
        "generated_tokens": gen_tokens,
        "prompt_tokens": int(req.input_tokens.sum()),
        "span_s": span,
        "throughput_tok_s": throughput,
        "prompt_tok_s": float(req.input_tokens.sum()) / span,
        "requests_per_s": len(req) / span,
        "ttft_ms": lat["ttft_ms"],
        "tpot_ms": lat["tpot_ms"],
        "e2e_s": lat["e2e_s"],
        "latency_cdf": lat["latency_cdf"],
        **system.cost_fields(throughput),
        "avg_power_w": avg_power,
        "energy_j": energy,
        "energy_j_per_token": energy / gen_tokens,
        "energy_efficiency_tok_s_per_w": throughput / avg_power if avg_power > 0 else None,
        "slo_attainment": lat["slo_attainment"],
        "slo_met": lat["slo_met"],
        "preemptions": int(out.preemptions.sum()),
        "clipped_requests": int(req.clipped),
        "events": out.events,
        "devices": devices,
        "scheduler": {k: v for k, v in out.extra.items() if _jsonable(v)},
        "timeline": [_timeline(u, out.t_end) for u in out.units],
    }


def _parallel(units: list[UnitReport]) -> dict[str, Any]:
    """A placement's parallel layout (its units are the data-parallel replicas; the entry's
    ``memory_*_gb`` are a replica's), each device's share of the memory and its
    communication share: seconds in collectives over busy seconds."""
    busy = sum(u.busy_s for u in units)
    comm = sum(u.comm_s for u in units)
    group = units[0].group_size
    assert units[0].parallel is not None
    return {
        **units[0].parallel,
        "replicas": len(units),
        "devices_per_replica": group,
        "memory_peak_gb_per_device": float(max(u.mem_peak_bytes for u in units) / group / 1e9),
        "memory_capacity_gb_per_device": float(units[0].mem_capacity_bytes / group / 1e9),
        "comm_s_per_device": comm / len(units),
        "comm_share": comm / busy if busy > 0 else 0.0,
    }


def _jsonable(v: Any) -> bool:
    if isinstance(v, bool | int | str) or v is None:
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list | tuple):
        return all(_jsonable(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _jsonable(x) for k, x in v.items())
    return False
