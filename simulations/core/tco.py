"""Total cost of ownership of a simulated system (docs/architecture.md "TCO").

A scenario or plan may carry ``costs`` (:class:`~simulations.core.spec.CostSpec`); each
system's result then gains ``tco_usd_per_year``, ``usd_per_million_tokens`` and the
breakdown ``tco``. Definitions (a year is :data:`HOURS_PER_YEAR` hours):

- A placement whose device has a cloud price (``cloud_usd_per_device_hour``) is *rented*:
  it costs ``price × count × hours × utilisation`` a year (``cloud_usd_per_year``), which
  covers its purchase, hosting and electricity. Every other placement is *owned*.
- ``capex_share_usd_per_year`` = the owned devices' prices (the scenario's quote, else the
  catalog's) / ``amortisation_years``.
- ``energy_usd_per_year``: the owned devices draw the simulated average power
  (their result entries' ``energy_j`` / ``span_s``) for ``utilisation`` of the year, times
  ``pue``, at ``electricity_usd_per_kwh``; the rest of the year they are counted off.
- ``hosting_usd_per_year`` = owned devices × ``hosting_usd_per_device_year``, or owned
  capex × ``hosting_fraction_of_capex``.
- ``tco_usd_per_year`` is the sum of the four; ``tokens_per_year`` = the simulated
  throughput × seconds of the year × ``utilisation``; ``usd_per_million_tokens`` =
  ``tco_usd_per_year`` / ``tokens_per_year`` × 1e6.

An owned device without a price makes both totals ``null`` with
``tco.unavailable_reason`` naming it — a partial sum would look cheaper than the system is,
and no price is ever invented.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from simulations.core.json_fields import Errors, key_path, read_mapping, reject_unknown_keys
from simulations.core.json_fields import type_name as _type_name
from simulations.core.spec import CloudOffer, CostSpec, SystemSpec

#: Hours in the accounting year.
HOURS_PER_YEAR = 8760.0
#: Seconds in the accounting year.
SECONDS_PER_YEAR = HOURS_PER_YEAR * 3600.0

# --- limits of a ``costs`` object (documented in README.md) ---------------------------------

#: Electricity price, $/kWh (0 allowed: free power).
MAX_ELECTRICITY_USD_PER_KWH = 10.0
#: Power usage effectiveness (1 = no facility overhead).
MIN_PUE, MAX_PUE = 1.0, 5.0
#: Amortisation period, years.
MAX_AMORTISATION_YEARS = 50.0
#: Yearly hosting/maintenance per device, $.
MAX_HOSTING_USD_PER_DEVICE_YEAR = 1e7
#: Yearly hosting/maintenance as a fraction of capex.
MAX_HOSTING_FRACTION = 1.0
#: Cloud rental price per device-hour, $.
MAX_CLOUD_USD_PER_DEVICE_HOUR = 1e4
#: Devices priced in one ``cloud_usd_per_device_hour``.
MAX_CLOUD_PRICES = 64

COST_KEYS = (
    "electricity_usd_per_kwh",
    "pue",
    "amortisation_years",
    "utilisation",
    "hosting_usd_per_device_year",
    "hosting_fraction_of_capex",
    "cloud_usd_per_device_hour",
)


def _number(
    errs: Errors,
    path: str,
    value: Any,
    *,
    minimum: float,
    maximum: float,
    exclusive_min: bool = False,
) -> float | None:
    """A finite number in ``[minimum, maximum]`` (``(minimum, maximum]`` if exclusive)."""
    if value is None:
        errs.add(path, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        errs.add(path, f"must be a number, got {_type_name(value)}")
        return None
    v = float(value)
    if not math.isfinite(v):
        errs.add(path, "must be finite (NaN and Infinity are rejected)")
        return None
    if v < minimum or (exclusive_min and v == minimum):
        errs.add(path, f"must be {'above' if exclusive_min else 'at least'} {minimum:g}")
        return None
    if v > maximum:
        errs.add(path, f"must be at most {maximum:g}")
        return None
    return v


def parse_costs(
    errs: Errors,
    path: str,
    value: Any,
    device_slugs: Mapping[str, Any],
    offers: Mapping[str, CloudOffer] | None = None,
) -> CostSpec | None:
    """The ``costs`` object at ``path`` (``None`` when absent or invalid; problems go to
    ``errs``, each naming its field). ``device_slugs``: the catalog's devices, which the
    cloud prices must name; ``offers``: the catalog's cloud offers, which a price given as
    a string (``"aws-p4d-24xlarge"``, ``"hyperscaler-h100-2026-05@high"``) refers to."""
    if value is None:
        return None
    obj = read_mapping(errs, path, value)
    if obj is None:
        return None
    reject_unknown_keys(errs, path, obj, COST_KEYS)
    before = len(errs.by_path)
    elec = _number(
        errs,
        key_path(path, "electricity_usd_per_kwh"),
        obj.get("electricity_usd_per_kwh"),
        minimum=0.0,
        maximum=MAX_ELECTRICITY_USD_PER_KWH,
    )
    years = _number(
        errs,
        key_path(path, "amortisation_years"),
        obj.get("amortisation_years"),
        minimum=0.0,
        maximum=MAX_AMORTISATION_YEARS,
        exclusive_min=True,
    )
    pue = _number(
        errs, key_path(path, "pue"), obj.get("pue", 1.0), minimum=MIN_PUE, maximum=MAX_PUE
    )
    util = _number(
        errs,
        key_path(path, "utilisation"),
        obj.get("utilisation", 1.0),
        minimum=0.0,
        maximum=1.0,
        exclusive_min=True,
    )
    hosting = _number(
        errs,
        key_path(path, "hosting_usd_per_device_year"),
        obj.get("hosting_usd_per_device_year", 0.0),
        minimum=0.0,
        maximum=MAX_HOSTING_USD_PER_DEVICE_YEAR,
    )
    fraction = _number(
        errs,
        key_path(path, "hosting_fraction_of_capex"),
        obj.get("hosting_fraction_of_capex", 0.0),
        minimum=0.0,
        maximum=MAX_HOSTING_FRACTION,
    )
    if (
        obj.get("hosting_usd_per_device_year") is not None
        and obj.get("hosting_fraction_of_capex") is not None
    ):
        errs.add(
            key_path(path, "hosting_fraction_of_capex"),
            "give hosting either per device (hosting_usd_per_device_year) or as a fraction "
            "of capex, not both",
        )
    cloud: dict[str, float] = {}
    refs: dict[str, str] = {}
    sources: dict[str, dict[str, Any]] = {}
    cloud_path = key_path(path, "cloud_usd_per_device_hour")
    raw_cloud = obj.get("cloud_usd_per_device_hour")
    if raw_cloud is not None:
        prices = read_mapping(errs, cloud_path, raw_cloud)
        if prices is not None and len(prices) > MAX_CLOUD_PRICES:
            errs.add(cloud_path, f"must price at most {MAX_CLOUD_PRICES} devices")
        elif prices is not None:
            for slug, price in prices.items():
                p = key_path(cloud_path, str(slug))
                if slug not in device_slugs:
                    errs.add(p, f"unknown device {slug!r}")
                    continue
                if isinstance(price, str):
                    offered = _offer_price(errs, p, str(slug), price, offers or {})
                    if offered is not None:
                        offer = (offers or {})[price.partition("@")[0]]
                        cloud[str(slug)] = offered
                        refs[str(slug)] = price
                        sources[str(slug)] = {
                            "usd_per_device_hour": offered,
                            "offer": price,
                            "provider": offer.provider,
                            "as_of": offer.as_of,
                            "source": offer.source,
                        }
                    continue
                v = _number(
                    errs,
                    p,
                    price,
                    minimum=0.0,
                    maximum=MAX_CLOUD_USD_PER_DEVICE_HOUR,
                    exclusive_min=True,
                )
                if v is not None:
                    cloud[str(slug)] = v
                    sources[str(slug)] = {"usd_per_device_hour": v, "source": "given in costs"}
    if len(errs.by_path) != before:
        return None
    assert elec is not None and years is not None and pue is not None and util is not None
    assert hosting is not None and fraction is not None
    return CostSpec(
        electricity_usd_per_kwh=elec,
        amortisation_years=years,
        pue=pue,
        utilisation=util,
        hosting_usd_per_device_year=hosting,
        hosting_fraction_of_capex=fraction,
        cloud_usd_per_device_hour=cloud,
        cloud_offer_refs=refs,
        cloud_price_sources=sources,
    )


def _offer_price(
    errs: Errors, path: str, device: str, ref: str, offers: Mapping[str, CloudOffer]
) -> float | None:
    """The price the reference ``ref`` (``offer`` or ``offer@low``/``offer@high``) names
    for ``device``, or ``None`` with the problem in ``errs``."""
    slug, _, end = ref.partition("@")
    offer = offers.get(slug)
    for_device = sorted(o.slug for o in offers.values() if o.device == device)
    listed = f"; offers for {device}: {', '.join(for_device)}" if for_device else ""
    if offer is None:
        errs.add(path, f"unknown cloud offer {slug!r}{listed}")
        return None
    if offer.device != device:
        errs.add(path, f"cloud offer {slug!r} prices {offer.device}, not {device}{listed}")
        return None
    if end and end not in ("low", "high"):
        errs.add(path, f"{ref!r}: after '@' give low or high")
        return None
    if offer.is_range and not end:
        errs.add(
            path,
            f"cloud offer {slug!r} is a range (${offer.usd_per_device_hour_low:g}–"
            f"${offer.usd_per_device_hour_high:g} per device-hour): name {slug}@low or "
            f"{slug}@high",
        )
        return None
    return offer.price(end or None)


def tco_fields(system: SystemSpec, result: Mapping[str, Any], costs: CostSpec) -> dict[str, Any]:
    """``tco_usd_per_year``, ``usd_per_million_tokens`` and the breakdown ``tco`` of
    ``system``'s result entry ``result`` under ``costs`` (definitions in the module notes)."""
    cloud_prices = costs.cloud_usd_per_device_hour
    hours = HOURS_PER_YEAR * costs.utilisation
    owned_capex = 0.0
    owned_devices = 0
    cloud_usd = 0.0
    unpriced: list[str] = []
    for p in system.devices:
        rent = cloud_prices.get(p.device.slug)
        if rent is not None:
            cloud_usd += rent * p.count * hours
            continue
        owned_devices += p.count
        price = p.unit_price_usd
        if price is None:
            if p.device.slug not in unpriced:
                unpriced.append(p.device.slug)
        else:
            owned_capex += price * p.count
    span = float(result["span_s"])
    owned_energy_j = sum(
        float(d["energy_j"])
        for d in result.get("devices", ())
        if d.get("device") not in cloud_prices and d.get("energy_j") is not None
    )
    owned_power_w = owned_energy_j / span if span > 0 else 0.0
    energy_kwh = owned_power_w * costs.pue * hours / 1000.0
    energy_usd = energy_kwh * costs.electricity_usd_per_kwh
    hosting_usd = (
        owned_devices * costs.hosting_usd_per_device_year
        + owned_capex * costs.hosting_fraction_of_capex
    )
    tokens_per_year = float(result["throughput_tok_s"]) * SECONDS_PER_YEAR * costs.utilisation
    breakdown: dict[str, Any] = {
        "capex_share_usd_per_year": None,
        "energy_usd_per_year": energy_usd,
        "hosting_usd_per_year": None,
        "cloud_usd_per_year": cloud_usd,
        "owned_capex_usd": None,
        "owned_devices": owned_devices,
        "owned_avg_power_w": owned_power_w,
        "energy_kwh_per_year": energy_kwh,
        "tokens_per_year": tokens_per_year,
        "costs": costs.as_document(),
        "cloud_prices": {
            slug: dict(costs.cloud_price_sources.get(slug, {"usd_per_device_hour": price}))
            for slug, price in costs.cloud_usd_per_device_hour.items()
            if any(p.device.slug == slug for p in system.devices)
        },
        "devices_without_price": unpriced,
        "unavailable_reason": None,
    }
    if unpriced:
        breakdown["unavailable_reason"] = (
            f"no price for {', '.join(unpriced)}: give the placement a price_usd, or the "
            "device a cloud price in costs.cloud_usd_per_device_hour"
        )
        return {"tco_usd_per_year": None, "usd_per_million_tokens": None, "tco": breakdown}
    capex_share = owned_capex / costs.amortisation_years
    breakdown["capex_share_usd_per_year"] = capex_share
    breakdown["hosting_usd_per_year"] = hosting_usd
    breakdown["owned_capex_usd"] = owned_capex
    tco = capex_share + energy_usd + hosting_usd + cloud_usd
    per_m = tco / tokens_per_year * 1e6 if tokens_per_year > 0 else None
    if per_m is None:
        breakdown["unavailable_reason"] = "no tokens generated: no cost per token"
    return {"tco_usd_per_year": tco, "usd_per_million_tokens": per_m, "tco": breakdown}


__all__ = [
    "COST_KEYS",
    "HOURS_PER_YEAR",
    "MAX_AMORTISATION_YEARS",
    "MAX_CLOUD_USD_PER_DEVICE_HOUR",
    "MAX_ELECTRICITY_USD_PER_KWH",
    "MAX_HOSTING_FRACTION",
    "MAX_HOSTING_USD_PER_DEVICE_YEAR",
    "MAX_PUE",
    "SECONDS_PER_YEAR",
    "parse_costs",
    "tco_fields",
]
