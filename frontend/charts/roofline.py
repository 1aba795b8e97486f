"""Roofline charts (GLITCHES Fig. 2) from :mod:`simulations.core.roofline` data.

Each (device, runtime) pair draws its datasheet roof (solid) and the roof its software stack
achieves (dotted); a scenario's operating points — the prefill of a representative prompt
and the average decode step — are markers on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from .base import colour, fmt, new_figure

_PHASE_SYMBOLS = {"prefill": "diamond", "decode": "circle"}


def roofline_figure(
    series: Sequence[Mapping[str, Any]], title: str = "Roofline", *, subtitle: str = ""
) -> go.Figure:
    """Roofs and operating points; ``series`` entries as :func:`roofline.roof` returns them,
    optionally with ``points`` (:func:`roofline.phase_points`)."""
    fig = new_figure(title + (f"<br><sup>{subtitle}</sup>" if subtitle else ""), height=480)
    for i, s in enumerate(series):
        label = f"{s['device']} ({s['runtime']})"
        curve = s["curve"]
        xs = curve["intensity_flop_per_byte"]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[v / 1e12 for v in curve["attainable_ops_per_s"]],
                mode="lines",
                name=f"{label} datasheet roof",
                legendgroup=label,
                line={"color": colour(i), "width": 2},
                hovertemplate=(
                    f"<b>{label}</b> datasheet<br>%{{x:.3g}} OP/byte → %{{y:.4g}} TOP/s"
                    "<extra></extra>"
                ),
            )
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[v / 1e12 for v in curve["achieved_roof_ops_per_s"]],
                mode="lines",
                name=f"{label} achieved by the stack",
                legendgroup=label,
                line={"color": colour(i), "width": 1.5, "dash": "dot"},
                hovertemplate=(
                    f"<b>{label}</b> achievable with the stack<br>%{{x:.3g}} OP/byte → "
                    "%{y:.4g} TOP/s<extra></extra>"
                ),
            )
        )
        points = s.get("points") or ()
        if points:
            fig.add_trace(
                go.Scatter(
                    x=[p["intensity_flop_per_byte"] for p in points],
                    y=[p["achieved_ops_per_s"] / 1e12 for p in points],
                    mode="markers+text",
                    text=[p["phase"] for p in points],
                    textposition="top center",
                    name=f"{label} operating points",
                    legendgroup=label,
                    marker={
                        "color": colour(i),
                        "size": 11,
                        "symbol": [_PHASE_SYMBOLS.get(p["phase"], "square") for p in points],
                        "line": {"color": "#fff", "width": 1},
                    },
                    hovertext=[
                        f"<b>{label}</b> {p['phase']}<br>"
                        f"intensity {fmt(p['intensity_flop_per_byte'])} OP/byte<br>"
                        f"achieved {fmt(p['achieved_ops_per_s'] / 1e12)} TOP/s "
                        f"of {fmt(p['attainable_ops_per_s'] / 1e12)} attainable<br>"
                        f"{p['bound']}-bound · compute {p['compute_utilisation']:.1%} · "
                        f"bandwidth {p['bandwidth_utilisation']:.1%}"
                        for p in points
                    ],
                    hoverinfo="text",
                )
            )
    fig.update_layout(legend={"orientation": "v", "x": 1.02, "y": 1, "yanchor": "top"})
    fig.update_xaxes(type="log", dtick=1, title_text="operational intensity (OP/byte)")
    fig.update_yaxes(type="log", dtick=1, title_text="performance (TOP/s)")
    return fig
