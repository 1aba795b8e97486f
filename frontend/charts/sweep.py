"""Charts over many configurations: a sweep's or a plan's Pareto front (capex vs
throughput, SLO-meeting points highlighted) and latency against offered load (Neo Fig. 6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .base import TEMPLATE, colour, esc, finite, fmt, new_figure


def pareto_front(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Points not dominated in (capex ↓, throughput ↑), by capex; points without both skip."""
    usable = [
        p
        for p in points
        if finite(p.get("capex_usd")) is not None and finite(p.get("throughput_tok_s")) is not None
    ]
    usable.sort(key=lambda p: (p["capex_usd"], -p["throughput_tok_s"]))
    front: list[Mapping[str, Any]] = []
    best = float("-inf")
    for p in usable:
        if p["throughput_tok_s"] > best:
            front.append(p)
            best = p["throughput_tok_s"]
    return front


def pareto_figure(
    points: Sequence[Mapping[str, Any]],
    title: str,
    *,
    front_of_slo_meeting: bool = False,
    fronts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> go.Figure:
    """Capex ($) against throughput (tok/s) of every point ``{label, capex_usd,
    throughput_tok_s, slo_met}``, SLO-meeting ones highlighted, the front drawn as a line
    (over the SLO-meeting points only with ``front_of_slo_meeting``, as a plan's is).
    ``fronts`` (name → points) draws those fronts instead, one line each (a sweep's, one per
    arrival rate)."""
    fig = new_figure(title, height=460)
    groups = (
        ("meets the SLO", True, "#009E73", "circle"),
        ("misses the SLO", False, "#D55E00", "x"),
        ("no SLO given", None, "#7F7F7F", "circle-open"),
    )
    for name, met, col, symbol in groups:
        sel = [
            p for p in points if p.get("slo_met") is met and finite(p.get("capex_usd")) is not None
        ]
        if not sel:
            continue
        fig.add_trace(
            go.Scatter(
                x=[p["capex_usd"] for p in sel],
                y=[p.get("throughput_tok_s") for p in sel],
                mode="markers",
                name=name,
                marker={"color": col, "symbol": symbol, "size": 9 if met else 8},
                hovertext=[
                    f"<b>{esc(p.get('label', ''))}</b><br>capex ${fmt(p['capex_usd'])}<br>"
                    f"{fmt(p.get('throughput_tok_s'))} tok/s"
                    + (
                        f"<br>p90 TTFT {fmt(p['ttft_p90_ms'])} ms"
                        if p.get("ttft_p90_ms") is not None
                        else ""
                    )
                    + (
                        f"<br>p90 TPOT {fmt(p['tpot_p90_ms'])} ms"
                        if p.get("tpot_p90_ms") is not None
                        else ""
                    )
                    for p in sel
                ],
                hoverinfo="text",
            )
        )
    if fronts is None:
        fronts = {
            "Pareto front": pareto_front(
                [p for p in points if p.get("slo_met") is True] if front_of_slo_meeting else points
            )
        }
    for i, (name, front) in enumerate(fronts.items()):
        if not front:
            continue
        fig.add_trace(
            go.Scatter(
                x=[p["capex_usd"] for p in front],
                y=[p["throughput_tok_s"] for p in front],
                mode="lines",
                line={
                    "color": "#000" if len(fronts) == 1 else colour(i),
                    "dash": "dot",
                    "shape": "hv",
                },
                name=name,
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(title_text="capex (USD)")
    fig.update_yaxes(title_text="throughput (generated tok/s)")
    return fig


def latency_vs_load_figure(
    series: Mapping[str, Sequence[Mapping[str, Any]]],
    title: str,
    slo: Mapping[str, Any] | None = None,
) -> go.Figure:
    """TTFT and TPOT (p50 dashed, p90 solid, ms) against the offered request rate
    (requests/s), one colour per system (Neo Fig. 6); ``series`` maps a system name to
    points ``{rate_per_s, ttft_ms: {...}, tpot_ms: {...}, throughput_tok_s}``."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["TTFT against load", "TPOT against load"])
    slo = slo or {}
    for i, (name, pts) in enumerate(series.items()):
        pts = sorted(pts, key=lambda p: p["rate_per_s"])
        xs = [p["rate_per_s"] for p in pts]
        for col, key in ((1, "ttft_ms"), (2, "tpot_ms")):
            for q, dash in (("p90", "solid"), ("p50", "dash")):
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[(p.get(key) or {}).get(q) for p in pts],
                        mode="lines+markers",
                        name=f"{esc(name)} {q}",
                        legendgroup=name,
                        showlegend=col == 1,
                        line={"color": colour(i), "dash": dash},
                        hovertext=[
                            f"<b>{esc(name)}</b> at {fmt(p['rate_per_s'])} requests/s<br>"
                            f"{q} {key.split('_')[0].upper()} "
                            f"{fmt((p.get(key) or {}).get(q))} ms<br>"
                            f"throughput {fmt(p.get('throughput_tok_s'))} tok/s"
                            for p in pts
                        ],
                        hoverinfo="text",
                    ),
                    row=1,
                    col=col,
                )
    rates = [p["rate_per_s"] for pts in series.values() for p in pts]
    for col, key in ((1, "ttft_p90_ms"), (2, "tpot_p90_ms")):
        target = finite(slo.get(key))
        if target is not None and rates:
            # a trace, not a shape with an annotation: annotations on log axes take log10 y
            fig.add_trace(
                go.Scatter(
                    x=[min(rates), max(rates)],
                    y=[target, target],
                    mode="lines",
                    line={"dash": "dash", "color": "#b00", "width": 1},
                    name=f"p90 target {target:g} ms",
                    hovertemplate=f"p90 target {target:g} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="offered load (requests/s)")
    fig.update_yaxes(title_text="TTFT (ms)", type="log", dtick=1, row=1, col=1)
    fig.update_yaxes(title_text="TPOT (ms)", type="log", dtick=1, row=1, col=2)
    fig.update_layout(template=TEMPLATE, title={"text": title}, height=440)
    return fig
