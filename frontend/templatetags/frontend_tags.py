"""Template helpers of the dashboard: Plotly figures, numbers, form errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from frontend.charts.base import Chart, finite, fmt

register = template.Library()


@register.simple_tag
def plotly(c: Chart | None) -> SafeString:
    """A figure's element and its JSON (rendered by app.js with the local Plotly bundle)."""
    if c is None:
        return mark_safe("")
    return format_html(
        '<figure class="chart"><div class="plot" id="{}" data-figure="{}-data" role="img" '
        'aria-label="{}"></div><script type="application/json" id="{}-data">{}</script>'
        "</figure>",
        c.id,
        c.id,
        c.title,
        c.id,
        mark_safe(c.script_json),
    )


@register.filter
def num(value: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits (``n/a`` when missing)."""
    return fmt(value, int(digits))


@register.filter
def as_json(value: Any) -> str:
    """``value`` as indented JSON (what the API accepts back), for ``<pre>`` panels."""
    return json.dumps(value, indent=2, sort_keys=False, default=str)


@register.filter
def scaled(value: Any, exponent: int) -> str:
    """``value / 10**exponent`` as a number (ops/s → TOP/s with 12, bytes/s → GB/s with 9)."""
    v = finite(value)
    return "n/a" if v is None else fmt(v / 10 ** int(exponent))


@register.filter
def pct(value: Any) -> str:
    """A fraction as a percentage."""
    v = finite(value)
    return "n/a" if v is None else f"{v:.1%}"


@register.filter
def ratio(value: Any) -> str:
    """A ratio as ``1.23×``."""
    v = finite(value)
    return "" if v is None else f"{v:.2f}×"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` (None when absent)."""
    if isinstance(mapping, Mapping):
        return mapping.get(key)
    if isinstance(mapping, list | tuple):
        try:
            return mapping[int(key)]
        except (ValueError, IndexError, TypeError):
            return None
    return None


@register.filter
def field_errors(errors: Mapping[str, Any] | None, key: str) -> list[str]:
    """The messages of ``key`` in an error mapping."""
    return list((errors or {}).get(key, ()))


@register.inclusion_tag("frontend/includes/errors.html")
def errors(messages: Any, field_id: str = "") -> dict[str, Any]:
    """The error list shown beside a field."""
    return {"messages": list(messages or ()), "field_id": field_id}


@register.filter
def better(ratio_value: Any, higher_is_better: Any) -> str:
    """CSS class of a ratio: ``good`` if it is an improvement, ``bad`` if it is worse."""
    v = finite(ratio_value)
    # A ratio printed as 1.00× is a tie within rounding (281.9 vs 282.2 tok/s): no colour.
    if v is None or higher_is_better is None or f"{v:.2f}" == "1.00":
        return ""
    return "good" if (v > 1.0) == bool(higher_is_better) else "bad"
