"""Per-device timeline of one system as a Gantt chart (GLITCHES Fig. 4).

Each device instance of the result's ``timeline`` is a row; its compute intervals
(``prefill``, ``decode``, ``idle``) are bars along simulated time, and its PCIe transfers
(``pcie-in``/``pcie-out``) sit on a row of their own beneath it. One trace per interval
kind keeps the figure small whatever the number of devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from .base import esc, fmt, new_figure

#: Colour of each interval kind.
KIND_COLOURS = {
    "prefill": "#E69F00",
    "decode": "#0072B2",
    "transfer": "#009E73",
    "idle": "#E3E6EA",
}
#: At most this many intervals are drawn per chart (the rest are counted in the title).
MAX_INTERVALS = 6000


def _row_label(unit: Mapping[str, Any]) -> str:
    role = f" · {unit['role']}" if unit.get("role") else ""
    return f"{unit.get('device', '?')} #{unit.get('index', 0)}{role}"


def _lanes(
    units: Sequence[Mapping[str, Any]], window_s: float | None
) -> tuple[list[tuple[str, list[Mapping[str, Any]]]], int]:
    """The chart's rows (device, then its PCIe lane) with their intervals (those starting
    within ``window_s``), and the intervals the engine itself did not record."""
    lanes: list[tuple[str, list[Mapping[str, Any]]]] = []
    engine_dropped = 0
    for unit in units:
        label = _row_label(unit)
        engine_dropped += int(unit.get("intervals_dropped") or 0)
        pairs = [(label, unit.get("intervals") or ())]
        if unit.get("transfers"):
            pairs.append((f"{label} · PCIe", unit["transfers"]))
        for row, intervals in pairs:
            kept = [iv for iv in intervals if window_s is None or float(iv["start_s"]) < window_s]
            lanes.append((row, kept))
    return lanes, engine_dropped


def _exact_bars(
    lanes: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
) -> dict[str, dict[str, list[Any]]]:
    """One bar per interval."""
    bars: dict[str, dict[str, list[Any]]] = {}
    for row, intervals in lanes:
        for iv in intervals:
            start, end = float(iv["start_s"]), float(iv["end_s"])
            kind = str(iv.get("kind", "busy"))
            b = bars.setdefault(kind, {"y": [], "base": [], "x": [], "text": []})
            b["y"].append(row)
            b["base"].append(start)
            b["x"].append(max(end - start, 0.0))
            detail = [f"{kind} {fmt(start)}–{fmt(end)} s ({fmt((end - start) * 1e3)} ms)"]
            if iv.get("request") is not None:
                detail.append(f"request {iv['request']}")
            if iv.get("batch"):
                detail.append(f"batch {iv['batch']}")
            if iv.get("lane"):
                detail.append(str(iv["lane"]))
            b["text"].append(f"<b>{row}</b><br>" + "<br>".join(detail))
    return bars


def _binned_bars(
    lanes: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], end_s: float, bins: int
) -> dict[str, dict[str, list[Any]]]:
    """The whole run aggregated to ``bins`` equal time bins per row: each bin is one bar
    coloured by the kind that took most of it, its hover giving every kind's share."""
    width = end_s / bins
    bars: dict[str, dict[str, list[Any]]] = {}
    for row, intervals in lanes:
        share: list[dict[str, float]] = [{} for _ in range(bins)]
        for iv in intervals:
            start, end = float(iv["start_s"]), min(float(iv["end_s"]), end_s)
            kind = str(iv.get("kind", "busy"))
            first = min(int(start / width), bins - 1)
            last = min(int(end / width), bins - 1)
            for k in range(first, last + 1):
                lo, hi = max(start, k * width), min(end, (k + 1) * width)
                if hi > lo:
                    share[k][kind] = share[k].get(kind, 0.0) + (hi - lo)
        for k, kinds in enumerate(share):
            if not kinds:
                continue
            kind = max(kinds, key=lambda name: kinds[name])
            b = bars.setdefault(kind, {"y": [], "base": [], "x": [], "text": []})
            b["y"].append(row)
            b["base"].append(k * width)
            b["x"].append(width)
            parts = ", ".join(
                f"{name} {t / width:.0%}"
                for name, t in sorted(kinds.items(), key=lambda kv: -kv[1])
            )
            b["text"].append(
                f"<b>{row}</b><br>{fmt(k * width)}–{fmt((k + 1) * width)} s<br>{parts}"
            )
    return bars


def timeline_figure(system: Mapping[str, Any], *, window_s: float | None = None) -> go.Figure:
    """The Gantt chart of ``system``'s timeline, optionally only its first ``window_s``.

    Up to :data:`MAX_INTERVALS` intervals each is a bar; past that the whole run is
    aggregated to time bins (as many per row as the budget allows), so every device is
    drawn to the end of the run rather than the first intervals only."""
    units: Sequence[Mapping[str, Any]] = system.get("timeline") or ()
    name = esc(system.get("name", ""))
    lanes, engine_dropped = _lanes(units, window_s)
    rows = [row for row, _ in lanes]
    total = sum(len(ivs) for _, ivs in lanes)
    title = f"Per-device timeline — {name}"
    if total <= MAX_INTERVALS:
        bars = _exact_bars(lanes)
    else:
        end_s = max((float(iv["end_s"]) for _, ivs in lanes for iv in ivs), default=0.0)
        if window_s is not None:
            end_s = min(end_s, window_s)
        bins = max(1, MAX_INTERVALS // max(len(lanes), 1))
        bars = _binned_bars(lanes, end_s, bins) if end_s > 0 else {}
        title += f" ({total:,} intervals shown in {bins} time bins of {fmt(end_s / bins * 1e3)} ms)"
    if engine_dropped:
        title += f"; {engine_dropped:,} intervals were not recorded by the simulation"
    fig = new_figure(title, height=max(260, 60 + 34 * len(rows)))
    order = ["idle", "prefill", "decode", "transfer"]
    for kind in sorted(bars, key=lambda k: order.index(k) if k in order else len(order)):
        b = bars[kind]
        fig.add_trace(
            go.Bar(
                y=b["y"],
                x=b["x"],
                base=b["base"],
                orientation="h",
                name=kind,
                marker={"color": KIND_COLOURS.get(kind, "#7F7F7F"), "line": {"width": 0}},
                hovertext=b["text"],
                hoverinfo="text",
            )
        )
    fig.update_layout(barmode="overlay", bargap=0.3)
    fig.update_xaxes(title_text="simulated time (s)")
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(rows)), title_text="device")
    return fig
