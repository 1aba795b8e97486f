"""Helpers shared by the dashboard views."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest

from simulations import selectors
from simulations.choices import TraceParseStatus
from simulations.models import Device, LLMModel, RuntimeProfile, Trace


def page_number(request: HttpRequest) -> int:
    """``?page=`` as a positive integer (1 when missing or bad)."""
    try:
        return max(1, int(request.GET.get("page", "1")))
    except ValueError:
        return 1


def int_or_404(value: Any) -> int:
    """``value`` as an integer id, or 404."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Http404("not found") from None


def validation_messages(exc: ValidationError) -> dict[str, list[str]]:
    """A Django ValidationError as field → messages (``__all__`` for the rest)."""
    if hasattr(exc, "error_dict"):
        return {k: [str(m) for e in v for m in e.messages] for k, v in exc.error_dict.items()}
    return {"__all__": [str(m) for m in exc.messages]}


def catalog_choices(user: Any) -> dict[str, Any]:
    """What the builder's selects offer: devices (with their catalog price), runtimes,
    models, traces, saved workloads."""
    devices = list(
        Device.objects.order_by("kind", "slug").values(
            "slug", "name", "kind", "parent__slug", "price_usd"
        )
    )
    runtimes = list(
        RuntimeProfile.objects.order_by("device_kind", "slug").values(
            "slug", "name", "device_kind", "default_for_kind"
        )
    )
    models = list(LLMModel.objects.order_by("slug").values("slug", "name"))
    traces = list(
        Trace.objects.filter(parse_status=TraceParseStatus.DONE)
        .order_by("slug")
        .values("slug", "name", "request_count")
    )
    workloads = list(selectors.workloads_visible_to(user).order_by("name"))
    return {
        "devices": devices,
        "device_kinds": {d["slug"]: d["kind"] for d in devices},
        "runtimes": runtimes,
        "models": models,
        "traces": traces,
        "workloads": workloads,
    }


def saved_workload_documents(workloads: list[Any]) -> Mapping[str, Mapping[str, Any]]:
    """Saved workloads by id (text) → their scenario ``workload`` object."""
    return {str(w.pk): w.to_document() for w in workloads}
