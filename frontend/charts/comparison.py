"""Charts that compare the systems of one result document (docs/architecture.md).

* :func:`efficiency_figure` — throughput, tokens/s per $ and tokens/s per W side by side,
  normalised to the baseline (GLITCHES Fig. 7);
* :func:`latency_cdf_figure` — TTFT and TPOT distributions as CDFs (``latency_cdf``);
* :func:`latency_percentile_figure` — p50/p90/p99 TTFT and TPOT by system;
* :func:`utilisation_figure` — busy fraction of every device group (prefill/decode split
  where the policy reports it);
* :func:`energy_figure` — energy by device group, stacked per system.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .base import TEMPLATE, colour, esc, finite, fmt, new_figure, unique_labels

System = Mapping[str, Any]

#: (key, panel title, absolute unit) of the efficiency panels.
EFFICIENCY_METRICS = (
    ("throughput_tok_s", "Throughput", "tok/s"),
    ("cost_efficiency_tok_s_per_usd", "Cost efficiency", "tok/s per $"),
    ("energy_efficiency_tok_s_per_w", "Energy efficiency", "tok/s per W"),
)


def ratio(value: Any, base: Any) -> float | None:
    """``value / base`` when both are finite and ``base`` is positive."""
    v, b = finite(value), finite(base)
    if v is None or b is None or b <= 0:
        return None
    return v / b


def efficiency_figure(systems: Sequence[System], baseline: int = 0) -> go.Figure:
    """Three panels of bars, each system's metric divided by the baseline's (GLITCHES Fig. 7).

    A metric the baseline lacks (e.g. capex unknown) leaves its panel empty with a note.
    """
    raw = [str(s.get("name", f"system {i}")) for i, s in enumerate(systems)]
    labels = unique_labels(raw, 22)
    names = [esc(n) for n in raw]
    base = systems[baseline]
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=[f"{title} ({unit})" for _, title, unit in EFFICIENCY_METRICS],
        horizontal_spacing=0.08,
    )
    for col, (key, title, unit) in enumerate(EFFICIENCY_METRICS, start=1):
        ratios = [ratio(s.get(key), base.get(key)) for s in systems]
        hover = [
            f"<b>{name}</b><br>{title}: {fmt(s.get(key))} {unit}<br>"
            + (f"{r:.3g}× baseline" if r is not None else "no ratio (missing value)")
            for name, s, r in zip(names, systems, ratios, strict=True)
        ]
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[r if r is not None else 0 for r in ratios],
                marker={"color": [colour(i) for i in range(len(systems))]},
                text=[f"{r:.2f}×" if r is not None else "n/a" for r in ratios],
                textposition="outside",
                hovertext=hover,
                hoverinfo="text",
                name=title,
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        fig.add_hline(y=1.0, line={"dash": "dot", "color": "#666", "width": 1}, row=1, col=col)
        fig.update_yaxes(title_text="× baseline" if col == 1 else None, row=1, col=col)
        if finite(base.get(key)) is None:
            fig.add_annotation(
                text="baseline has no value",
                showarrow=False,
                xref=f"x{col if col > 1 else ''} domain",
                yref=f"y{col if col > 1 else ''} domain",
                x=0.5,
                y=0.5,
            )
    fig.update_layout(
        template=TEMPLATE,
        title={"text": f"Throughput, cost and energy efficiency, normalised to {names[baseline]}"},
        height=440,
        bargap=0.25,
    )
    fig.update_xaxes(tickangle=-30)
    return fig


def latency_cdf_figure(
    systems: Sequence[System], slo: Mapping[str, Any] | None = None
) -> go.Figure:
    """TTFT (ms) and TPOT (ms) CDFs of every system, with the SLO's p90 targets marked."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=["Time to first token (TTFT)", "Time per output token (TPOT)"],
        horizontal_spacing=0.1,
    )
    slo = slo or {}
    for i, s in enumerate(systems):
        cdf = s.get("latency_cdf") or {}
        q = cdf.get("q") or []
        name = esc(s.get("name", f"system {i}"))
        for col, key, unit in ((1, "ttft_ms", "ms"), (2, "tpot_ms", "ms")):
            xs = cdf.get(key)
            if not xs:
                continue
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=q,
                    mode="lines",
                    line={"color": colour(i), "shape": "hv"},
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    hovertemplate=(
                        f"<b>{name}</b><br>%{{y:.0%}} of requests ≤ %{{x:.4g}} {unit}"
                        "<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
    for col, key in ((1, "ttft_p90_ms"), (2, "tpot_p90_ms")):
        target = finite(slo.get(key))
        if target is not None:
            # a trace, not a shape with an annotation: annotations on log axes take log10 x
            fig.add_trace(
                go.Scatter(
                    x=[target, target],
                    y=[0, 1],
                    mode="lines",
                    line={"dash": "dash", "color": "#b00", "width": 1},
                    name=f"p90 target {target:g} ms",
                    hovertemplate=f"p90 target {target:g} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="TTFT (ms)", type="log", row=1, col=1)
    fig.update_xaxes(title_text="TPOT (ms)", type="log", row=1, col=2)
    fig.update_yaxes(title_text="fraction of requests", range=[0, 1.02], tickformat=".0%")
    fig.update_layout(template=TEMPLATE, title={"text": "Latency distributions (CDF)"}, height=440)
    return fig


def latency_percentile_figure(systems: Sequence[System]) -> go.Figure:
    """Grouped bars of p50/p90/p99 TTFT (ms) and TPOT (ms) per system."""
    raw = [str(s.get("name", f"system {i}")) for i, s in enumerate(systems)]
    labels = unique_labels(raw, 22)
    names = [esc(n) for n in raw]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["TTFT (ms)", "TPOT (ms)"])
    shades = {"p50": 0.45, "p90": 0.75, "p99": 1.0}
    for col, key in ((1, "ttft_ms"), (2, "tpot_ms")):
        for q, alpha in shades.items():
            values = [finite((s.get(key) or {}).get(q)) for s in systems]
            fig.add_trace(
                go.Bar(
                    x=labels,
                    y=values,
                    name=q,
                    legendgroup=q,
                    showlegend=col == 1,
                    opacity=alpha,
                    marker={"color": "#0072B2"},
                    hovertext=[
                        f"<b>{n}</b><br>{q}: {fmt(v)} ms"
                        for n, v in zip(names, values, strict=True)
                    ],
                    hoverinfo="text",
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(title_text="ms", type="log", dtick=1)
    fig.update_xaxes(tickangle=-30)
    fig.update_layout(
        template=TEMPLATE, title={"text": "Latency percentiles"}, barmode="group", height=420
    )
    return fig


def _device_label(d: Mapping[str, Any]) -> str:
    role = f" ({d['role']})" if d.get("role") else ""
    return f"{d.get('count', 1)}× {d.get('device', '?')}{role}"


def utilisation_figure(systems: Sequence[System]) -> go.Figure:
    """Busy fraction of each device group, split into prefill and decode where reported."""
    fig = new_figure("Device utilisation (busy fraction of the run)", height=440)
    xs: list[list[str]] = [[], []]
    prefill: list[float | None] = []
    decode: list[float | None] = []
    other: list[float | None] = []
    hover: list[str] = []
    # Shortened, still distinct, names: a long one (from a plan) would squash the chart; the
    # full name is in the hover.
    names = unique_labels([str(s.get("name", "")) for s in systems], 22)
    for s, name in zip(systems, names, strict=True):
        for d in s.get("devices") or ():
            xs[0].append(name)
            xs[1].append(_device_label(d))
            busy = finite(d.get("busy_fraction")) or 0.0
            p = finite(d.get("prefill_fraction"))
            dec = finite(d.get("decode_fraction"))
            if p is None and dec is None:
                prefill.append(None)
                decode.append(None)
                other.append(busy)
            else:
                p, dec = p or 0.0, dec or 0.0
                prefill.append(p)
                decode.append(dec)
                other.append(max(0.0, busy - p - dec))
            hover.append(
                f"<b>{esc(s.get('name', ''))}</b><br>{_device_label(d)}<br>busy {busy:.1%}"
                + (f" (prefill {p:.1%}, decode {dec:.1%})" if p is not None else "")
            )
    for name, values, col in (
        ("prefill", prefill, "#E69F00"),
        ("decode", decode, "#0072B2"),
        ("busy (other / not split)", other, "#7F7F7F"),
    ):
        if any(v for v in values):
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=values,
                    name=name,
                    marker={"color": col},
                    hovertext=hover,
                    hoverinfo="text",
                )
            )
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text="busy fraction", tickformat=".0%", range=[0, 1.05])
    return fig


def energy_figure(systems: Sequence[System]) -> go.Figure:
    """Energy of the run by device group (J), stacked per system; J/token in the hover."""
    raw = [str(s.get("name", f"system {i}")) for i, s in enumerate(systems)]
    labels = unique_labels(raw, 22)
    names = [esc(n) for n in raw]
    fig = new_figure("Energy breakdown by device group", height=440)
    groups: dict[str, list[float | None]] = {}
    for i, s in enumerate(systems):
        for d in s.get("devices") or ():
            label = _device_label(d)
            groups.setdefault(label, [None] * len(systems))
            groups[label][i] = (groups[label][i] or 0.0) + (finite(d.get("energy_j")) or 0.0)
    for k, (label, values) in enumerate(groups.items()):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=values,
                name=label,
                marker={"color": colour(k)},
                hovertext=[
                    f"<b>{n}</b><br>{label}: {fmt(v)} J<br>"
                    f"system: {fmt(s.get('energy_j_per_token'))} J/token, "
                    f"{fmt(s.get('avg_power_w'))} W average"
                    for n, v, s in zip(names, values, systems, strict=True)
                ],
                hoverinfo="text",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text="energy (J)")
    fig.update_xaxes(tickangle=-30)
    return fig
