"""Charts of one paper's mechanism inside a result.

* :func:`h2m2_footprint_figure` — H2M2's HBM footprint by sublayer (qkv-linear, attention,
  fc) across sequence lengths, with the total and the capacity (H2M2 Fig. 14);
* :func:`heterollm_placement_figure` — HeteroLLM's per-kernel backend placement: the GPU and
  NPU time of every kernel of a prefill and a decode pass, coloured by backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .base import TEMPLATE, fmt, new_figure

SUBLAYER_COLOURS = {"qkv": "#0072B2", "attn": "#E69F00", "fc": "#009E73", "act": "#CC79A7"}
SUBLAYER_NAMES = {
    "qkv": "qkv-linear",
    "attn": "attention (KV cache)",
    "fc": "fc (projection + FFN)",
    "act": "activation buffers",
}
BACKEND_COLOURS = {"gpu": "#0072B2", "npu": "#E69F00", "gpu+npu": "#009E73"}


def h2m2_footprint_figure(rows: Sequence[Mapping[str, Any]], title: str) -> go.Figure:
    """Stacked HBM footprint (GB) by sublayer per sequence length; rows from
    ``H2M2Policy.figure_data("hbm-footprint", ...)`` (policies/h2m2/footprint.py)."""
    fig = new_figure(title, height=460)
    xs = [f"S{int(r['seq_len'])}" for r in rows]
    for key in ("qkv", "attn", "fc", "act"):
        fig.add_trace(
            go.Bar(
                x=xs,
                y=[r["hbm_gb"][key] for r in rows],
                name=SUBLAYER_NAMES[key],
                marker={"color": SUBLAYER_COLOURS[key]},
                hovertext=[
                    f"<b>{x}</b> · batch {r['batch']}<br>{SUBLAYER_NAMES[key]}: "
                    f"{fmt(r['hbm_gb'][key])} GB in HBM<br>mapping (nQ, nA, nF) = "
                    f"{tuple(r['mapping'])} of {r['units']} units"
                    for x, r in zip(xs, rows, strict=True)
                ],
                hoverinfo="text",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[r["hbm_total_gb"] for r in rows],
            mode="lines+markers",
            name="total HBM footprint",
            line={"color": "#000"},
            hovertemplate="%{x}: %{y:.4g} GB in HBM<extra></extra>",
        )
    )
    if rows:
        fig.add_hline(
            y=rows[0]["hbm_capacity_gb"],
            line={"dash": "dash", "color": "#b00", "width": 1},
            annotation_text=f"HBM capacity {rows[0]['hbm_capacity_gb']:g} GB",
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="sequence length (tokens in each request's KV cache)")
    fig.update_yaxes(title_text="HBM footprint (GB)")
    return fig


def heterollm_placement_figure(
    placement: Mapping[str, Sequence[Mapping[str, Any]]], title: str
) -> go.Figure:
    """Per-kernel GPU and NPU busy time (ms, all repeats) of a prefill and a decode pass."""
    phases = [p for p in ("prefill", "decode") if placement.get(p)]
    fig = make_subplots(
        rows=1,
        cols=max(1, len(phases)),
        subplot_titles=[f"{p} pass" for p in phases] or ["no placement"],
        horizontal_spacing=0.18,
    )
    shown: set[str] = set()
    for col, phase in enumerate(phases, start=1):
        rows = placement[phase]
        labels = [f"{r['kernel']}" for r in rows]
        for proc, key in (("GPU", "gpu_busy_ms"), ("NPU", "npu_busy_ms")):
            values = [float(r.get(key) or 0.0) * int(r.get("repeat") or 1) for r in rows]
            name = f"{proc} time"
            fig.add_trace(
                go.Bar(
                    y=labels,
                    x=values,
                    orientation="h",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    marker={"color": BACKEND_COLOURS["gpu" if proc == "GPU" else "npu"]},
                    hovertext=[
                        f"<b>{r['kernel']}</b> ({r.get('kind', '')}) × {r.get('repeat', 1)}<br>"
                        f"backend {r.get('backend', '?')} · strategy {r.get('strategy', '?')}<br>"
                        f"{proc} busy {fmt(v)} ms over all repeats; pass share "
                        f"{fmt(float(r.get('ms') or 0.0) * int(r.get('repeat') or 1))} ms"
                        + (
                            f"<br>NPU rows {r['npu_rows']}, GPU rows {r.get('gpu_rows')}"
                            if r.get("npu_rows") is not None
                            else ""
                        )
                        for r, v in zip(rows, values, strict=True)
                    ],
                    hoverinfo="text",
                ),
                row=1,
                col=col,
            )
            shown.add(name)
        fig.update_xaxes(title_text="busy time (ms, all layers)", row=1, col=col)
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title},
        barmode="group",
        height=max(320, 120 + 28 * max((len(placement.get(p) or ()) for p in phases), default=1)),
    )
    return fig
