"""Helpers shared by the dashboard views."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse

from simulations.catalog.models import Device, LLMModel
from simulations.choices import TraceParseStatus
from simulations.core.catalog import builtin_links
from simulations.measurements.selectors import runtimes_visible_to
from simulations.permissions import can_edit_catalog
from simulations.scenarios import selectors

View = Callable[..., HttpResponse]


def catalog_editor_required(view: View) -> View:
    """Let only catalog editors (:func:`simulations.permissions.can_edit_catalog`, the rule
    the API applies too) reach ``view``: anonymous users go to the sign-in page, other
    signed-in users get 403 before the view reads the request, so nothing is stored."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not can_edit_catalog(request.user):
            raise PermissionDenied("Only staff may change the shared catalog.")
        return view(request, *args, **kwargs)

    return wrapper


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
    models, traces, saved workloads, and the interconnects a parallel group may use
    (the core's shipped links: the database stores none)."""
    devices = list(
        Device.objects.order_by("kind", "slug").values(
            "slug", "name", "kind", "parent__slug", "price_usd", "tdp_w"
        )
    )
    # the catalog's profiles plus the user's own (saved from a calibration) and shared ones
    runtimes = list(
        runtimes_visible_to(user).values("slug", "name", "device_kind", "default_for_kind")
    )
    models = list(LLMModel.objects.order_by("slug").values("slug", "name"))
    traces = list(
        selectors.traces_visible_to(user)
        .filter(parse_status=TraceParseStatus.DONE)
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
        "links": [
            {"slug": link.slug, "name": link.name, "bw_gbps": link.bw_gbps}
            for link in builtin_links().values()
        ],
    }


def saved_workload_documents(workloads: list[Any]) -> Mapping[str, Mapping[str, Any]]:
    """Saved workloads by id (text) → their scenario ``workload`` object."""
    return {str(w.pk): w.to_document() for w in workloads}
