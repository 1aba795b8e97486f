"""Sweeps: progress, results, the Pareto front (capex vs throughput, SLO-meeting points
highlighted) and latency against load when the sweep varies the arrival rate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from frontend.charts import chart
from frontend.charts.base import finite
from frontend.charts.sweep import latency_vs_load_figure, pareto_figure, pareto_front
from frontend.views.common import int_or_404, page_number
from simulations.sweeps import selectors as sweep_selectors
from simulations.sweeps import services as sweep_services
from simulations.sweeps.models import ConfigurationStatus, Sweep

RATE_PATH = "workload.arrival.rate_per_s"
#: Result rows a sweep page lists (the charts use every recorded configuration).
TABLE_ROWS = 200


def _sweep_or_404(request: HttpRequest, pk: Any) -> Sweep:
    try:
        return sweep_selectors.sweep_get_for(request.user, int_or_404(pk))
    except Sweep.DoesNotExist:
        raise Http404("no such sweep") from None


@login_required
def sweep_list(request: HttpRequest) -> HttpResponse:
    """The user's sweeps, newest first."""
    qs = sweep_selectors.sweeps_visible_to(request.user).defer("template").order_by("-created_at")
    page = Paginator(qs, 25).get_page(page_number(request))
    return render(request, "frontend/sweeps/list.html", {"page": page})


def _label(parameters: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in parameters.items())


def sweep_points(
    rows: Sequence[tuple[int, Mapping[str, Any], Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """One point per (configuration, system) with capex, throughput, p90s and SLO verdict."""
    points = []
    for index, parameters, result in rows:
        for s in (result or {}).get("systems", ()):
            points.append(
                {
                    "index": index,
                    "parameters": parameters,
                    "parameters_text": _label(parameters),
                    "system": s.get("name", ""),
                    "label": f"#{index} {_label(parameters)} · {s.get('name', '')}",
                    "capex_usd": finite(s.get("capex_usd")),
                    "throughput_tok_s": finite(s.get("throughput_tok_s")),
                    "ttft_p90_ms": finite((s.get("ttft_ms") or {}).get("p90")),
                    "tpot_p90_ms": finite((s.get("tpot_ms") or {}).get("p90")),
                    "slo_met": s.get("slo_met"),
                    "ttft_ms": s.get("ttft_ms") or {},
                    "tpot_ms": s.get("tpot_ms") or {},
                }
            )
    return points


def load_series(
    points: Sequence[Mapping[str, Any]], rate_axis: str
) -> dict[str, list[dict[str, Any]]]:
    """Points grouped by system and the values of the other axes, each with its rate."""
    series: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        rate = finite(p["parameters"].get(rate_axis))
        if rate is None:
            continue
        others = {k: v for k, v in p["parameters"].items() if k != rate_axis}
        key = p["system"] + (f" ({_label(others)})" if others else "")
        series.setdefault(key, []).append({**p, "rate_per_s": rate})
    return series


def sweep_fronts(
    points: Sequence[dict[str, Any]], rate_axis: str | None
) -> dict[str, list[Mapping[str, Any]]]:
    """The Pareto fronts (capex ↓, throughput ↑) of a sweep, by trace name: only points that
    do not miss the SLO, and — throughput following the offered load — one front per arrival
    rate when the sweep varies it (comparing across rates would mix loads)."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for p in points:
        if p.get("slo_met") is False:
            continue
        groups.setdefault(p["parameters"].get(rate_axis) if rate_axis else None, []).append(p)
    if len(groups) <= 1:
        return {"Pareto front": pareto_front(next(iter(groups.values()), []))}
    return {
        f"Pareto front at {rate_axis}={rate}": pareto_front(group)
        for rate, group in sorted(groups.items(), key=lambda kv: finite(kv[0]) or 0.0)
    }


@login_required
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A sweep's progress, results and charts (partial while it runs)."""
    sweep = _sweep_or_404(request, pk)
    rows = [
        (index, parameters, result or {})  # a succeeded configuration always has its result
        for index, parameters, result in sweep_selectors.sweep_results(sweep)
        .filter(status=ConfigurationStatus.SUCCEEDED)
        .values_list("index", "parameters", "result")
    ]
    failed = list(
        sweep_selectors.sweep_results(sweep)
        .filter(status=ConfigurationStatus.FAILED)
        .values("index", "parameters", "error")[:50]
    )
    points = sweep_points(rows)
    rate_axis = next((a.get("name") for a in sweep.axes or () if a.get("path") == RATE_PATH), None)
    fronts = sweep_fronts(points, rate_axis)
    charts = []
    if any(p["capex_usd"] is not None for p in points):
        charts.append(
            chart(
                "pareto",
                pareto_figure(
                    points,
                    f"Cost against throughput — {len(points)} systems evaluated"
                    + (" (a front per arrival rate)" if len(fronts) > 1 else ""),
                    fronts=fronts,
                ),
            )
        )
    if rate_axis:
        series = load_series(points, rate_axis)
        if series:
            charts.append(
                chart(
                    "latency-load",
                    latency_vs_load_figure(
                        series, "Latency against load", (sweep.template or {}).get("slo")
                    ),
                )
            )
    for front in fronts.values():
        for p in front:
            p["on_front"] = True  # type: ignore[index]
    return render(
        request,
        "frontend/sweeps/detail.html",
        {
            "sweep": sweep,
            "charts": charts,
            "points": points[:TABLE_ROWS],
            "more": max(0, len(points) - TABLE_ROWS),
            "failed": failed,
            "axes": sweep.axes or [],
        },
    )


@login_required
@require_GET
def sweep_status(request: HttpRequest, pk: int) -> JsonResponse:
    """Progress of a sweep, polled by its page while it runs."""
    sweep = _sweep_or_404(request, pk)
    response = JsonResponse(
        {
            "id": sweep.pk,
            "status": sweep.status,
            "progress": sweep.progress,
            "recorded": sweep.recorded,
            "total": sweep.total,
            "final": sweep.is_final,
        }
    )
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def sweep_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a queued or running sweep (recorded results stay)."""
    sweep = _sweep_or_404(request, pk)
    try:
        changed = sweep_services.sweep_cancel(sweep=sweep, user=request.user)
    except PermissionDenied:
        raise Http404("no such sweep") from None
    messages.info(request, "Sweep cancelled." if changed else "The sweep had already finished.")
    return redirect("frontend:sweep_detail", pk=sweep.pk)
