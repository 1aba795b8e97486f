"""Workloads (editor for lengths and arrivals, preview of the drawn requests) and traces
(upload, histogram of lengths and arrival rate over time)."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from frontend.charts import chart
from frontend.charts.workload import arrival_rate_figure, lengths_figure
from frontend.forms import TraceUploadForm, WorkloadForm, workload_error_field
from frontend.views.common import int_or_404, validation_messages
from simulations.choices import TraceParseStatus
from simulations.core.engine.requests import generate_requests
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.permissions import can_delete_trace
from simulations.scenarios import selectors, services
from simulations.scenarios.models import Trace, Workload


def _trace_choices(user: Any) -> list[tuple[str, str]]:
    return [
        (t.slug, f"{t.name} ({t.request_count} requests)")
        for t in selectors.traces_visible_to(user)
        .filter(parse_status=TraceParseStatus.DONE)
        .only("slug", "name", "request_count")
    ]


def _traces(user: Any) -> list[Trace]:
    """The traces ``user`` may see, for the list (without their parsed data)."""
    return list(selectors.traces_visible_to(user).defer("data").select_related("owner"))


@login_required
def workload_list(request: HttpRequest) -> HttpResponse:
    """The user's and shared workloads, the traces, and the trace upload form."""
    return render(
        request,
        "frontend/workloads/list.html",
        {
            "workloads": list(selectors.workloads_visible_to(request.user).order_by("name")),
            "traces": _traces(request.user),
            "upload_form": TraceUploadForm(),
        },
    )


def _initial_from(workload: Workload) -> dict[str, Any]:
    initial: dict[str, Any] = {
        "name": f"{workload.name} (copy)",
        "requests": workload.requests,
        "arrival": workload.arrival_kind,
        "rate_per_s": workload.rate_per_s,
        "time_scale": workload.time_scale,
        "seed": workload.seed,
        "trace": workload.trace.slug if workload.trace else "",
    }
    for prefix, value in (("in", workload.input_tokens), ("out", workload.output_tokens)):
        if isinstance(value, dict):
            initial[f"{prefix}_dist"] = value.get("dist", "fixed")
            for key in ("value", "low", "high", "median", "sigma"):
                if value.get(key) is not None:
                    initial[f"{prefix}_{key}"] = value[key]
        else:
            initial[f"{prefix}_dist"] = "fixed"
            initial[f"{prefix}_value"] = value
    return initial


@login_required
def workload_new(request: HttpRequest) -> HttpResponse:
    """The workload editor (``?from=<id>`` starts from a copy of a readable workload)."""
    traces = _trace_choices(request.user)
    if request.method == "POST":
        form = WorkloadForm(request.POST, traces=traces)
        if form.is_valid():
            fields = form.model_fields()
            slug = form.cleaned_data.get("trace") or ""
            trace = (
                selectors.traces_visible_to(request.user).filter(slug=slug).first()
                if slug
                else None
            )
            try:
                workload = services.workload_create(
                    owner=request.user,
                    name=form.cleaned_data["name"],
                    shared=form.cleaned_data["shared"],
                    trace=trace,
                    **fields,
                )
            except ScenarioValidationError as exc:
                for path, msgs in exc.errors.items():
                    target = workload_error_field(path)
                    for m in msgs:
                        form.add_error(target, m if target else f"{path}: {m}")
            except ValidationError as exc:
                for key, msgs in validation_messages(exc).items():
                    target = {
                        "input_tokens": "in_value",
                        "output_tokens": "out_value",
                        "arrival_kind": "arrival",
                        "__all__": None,
                    }.get(key, key if key in form.fields else None)
                    for m in msgs:
                        form.add_error(target, m if target or key == "__all__" else f"{key}: {m}")
            else:
                messages.success(request, f"Saved workload “{workload.name}”.")
                return redirect("frontend:workload_detail", pk=workload.pk)
        status = 400
    else:
        initial: dict[str, Any] = {
            "requests": 200,
            "in_dist": "fixed",
            "in_value": 1536,
            "out_dist": "fixed",
            "out_value": 512,
            "arrival": "closed",
            "seed": 0,
            "time_scale": 1.0,
        }
        if request.GET.get("from"):
            try:
                src = selectors.workloads_visible_to(request.user).get(
                    pk=int_or_404(request.GET["from"])
                )
            except Workload.DoesNotExist:
                raise Http404("no such workload") from None
            initial = _initial_from(src)
        form = WorkloadForm(initial=initial, traces=traces)
        status = 200
    return render(request, "frontend/workloads/edit.html", {"form": form}, status=status)


