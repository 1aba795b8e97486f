"""What every chart shares: the look, the JSON a page embeds, and small helpers.

Figures are built server-side with plotly.py (``plotly.graph_objects``) and embedded in the
page as JSON (``<script type="application/json">``); ``frontend/static/frontend/app.js``
hands them to the Plotly bundle that whitenoise serves from the app's static files.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

#: Colours of the series (colour-blind friendly, Okabe–Ito order).
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
    "#8C564B",
    "#7F7F7F",
)

#: A small template (the named plotly templates add ~8 kB to every figure).
TEMPLATE = go.layout.Template(
    layout={
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        "colorway": list(PALETTE),
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hoverlabel": {"namelength": -1},
        "xaxis": {"gridcolor": "#e8ebef", "zerolinecolor": "#c9ced6", "automargin": True},
        "yaxis": {"gridcolor": "#e8ebef", "zerolinecolor": "#c9ced6", "automargin": True},
        "margin": {"l": 60, "r": 20, "t": 80, "b": 60},
    }
)


def new_figure(title: str, *, height: int = 420, **layout: Any) -> go.Figure:
    """An empty figure with the site's look and a title."""
    fig = go.Figure()
    fig.update_layout(template=TEMPLATE, title={"text": title, "x": 0}, height=height, **layout)
    return fig


@dataclass(frozen=True)
class Chart:
    """A figure ready for a page: its element id, title and Plotly JSON."""

    id: str
    title: str
    json: str
    traces: int

    @property
    def script_json(self) -> str:
        """The JSON, safe inside ``<script type="application/json">`` (as ``json_script``)."""
        return self.json.replace("&", "\\u0026").replace("<", "\\u003C").replace(">", "\\u003E")


def chart(chart_id: str, fig: go.Figure) -> Chart:
    """``fig`` as a :class:`Chart` with element id ``chart_id``."""
    title = fig.layout.title.text or chart_id
    return Chart(id=chart_id, title=title, json=fig.to_json(), traces=len(fig.data))


def figure_dict(fig: go.Figure) -> dict[str, Any]:
    """``fig`` as plain JSON data (for a JSON endpoint)."""
    return json.loads(fig.to_json())


def finite(value: Any) -> float | None:
    """``value`` as a float if it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def colour(i: int) -> str:
    """The ``i``-th series colour."""
    return PALETTE[i % len(PALETTE)]


def esc(text: Any) -> str:
    """Text for Plotly labels and hover text: Plotly renders a subset of HTML there, so
    user-provided names are escaped (it shows the entities as the characters)."""
    return html.escape(str(text), quote=False)


def short(text: str, limit: int = 28) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unique_labels(names: Iterable[str], limit: int = 28) -> list[str]:
    """Shortened names, kept distinct (a suffix numbers repeats)."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for name in names:
        label = short(name, limit)
        if label in seen:
            seen[label] += 1
            label = f"{short(name, limit - 3)} #{seen[label]}"
        else:
            seen[label] = 1
        out.append(esc(label))
    return out


def fmt(value: Any, digits: int = 4) -> str:
    """A number for hover text and tables (``n/a`` when missing)."""
    v = finite(value)
    if v is None:
        return "n/a"
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.{digits - 1}e}"
    if v == 0 or abs(v) >= 10 ** (digits - 1):
        # Whole numbers written in full (1,150 not 1.15e+03; 3,348,000 not 3.348e+06).
        return f"{v:,.0f}"
    # ``digits`` significant digits without exponent, trailing zeros dropped.
    decimals = digits - 1 - math.floor(math.log10(abs(float(f"{v:.{digits}g}"))))
    return f"{v:,.{max(decimals, 0)}f}".rstrip("0").rstrip(".") if decimals > 0 else f"{v:,.0f}"


def fmt_distinct(values: Sequence[Any], digits: int = 4, most: int = 10) -> list[str]:
    """``values`` formatted with :func:`fmt`, with as many more significant digits (up to
    ``most``) as it takes for different numbers to read differently (a table must not show
    235.3 twice for 235.3 and 235.306)."""
    distinct = {v for v in map(finite, values) if v is not None}
    for d in range(digits, most + 1):
        labels = [fmt(v, d) for v in values]
        if len({fmt(v, d) for v in distinct}) == len(distinct):
            return labels
    return [fmt(v, most) for v in values]
