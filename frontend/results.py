"""Reading a run's result document for the pages and the exports (CSV rows, ratios)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.renderers import csv_text, result_table
from frontend.charts.base import finite

DEVICE_COLUMNS = (
    "device",
    "count",
    "role",
    "runtime",
    "busy_fraction",
    "prefill_fraction",
    "decode_fraction",
    "energy_j",
    "memory_peak_gb",
    "memory_capacity_gb",
    "calibration",
    "calibration_note",
)


def _get(system: Mapping[str, Any], key: Any) -> Any:
    if isinstance(key, tuple):
        obj = system.get(key[0] + ("_s" if key[0] == "e2e" else "_ms"))
        return obj.get(key[1]) if isinstance(obj, Mapping) else None
    return system.get(key)


def systems_of(result: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The result's systems (empty without a result)."""
    if not isinstance(result, Mapping):
        return []
    return [s for s in result.get("systems") or () if isinstance(s, Mapping)]


def clipped_requests(systems: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Systems some of whose requests were clipped to the model's context window (prompt
    plus output cut to fit): ``{"name", "clipped", "requests"}`` each, in result order."""
    return [
        {"name": s.get("name", ""), "clipped": int(n), "requests": s.get("requests")}
        for s in systems
        if isinstance(n := s.get("clipped_requests"), int | float) and n > 0
    ]


def result_csv(result: Mapping[str, Any], baseline: int = 0) -> str:
    """The run page's "Result CSV": the systems table of ``/api/runs/{id}/result/?format=csv``
    (one schema, :func:`api.renderers.result_table`; ratios to ``baseline``), then, after
    a blank line, one row per device group (:data:`DEVICE_COLUMNS`)."""
    systems = systems_of(result)
    out = io.StringIO()
    out.write(csv_text(result_table(result, baseline)))
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([])
    writer.writerow(["system", *DEVICE_COLUMNS])
    for s in systems:
        for d in s.get("devices") or ():
            writer.writerow([s.get("name", ""), *(_cell(d.get(c)) for c in DEVICE_COLUMNS)])
    return out.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return value


@dataclass(frozen=True)
class SummaryRow:
    """A metric across the systems for the results table."""

    label: str
    unit: str
    values: list[Any]
    ratios: list[float | None]
    higher_is_better: bool | None


#: (label, unit, key, higher is better) of the results table.
SUMMARY = (
    ("Throughput", "tok/s", "throughput_tok_s", True),
    ("Requests", "req/s", "requests_per_s", True),
    ("TTFT p50", "ms", ("ttft", "p50"), False),
    ("TTFT p90", "ms", ("ttft", "p90"), False),
    ("TTFT p99", "ms", ("ttft", "p99"), False),
    ("TPOT p50", "ms", ("tpot", "p50"), False),
    ("TPOT p90", "ms", ("tpot", "p90"), False),
    ("E2E p90", "s", ("e2e", "p90"), False),
    ("Capex", "USD", "capex_usd", False),
    ("Cost efficiency", "tok/s per $1k", "cost_efficiency_tok_s_per_usd", True),
    ("Average power", "W", "avg_power_w", False),
    ("Energy", "J/token", "energy_j_per_token", False),
    ("Energy efficiency", "tok/s per W", "energy_efficiency_tok_s_per_w", True),
    ("SLO attainment", "fraction", "slo_attainment", True),
)


def summary_rows(systems: Sequence[Mapping[str, Any]], baseline: int = 0) -> list[SummaryRow]:
    """The results table: each metric for every system and its ratio to the baseline."""
    if not systems:
        return []
    base = systems[baseline]
    rows = []
    for label, unit, key, better in SUMMARY:
        values = [_get(s, key) for s in systems]
        b = finite(_get(base, key))
        ratios = [
            (fv / b) if (fv := finite(v)) is not None and b else None  # b: not None, not 0
            for v in values
        ]
        unit, values = _readable(unit, values)
        rows.append(SummaryRow(label, unit, values, ratios, better))
    return rows


#: Latencies at or above this (ms) are shown in seconds: 3,348 s reads better than 3,348,000 ms.
MS_TO_S_FROM = 10_000.0


def _readable(unit: str, values: list[Any]) -> tuple[str, list[Any]]:
    """A row's unit and values scaled for reading (ratios are unchanged by a common scale):
    per-dollar figures per $1,000, long latencies in seconds."""
    finite_values = [v for v in map(finite, values) if v is not None]
    if unit == "tok/s per $1k":
        return unit, _scale(values, 1e3)
    if unit == "ms" and finite_values and max(abs(v) for v in finite_values) >= MS_TO_S_FROM:
        return "s", _scale(values, 1e-3)
    return unit, values


def _scale(values: list[Any], factor: float) -> list[float | None]:
    return [None if (v := finite(x)) is None else v * factor for x in values]


def headline(systems: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A run's headline for the run list: its best-throughput system (the first of a tie)
    with its throughput and p90 TTFT/TPOT, read as the results table reads them (None
    without a system that reports a throughput)."""
    best: Mapping[str, Any] | None = None
    best_t = 0.0
    for s in systems:
        t = finite(_get(s, "throughput_tok_s"))
        if t is not None and (best is None or t > best_t):
            best, best_t = s, t
    if best is None:
        return None
    return {
        "system": best.get("name", ""),
        "systems": len(systems),
        "throughput_tok_s": _get(best, "throughput_tok_s"),
        "ttft_p90_ms": _get(best, ("ttft", "p90")),
        "tpot_p90_ms": _get(best, ("tpot", "p90")),
    }


def compared_systems(
    results: Sequence[tuple[int, Mapping[str, Any] | None]],
) -> list[dict[str, Any]]:
    """The systems of several runs' results side by side, in the order given, each
    labelled "run #id · system name" so the tables and charts of a single run can show
    them (a shallow copy: the stored documents are not changed)."""
    out = []
    for run_id, result in results:
        for i, s in enumerate(systems_of(result)):
            out.append({**s, "name": f"run #{run_id} · {s.get('name', f'system {i}')}"})
    return out
