"""The run page's capacity chart: SLO attainment and p90 TTFT / TPOT against the arrival
rate, from each system's bisection runs (``capacity.runs``, docs/architecture.md
"Capacity")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .base import TEMPLATE, colour, esc, finite, fmt


def capacity_figure(systems: Sequence[Mapping[str, Any]], slo: Mapping[str, Any]) -> go.Figure:
    """Three panels against requests/s — SLO attainment, p90 TTFT (ms), p90 TPOT (ms) — one
    line per system with a capacity search (its runs sorted by rate), a marker at each
    system's ``max_load_rps_at_slo`` and the SLO's p90 targets as dashed lines."""
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=["SLO attainment", "p90 TTFT (ms)", "p90 TPOT (ms)"],
        horizontal_spacing=0.08,
    )
    for i, s in enumerate(systems):
        runs = sorted(
            (r for r in ((s.get("capacity") or {}).get("runs") or ()) if isinstance(r, Mapping)),
            key=lambda r: float(r.get("rate_rps") or 0.0),
        )
        if not runs:
            continue
        name = esc(str(s.get("name", f"system {i}")))
        rates = [finite(r.get("rate_rps")) for r in runs]
        for col, key in ((1, "slo_attainment"), (2, "ttft_p90_ms"), (3, "tpot_p90_ms")):
            values = [finite(r.get(key)) for r in runs]
            fig.add_trace(
                go.Scatter(
                    x=rates,
                    y=values,
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line={"color": colour(i)},
                    hovertext=[
                        f"<b>{name}</b><br>{fmt(x)} requests/s: {fmt(v)}"
                        + (" (within the SLO)" if r.get("slo_met") else " (misses the SLO)")
                        for x, v, r in zip(rates, values, runs, strict=True)
                    ],
                    hoverinfo="text",
                ),
                row=1,
                col=col,
            )
        best = finite(s.get("max_load_rps_at_slo"))
        if best is not None:
            fig.add_vline(
                x=best, line={"color": colour(i), "dash": "dot", "width": 1}, row=1, col=1
            )
    for col, key in ((2, "ttft_p90_ms"), (3, "tpot_p90_ms")):
        target = finite(slo.get(key))
        if target is not None:
            fig.add_hline(
                y=target, line={"color": "#555", "dash": "dash", "width": 1}, row=1, col=col
            )
    fig.update_xaxes(title_text="requests/s")
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_layout(
        template=TEMPLATE,
        title={"text": "Load each system carries within the SLO"},
        height=400,
    )
    return fig


__all__ = ["capacity_figure"]
