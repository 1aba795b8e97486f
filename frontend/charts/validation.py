"""How far the reproduced figures are from the published ones (one chart per paper)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from .base import finite, fmt, new_figure


def validation_figure(paper: str, checks: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Simulated ÷ published value of every check, with its tolerance as an error band;
    within tolerance in green, outside in red. Checks with an absolute tolerance show the
    band converted to a ratio of the published value."""
    fig = new_figure(
        f"{paper}: reproduced ÷ published value per check",
        height=max(320, 90 + 22 * len(checks)),
    )
    ys: list[str] = []
    xs: list[float] = []
    bands: list[float] = []
    colours: list[str] = []
    hover: list[str] = []
    for c in checks:
        paper_v, sim = finite(c.get("paper_value")), finite(c.get("simulated"))
        if paper_v is None or sim is None or paper_v == 0:
            continue
        r = sim / paper_v
        tol = finite(c.get("tolerance")) or 0.0
        band = tol / abs(paper_v) if c.get("abs_tolerance") else tol
        ys.append(str(c.get("id")))
        xs.append(r)
        bands.append(band)
        tol_text = (
            f"{fmt(tol)} {c.get('unit', '')}"
            if c.get("abs_tolerance")
            else f"{fmt(tol * 100, 3)} %"
        )
        colours.append("#009E73" if c.get("ok") else "#D55E00")
        hover.append(
            f"<b>{c.get('id')}</b><br>{c.get('quantity', '')}<br>published {fmt(paper_v)} "
            f"{c.get('unit', '')} · reproduced {fmt(sim)} {c.get('unit', '')}<br>"
            f"relative error {fmt((finite(c.get('rel_err')) or 0) * 100, 3)} % "
            f"(tolerance ±{tol_text})"
        )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            marker={"color": colours, "size": 9},
            hovertext=hover,
            hoverinfo="text",
            name="reproduced ÷ published",
            showlegend=False,
        )
    )
    # the tolerance band around 1.0 for each check, as a horizontal error bar centred on 1
    fig.add_trace(
        go.Scatter(
            x=[1.0] * len(ys),
            y=ys,
            mode="markers",
            marker={"color": "rgba(0,0,0,0)", "size": 1},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": bands,
                "arrayminus": [min(b, 0.99) for b in bands],
                "color": "#9aa3ad",
                "thickness": 6,
                "width": 0,
            },
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.add_vline(x=1.0, line={"color": "#333", "width": 1})
    fig.update_xaxes(title_text="reproduced ÷ published (1 = exact; grey = tolerance)", type="log")
    fig.update_yaxes(autorange="reversed", title_text="check")
    return fig
