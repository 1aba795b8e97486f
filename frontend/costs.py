"""The run page's total cost of ownership and capacity tables (docs/architecture.md "TCO",
"Capacity"): one row per system, from the result document as stored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def tco_rows(systems: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per system with a ``tco`` block: its total per year, cost per million tokens, the
    breakdown and, when a device has no price, the reason the totals are missing (empty
    when the run's scenario has no ``costs``)."""
    rows = []
    for s in systems:
        t = s.get("tco")
        if not isinstance(t, Mapping):
            continue
        rows.append(
            {
                "system": s.get("name", ""),
                "tco_usd_per_year": s.get("tco_usd_per_year"),
                "usd_per_million_tokens": s.get("usd_per_million_tokens"),
                "capex_share_usd_per_year": t.get("capex_share_usd_per_year"),
                "energy_usd_per_year": t.get("energy_usd_per_year"),
                "hosting_usd_per_year": t.get("hosting_usd_per_year"),
                "cloud_usd_per_year": t.get("cloud_usd_per_year"),
                "energy_kwh_per_year": t.get("energy_kwh_per_year"),
                "reason": t.get("unavailable_reason") or "",
                "cloud_prices": [
                    {"device": device, **dict(price)}
                    for device, price in sorted((t.get("cloud_prices") or {}).items())
                    if isinstance(price, Mapping)
                ],
            }
        )
    return rows


def cloud_price_notes(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each rented device's price and where it comes from (the catalog offer with its
    provider, date and source, or "given in costs"), once per device across the systems."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        for price in row.get("cloud_prices") or ():
            seen.setdefault(str(price["device"]), dict(price))
    return [seen[d] for d in sorted(seen)]


def capacity_rows(systems: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per system with a ``capacity`` block: the highest load within the SLO, what it
    serves at most, the offered load and whether that overloads it (empty when the run's
    scenario asked for no capacity search)."""
    rows = []
    for s in systems:
        c = s.get("capacity")
        if not isinstance(c, Mapping):
            continue
        rows.append(
            {
                "system": s.get("name", ""),
                "max_load_rps_at_slo": s.get("max_load_rps_at_slo"),
                "saturation_rps": c.get("saturation_rps"),
                "offered_rps": c.get("offered_rps"),
                "overloaded": s.get("overloaded"),
                "limit": c.get("limit") or "",
                "runs": len(c.get("runs") or ()),
                "requests_per_run": c.get("requests_per_run"),
                "reason": c.get("reason") or "",
            }
        )
    return rows


__all__ = ["capacity_rows", "cloud_price_notes", "tco_rows"]
