"""Workload charts: prompt/output length histograms and arrival rate over time.

Histograms are binned on the server (numpy) so a 200,000-row trace sends a few dozen bars,
not every row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .base import TEMPLATE

#: Bars per length histogram.
LENGTH_BINS = 40
#: Bins of the arrival-rate chart.
RATE_BINS = 60


def _hist(values: np.ndarray, bins: int) -> tuple[list[float], list[float], list[int]]:
    if values.size == 0:
        return [], [], []
    lo, hi = float(values.min()), float(values.max())
    if hi <= lo:
        hi = lo + 1.0
    counts, edges = np.histogram(values, bins=bins, range=(lo, hi))
    centres = ((edges[:-1] + edges[1:]) / 2).tolist()
    widths = np.diff(edges).tolist()
    return centres, widths, counts.tolist()


def lengths_figure(
    input_tokens: Sequence[int] | np.ndarray, output_tokens: Sequence[int] | np.ndarray, title: str
) -> go.Figure:
    """Histograms of prompt and output lengths (tokens)."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=["Prompt length", "Output length"], horizontal_spacing=0.1
    )
    for col, values, colour, what in (
        (1, np.asarray(input_tokens, dtype=np.float64), "#0072B2", "prompt"),
        (2, np.asarray(output_tokens, dtype=np.float64), "#E69F00", "output"),
    ):
        x, w, n = _hist(values, LENGTH_BINS)
        fig.add_trace(
            go.Bar(
                x=x,
                y=n,
                width=w,
                marker={"color": colour},
                name=f"{what} tokens",
                hovertemplate=(
                    f"{what} length ≈ %{{x:.0f}} tokens: %{{y}} requests<extra></extra>"
                ),
            ),
            row=1,
            col=col,
        )
        if values.size:
            fig.add_vline(
                x=float(np.mean(values)),
                line={"dash": "dash", "color": "#333", "width": 1},
                annotation_text=f"mean {np.mean(values):.0f}",
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="prompt tokens", row=1, col=1)
    fig.update_xaxes(title_text="output tokens", row=1, col=2)
    fig.update_yaxes(title_text="requests")
    fig.update_layout(template=TEMPLATE, title={"text": title}, height=380, showlegend=False)
    return fig


def arrival_rate_figure(arrival_s: Sequence[float] | np.ndarray, title: str) -> go.Figure:
    """Requests per second over time (arrivals binned into equal windows)."""
    t = np.asarray(arrival_s, dtype=np.float64)
    fig = make_subplots(rows=1, cols=1)
    if t.size:
        span = float(t.max() - t.min())
        bins = RATE_BINS if span > 0 else 1
        counts, edges = np.histogram(
            t, bins=bins, range=(float(t.min()), float(t.min()) + (span or 1.0))
        )
        width = float(edges[1] - edges[0])
        rate = counts / width
        fig.add_trace(
            go.Scatter(
                x=edges[:-1].tolist(),
                y=rate.tolist(),
                mode="lines",
                line={"shape": "hv", "color": "#0072B2"},
                fill="tozeroy",
                name="arrival rate",
                hovertemplate=(f"%{{x:.1f}}–+{width:.1f} s: %{{y:.3g}} requests/s<extra></extra>"),
            )
        )
        mean = t.size / span if span > 0 else None
        if mean:
            fig.add_hline(
                y=mean,
                line={"dash": "dash", "color": "#333", "width": 1},
                annotation_text=f"mean {mean:.3g} requests/s",
            )
    fig.update_xaxes(title_text="time since the first arrival (s)")
    fig.update_yaxes(title_text="arrival rate (requests/s)", rangemode="tozero")
    fig.update_layout(template=TEMPLATE, title={"text": title}, height=340, showlegend=False)
    return fig
