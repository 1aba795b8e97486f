"""Reads of the catalog."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max, Prefetch, QuerySet

from simulations.catalog.models import Device, LLMModel, MemoryTier, RuntimeProfile
from simulations.choices import TraceVisibility


def device_list() -> QuerySet[Device]:
    """Every device with its memory tiers (ordered) and parent, by kind then slug."""
    return (
        Device.objects.select_related("parent")
        .prefetch_related(Prefetch("memory_tiers", queryset=MemoryTier.objects.order_by("order")))
        .order_by("kind", "slug")
    )


def runtime_list() -> QuerySet[RuntimeProfile]:
    """Every runtime profile, by device kind then slug."""
    return RuntimeProfile.objects.order_by("device_kind", "slug")


def model_list() -> QuerySet[LLMModel]:
    """Every LLM model, by slug."""
    return LLMModel.objects.order_by("slug")


def catalog_overview() -> dict[str, Any]:
    """Devices, runtime profiles and models for the catalog page (the catalog's public
    profiles: a profile a user saved from a calibration is listed to them on /calibrate/)."""
    return {
        "devices": list(device_list()),
        "runtimes": list(runtime_list().filter(visibility=TraceVisibility.PUBLIC)),
        "models": list(model_list()),
    }


def catalog_version() -> str:
    """A text that changes whenever a device, runtime profile or model is added, edited or
    deleted (row counts and latest ``updated_at``): what caches of figures computed from
    the catalog are keyed by."""
    parts = []
    for model in (Device, RuntimeProfile, LLMModel):
        agg = model.objects.aggregate(n=Count("pk"), t=Max("updated_at"))
        parts.append(f"{agg['n']}@{agg['t'].timestamp() if agg['t'] else 0}")
    return "/".join(parts)
