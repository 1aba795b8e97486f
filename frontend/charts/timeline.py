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


def timeline_figure(system: Mapping[str, Any], *, window_s: float | None = None) -> go.Figure:
    """The Gantt chart of ``system``'s timeline, optionally only its first ``window_s``."""
    units: Sequence[Mapping[str, Any]] = system.get("timeline") or ()
    name = esc(system.get("name", ""))
    bars: dict[str, dict[str, list[Any]]] = {}
    rows: list[str] = []
    drawn = dropped = 0
    for unit in units:
        label = _row_label(unit)
        rows.append(label)
        dropped += int(unit.get("intervals_dropped") or 0)
        lanes = [(label, unit.get("intervals") or ())]
        if unit.get("transfers"):
            lanes.append((f"{label} · PCIe", unit["transfers"]))
            rows.append(f"{label} · PCIe")
        for row, intervals in lanes:
            for iv in intervals:
                start, end = float(iv["start_s"]), float(iv["end_s"])
                if window_s is not None and start >= window_s:
                    break
                if drawn >= MAX_INTERVALS:
                    dropped += 1
                    continue
                kind = str(iv.get("kind", "busy"))
                b = bars.setdefault(kind, {"y": [], "base": [], "x": [], "text": []})
                b["y"].append(row)
                b["base"].append(start)
                b["x"].append(max(end - start, 0.0))
                request = iv.get("request")
                detail = [f"{kind} {fmt(start)}–{fmt(end)} s ({fmt((end - start) * 1e3)} ms)"]
                if request is not None:
                    detail.append(f"request {request}")
                if iv.get("batch"):
                    detail.append(f"batch {iv['batch']}")
                if iv.get("lane"):
                    detail.append(str(iv["lane"]))
                b["text"].append(f"<b>{row}</b><br>" + "<br>".join(detail))
                drawn += 1
    title = f"Per-device timeline — {name}"
    if dropped:
        title += f" (first {drawn} intervals; {dropped} more not drawn)"
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