@login_required
def workload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A workload's document and a preview of the requests it draws (the same seed the
    simulator uses): length histograms and arrival rate over time."""
    try:
        workload = selectors.workloads_visible_to(request.user).get(pk=int_or_404(pk))
    except Workload.DoesNotExist:
        raise Http404("no such workload") from None
    charts = []
    error = ""
    try:
        spec = services.workload_validate(workload)
        reqs = generate_requests(spec)
    except (ScenarioValidationError, SpecError) as exc:
        error = str(exc)
    else:
        charts = [
            chart(
                "lengths",
                lengths_figure(
                    reqs.input_tokens,
                    reqs.output_tokens,
                    f"Token lengths of the {len(reqs)} requests",
                ),
            ),
            chart("arrivals", arrival_rate_figure(reqs.arrival_s, "Arrival rate over time")),
        ]
    return render(
        request,
        "frontend/workloads/detail.html",
        {
            "workload": workload,
            "document": workload.to_document(),
            "charts": charts,
            "error": error,
        },
    )


@login_required
def trace_upload(request: HttpRequest) -> HttpResponse:
    """Store an uploaded Azure-format trace."""
    if request.method != "POST":
        return redirect("frontend:workload_list")
    form = TraceUploadForm(request.POST, request.FILES)
    if form.is_valid():
        d = form.cleaned_data
        try:
            trace = services.trace_import(
                slug=d["slug"],
                name=d["name"] or d["slug"],
                text=d["file"].read(),
                source=d["source"],
                owner=request.user,
                visibility=d["visibility"],
            )
        except ValidationError as exc:
            for key, msgs in validation_messages(exc).items():
                target = "file" if key == "text" else (key if key in form.fields else None)
                for m in msgs:
                    form.add_error(target, m)
        else:
            if trace.parse_status == TraceParseStatus.DONE:
                messages.success(
                    request, f"Stored trace “{trace.slug}” ({trace.request_count} requests)."
                )
            else:
                messages.info(
                    request, f"Stored trace “{trace.slug}”; a worker is parsing it (large file)."
                )
            return redirect("frontend:trace_detail", slug=trace.slug)
    return render(
        request,
        "frontend/workloads/list.html",
        {
            "workloads": list(selectors.workloads_visible_to(request.user).order_by("name")),
            "traces": _traces(request.user),
            "upload_form": form,
        },
        status=400,
    )


def _visible_trace_or_404(user: Any, slug: str) -> Trace:
    try:
        return selectors.trace_get_for(user, slug)
    except Trace.DoesNotExist:
        raise Http404("no such trace") from None


@login_required
def trace_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """A trace: histogram of its lengths and its arrival rate over time."""
    trace = _visible_trace_or_404(request.user, slug)
    return _render_trace(request, trace)


def _render_trace(
    request: HttpRequest, trace: Trace, *, in_use: str = "", status: int = 200
) -> HttpResponse:
    context = {
        "trace": trace,
        "may_delete": can_delete_trace(request.user, trace),
        "in_use": in_use,
    }
    if trace.parse_status != TraceParseStatus.DONE:
        # queued, being parsed by a worker, or failed (the page says which, and why)
        return render(
            request,
            "frontend/workloads/trace_detail.html",
            {**context, "charts": [], "stats": {}},
            status=status,
        )
    data = trace.data or {}
    inputs = np.asarray(data.get("input_tokens") or [], dtype=np.float64)
    outputs = np.asarray(data.get("output_tokens") or [], dtype=np.float64)
    arrivals = np.asarray(data.get("arrival_s") or [], dtype=np.float64)
    stats = {
        "prompt_mean": float(inputs.mean()) if inputs.size else None,
        "prompt_p50": float(np.median(inputs)) if inputs.size else None,
        "output_mean": float(outputs.mean()) if outputs.size else None,
        "output_p50": float(np.median(outputs)) if outputs.size else None,
        "rate": (len(arrivals) / trace.duration_s) if trace.duration_s else None,
    }
    charts = [
        chart(
            "lengths",
            lengths_figure(inputs, outputs, f"Token lengths of the {trace.request_count} requests"),
        ),
        chart("arrivals", arrival_rate_figure(arrivals, "Arrival rate over time")),
    ]
    return render(
        request,
        "frontend/workloads/trace_detail.html",
        {**context, "charts": charts, "stats": stats},
        status=status,
    )


@login_required
@require_POST
def trace_delete(request: HttpRequest, slug: str) -> HttpResponse:
    """Delete a trace (its owner or staff): 409 with the trace page naming the scenarios,
    sweeps, plans and workloads that still use it, and nothing deleted."""
    trace = _visible_trace_or_404(request.user, slug)
    try:
        services.trace_delete(trace=trace, user=request.user)
    except services.TraceInUseError as exc:
        return _render_trace(request, trace, in_use=str(exc), status=409)
    messages.success(request, f"Deleted trace “{slug}”.")
    return redirect("frontend:workload_list")
