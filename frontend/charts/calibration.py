"""A calibration's fit: measured against predicted time per operator (or pass) and token
count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from .base import colour, esc, finite, fmt, new_figure


def _series(row: Mapping[str, Any]) -> str:
    """What a row's point belongs to: its kernel (and phase, for attention), or the
    end-to-end phase (decode series by context)."""
    if row.get("op"):
        op = str(row["op"])
        # the attention kernels differ between prefill and decode; the linear ones do not
        return f"{op} ({row['phase']})" if row.get("phase") in ("prefill", "decode") else op
    if row.get("phase") == "decode":
        return f"decode, context {row.get('kv_tokens')}"
    return "prefill"


def fit_figure(report: Mapping[str, Any]) -> go.Figure:
    """Every row's measured time (markers) and the fit's prediction (crosses joined by a
    line), one colour per operator, against the tokens in the batch (log–log)."""
    rows: Sequence[Mapping[str, Any]] = report.get("rows") or ()
    fig = new_figure(
        f"{esc(report.get('stack', ''))} fitted to {esc(report.get('measurement_set', ''))}: "
        "measured vs predicted",
        height=520,
    )
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(_series(r), []).append(r)
    for i, (name, members) in enumerate(groups.items()):
        members = sorted(members, key=lambda r: (r.get("tokens") or 0, r.get("kv_tokens") or 0))
        xs = [r.get("tokens") or r.get("batch") or 1 for r in members]
        hover = [
            f"<b>{esc(r.get('label', ''))}</b> (line {r.get('line')})<br>"
            f"measured {fmt(r.get('measured_ms'))} ms · predicted {fmt(r.get('predicted_ms'))} ms"
            + (
                f"<br>error {fmt((finite(r.get('rel_err')) or 0) * 100, 3)} %"
                if r.get("counted")
                else f"<br>error {fmt((finite(r.get('abs_err_ms')) or 0) * 1e3, 3)} µs "
                "(quantised row)"
            )
            for r in members
        ]
        c = colour(i)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[r.get("measured_ms") for r in members],
                mode="markers",
                marker={"color": c, "size": 9, "symbol": "circle"},
                name=f"{esc(name)} measured",
                legendgroup=name,
                hovertext=hover,
                hoverinfo="text",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[r.get("predicted_ms") for r in members],
                mode="lines+markers",
                line={"color": c, "width": 1, "dash": "dot"},
                marker={"color": c, "size": 7, "symbol": "x"},
                name=f"{esc(name)} predicted",
                legendgroup=name,
                hovertext=hover,
                hoverinfo="text",
            )
        )
    per_layer = report.get("format") == "operators"
    fig.update_xaxes(type="log", title_text="tokens in the batch (decode: sequences)")
    fig.update_yaxes(
        type="log", title_text="time per layer, ms" if per_layer else "latency of the pass, ms"
    )
    return fig
