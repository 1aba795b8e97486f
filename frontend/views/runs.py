"""Runs: the run page (live progress, cancel, error, comparison charts), its status endpoint,
the exports (result CSV/JSON, scenario document) and the figures loaded after the page."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_POST

from frontend import analysis, costs, results
from frontend.charts import chart, figure_dict
from frontend.charts.base import esc
from frontend.charts.capacity import capacity_figure
from frontend.charts.comparison import (
    efficiency_figure,
    energy_figure,
    latency_cdf_figure,
    latency_percentile_figure,
    utilisation_figure,
)
from frontend.charts.papers import h2m2_footprint_figure, heterollm_placement_figure
from frontend.charts.roofline import roofline_figure
from frontend.charts.timeline import timeline_figure
from frontend.disaggregation import pool_rows
from frontend.parallel import parallel_rows
from frontend.provenance import result_provenance
from frontend.views.common import int_or_404, page_number
from simulations.catalog import selectors as catalog_selectors
from simulations.choices import RunStatus
from simulations.core.errors import ScenarioValidationError, UnknownPolicyError
from simulations.core.policies import Policy, PolicyFigure, get_policy
from simulations.jobs import QuotaExceededError
from simulations.runs import selectors as run_selectors
from simulations.runs import services as run_services
from simulations.runs.models import SimulationRun
from simulations.scenarios import services as scenario_services
from simulations.scenarios.models import Scenario

#: Heavier figures a run page loads after the page itself (they call the core): the
#: roofline for every run, then the figures the scenario's policies declare
#: (``Policy.figures``), drawn by these functions.
COMMON_LAZY_FIGURES = ("roofline",)
POLICY_FIGURES = {"hbm-footprint": h2m2_footprint_figure}


def _policy(name: Any) -> type[Policy] | None:
    """The registered policy ``name`` (None for a name no longer registered: a stored
    result outlives the code that made it)."""
    try:
        return get_policy(str(name))
    except UnknownPolicyError:
        return None


def _blocks(system: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The policy-specific blocks of a system's result entry, as its policy declares them
    (``Policy.result_blocks``), in that order."""
    policy = _policy(system.get("policy"))
    names = policy.result_blocks if policy is not None else Policy.result_blocks
    return [system[n] for n in names if isinstance(system.get(n), dict)]


def _placement(system: Mapping[str, Any]) -> dict[str, Any] | None:
    """The block of a system's entry that holds a per-kernel ``placement``, if any."""
    return next((b for b in _blocks(system) if b.get("placement")), None)


def _policy_figures(policies: Iterable[Any]) -> list[str]:
    """The figures the given policies declare, drawable here, each once, in order."""
    out: list[str] = []
    for name in policies:
        policy = _policy(name)
        for fig in policy.figures if policy is not None else ():
            if fig in POLICY_FIGURES and fig not in out:
                out.append(fig)
    return out


def _run_or_404(request: HttpRequest, pk: Any, *, defer_result: bool = False) -> SimulationRun:
    """A run of the signed-in user; 404 for anyone else's (no hint that it exists).

    ``defer_result`` leaves the result document (about 1 MB of JSON for a 10-system run)
    unread until :func:`_result_of` asks for it — pages that find what they need in the
    cache never read it."""
    qs = run_selectors.runs_visible_to(request.user)
    if defer_result:
        qs = qs.defer("result")
    try:
        return qs.get(pk=int_or_404(pk))
    except SimulationRun.DoesNotExist:
        raise Http404("no such run") from None


def _result_of(run: SimulationRun) -> Any:
    """The run's result document (read now if it was deferred)."""
    return run.result


def submit_run(request: HttpRequest, scenario: Scenario) -> SimulationRun | None:
    """Queue a run of ``scenario`` for the user, within their quota of active runs (a
    message says why not, and None is returned). ScenarioValidationError and
    PermissionDenied propagate."""
    try:
        return run_services.run_submit(scenario=scenario, owner=request.user)
    except QuotaExceededError as exc:
        messages.error(
            request,
            f"You have {exc.active} runs queued or running; at most {exc.limit} at once. "
            "Wait for one to finish or cancel one.",
        )
        return None


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    """The user's runs, newest first."""
    qs = run_selectors.runs_visible_to(request.user).defer("result", "document")
    status = request.GET.get("status", "")
    if status in RunStatus.values:
        qs = qs.filter(status=status)
    page = Paginator(qs, 25).get_page(page_number(request))
    headlines = _headlines([r for r in page if r.status == RunStatus.SUCCEEDED])
    return render(
        request,
        "frontend/runs/list.html",
        {
            "page": page,
            "rows": [(r, headlines.get(r.pk)) for r in page],
            "status": status,
            "statuses": RunStatus.choices,
            "max_compared": run_selectors.MAX_COMPARED_RUNS,
        },
    )


def _headlines(runs: list[SimulationRun]) -> dict[int, dict[str, Any] | None]:
    """:func:`frontend.results.headline` of each succeeded run, cached per result version:
    only the results not cached are read (they are large; the list defers them)."""
    keys = {r.pk: f"run-headline:v1:{_result_version(r)}" for r in runs}
    out: dict[int, dict[str, Any] | None] = {}
    missing = []
    for pk, key in keys.items():
        cached = _cache_get(key)
        if isinstance(cached, dict) and "headline" in cached:
            out[pk] = cached["headline"]
        else:
            missing.append(pk)
    for pk, result in run_selectors.run_results(missing).items():
        out[pk] = results.headline(results.systems_of(result))
        _cache_set(keys[pk], {"headline": out[pk]})
    return out


def _status_payload(run: SimulationRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "status": run.status,
        "status_display": run.get_status_display(),
        "progress": int(run.progress),
        "final": run.is_final,
        "error": run.error,
        "attempts": run.attempts,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


@login_required
@require_GET
def run_status(request: HttpRequest, pk: int) -> JsonResponse:
    """Status and progress of a run, polled by the run page while it is active."""
    try:
        run = (
            run_selectors.runs_visible_to(request.user)
            .select_related(None)
            .only("id", "status", "progress", "error", "attempts", "started_at", "finished_at")
            .get(pk=pk)
        )
    except SimulationRun.DoesNotExist:
        raise Http404("no such run") from None
    response = JsonResponse(_status_payload(run))
    response["Cache-Control"] = "no-store"
    return response


def _baseline(request: HttpRequest, n: int) -> int:
    try:
        b = int(request.GET.get("baseline", "0"))
    except ValueError:
        return 0
    return b if 0 <= b < n else 0


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page: lifecycle, then the comparison of the systems once it succeeded."""
    run = _run_or_404(request, pk, defer_result=True)
    context: dict[str, Any] = {
        "run": run,
        "status": _status_payload(run),
        "document": run.document,
        "events": list(run_selectors.run_events(run)),
        "systems": [],
        "baseline": 0,
    }
    if run.status == RunStatus.SUCCEEDED:
        # the comparison (summary table, selectors) depends only on the stored result and
        # the query: cached per result version, so a page view reads no result document
        key = _view_cache_key("run-page", run, request)
        comparison = _cache_get(key)
        if not isinstance(comparison, dict):
            systems = results.systems_of(_result_of(run))
            baseline = _baseline(request, len(systems))
            comparison = {
                "systems": [
                    {"name": s.get("name", f"system {i}"), "policy": s.get("policy", "")}
                    for i, s in enumerate(systems)
                ],
                "baseline": baseline,
                "clipped": results.clipped_requests(systems),
            }
            if systems:
                comparison.update(_comparison(run, systems, baseline, request))
            _cache_set(key, comparison)
        context.update(comparison)
    return render(request, "frontend/runs/detail.html", context)


def _selected(request: HttpRequest, param: str, choices: list[int]) -> int:
    """The system index ``?param=`` names if it is one of ``choices``, else the first (or
    -1 without choices)."""
    try:
        wanted = int(request.GET.get(param, ""))
    except ValueError:
        wanted = -1
    if wanted in choices:
        return wanted
    return choices[0] if choices else -1


#: The comparison charts the run page loads from ``charts.json`` (element id, label).
COMPARISON_CHARTS = (
    ("efficiency", "Throughput, latency and cost relative to the baseline"),
    ("latency-cdf", "Latency CDFs"),
    ("latency-percentiles", "Latency percentiles"),
    ("utilisation", "Device utilisation"),
    ("energy", "Energy"),
)
#: Rendered charts stay cached this long; the key holds the run's result version, so a
#: stale entry can only be one nobody asks for any more.
CHARTS_CACHE_S = 24 * 3600

logger = logging.getLogger(__name__)


def _with_timeline(systems: list[Any]) -> list[int]:
    return [i for i, s in enumerate(systems) if s.get("timeline")]


def _with_placement(systems: list[Any]) -> list[int]:
    return [i for i, s in enumerate(systems) if _placement(s) is not None]


def _comparison(
    run: SimulationRun, systems: list[Any], baseline: int, request: HttpRequest
) -> dict[str, Any]:
    """The run page's comparison without its figures: the page only holds their places and
    the URL of ``charts.json`` (the figures of a 10-system run are ~800 KB of JSON)."""
    with_timeline = _with_timeline(systems)
    selected = _selected(request, "timeline", with_timeline)
    with_placement = _with_placement(systems)
    shown = _selected(request, "placement", with_placement)
    query = urlencode({"baseline": baseline, "timeline": selected, "placement": shown})
    return {
        "charts": COMPARISON_CHARTS,
        "charts_src": f"{reverse('frontend:run_charts', args=[run.pk])}?{query}",
        "timeline": selected >= 0,
        "timeline_systems": [(i, systems[i].get("name", f"system {i}")) for i in with_timeline],
        "timeline_selected": selected,
        "placement": shown >= 0,
        "placement_systems": [(i, systems[i].get("name", f"system {i}")) for i in with_placement],
        "placement_selected": shown,
        "summary": results.summary_rows(systems, baseline),
        "provenance": result_provenance(systems),
        "tco": costs.tco_rows(systems),
        "cloud_prices": costs.cloud_price_notes(costs.tco_rows(systems)),
        "capacity": costs.capacity_rows(systems),
        "parallel": parallel_rows(systems),
        "disaggregated": pool_rows(systems),
        "lazy_figures": [
            *COMMON_LAZY_FIGURES,
            *_policy_figures(s.get("policy") for s in systems),
        ],
        "notes": [
            (s.get("name", ""), note)
            for s in systems
            for block in _blocks(s)
            if (note := block.get("notes") or block.get("note"))
        ],
    }


def _comparison_charts(systems: list[Any], baseline: int, slo: Mapping[str, Any]) -> list[Any]:
    """The comparison charts of a run page (and of a comparison of runs): efficiency,
    latency CDFs (with the SLO's targets), percentiles, utilisation, energy, capacity."""
    built = [
        chart("efficiency", efficiency_figure(systems, baseline)),
        chart("latency-cdf", latency_cdf_figure(systems, slo)),
        chart("latency-percentiles", latency_percentile_figure(systems)),
        chart("utilisation", utilisation_figure(systems)),
        chart("energy", energy_figure(systems)),
    ]
    if costs.capacity_rows(systems):
        built.append(chart("capacity-chart", capacity_figure(systems, slo)))
    return built


def _charts_body(built: list[Any]) -> str:
    body = ",".join(f"{json.dumps(c.id)}:{c.json}" for c in built)
    return f'{{"charts":{{{body}}}}}'


def _charts_json(
    run: SimulationRun, systems: list[Any], baseline: int, request: HttpRequest
) -> str:
    """``{"charts": {element id: Plotly figure}}`` of the run page's comparison (the JSON
    text, built from each figure's own JSON without decoding it again)."""
    built = _comparison_charts(systems, baseline, (run.document or {}).get("slo") or {})
    selected = _selected(request, "timeline", _with_timeline(systems))
    if selected >= 0:
        built.append(chart("timeline", timeline_figure(systems[selected])))
    shown = _selected(request, "placement", _with_placement(systems))
    if shown >= 0:
        block = _placement(systems[shown]) or {}
        built.append(
            chart(
                "placement",
                heterollm_placement_figure(
                    block["placement"],
                    f"Per-kernel backend placement — "
                    f"{esc(systems[shown].get('name', ''))} (mode {block.get('mode', '?')}, "
                    f"prompt of {block.get('representative_prompt_tokens', '?')} tokens)",
                ),
            )
        )
    return _charts_body(built)


def _result_version(run: SimulationRun) -> str:
    """Names the stored result: the run, the attempt that stored it and when."""
    finished = run.finished_at.timestamp() if run.finished_at else 0
    return f"{run.pk}:{run.attempts}:{finished}"


def _view_cache_key(kind: str, run: SimulationRun, request: HttpRequest, *extra: str) -> str:
    """A cache key for what ``kind`` renders of the run's result: the result version and
    the query parameters the rendering depends on (hashed: they are user input)."""
    params = "|".join(request.GET.get(p, "")[:16] for p in ("baseline", "timeline", "placement"))
    digest = hashlib.sha256("|".join((params, *extra)).encode()).hexdigest()[:24]
    return f"{kind}:v2:{_result_version(run)}:{digest}"


def _cache_get(key: str) -> Any:
    # a cache outage must not fail the page: what was cached is simply built again
    try:
        return cache.get(key)
    except Exception:  # any cache backend error means "not cached"
        logger.warning("run page cache unavailable (get %s)", key, exc_info=True)
        return None


def _cache_set(key: str, value: Any) -> None:
    try:
        cache.set(key, value, CHARTS_CACHE_S)
    except Exception:  # see _cache_get
        logger.warning("run page cache unavailable (set %s)", key, exc_info=True)


@login_required
@require_GET
def run_charts(request: HttpRequest, pk: int) -> HttpResponse:
    """The comparison charts of the run page as Plotly JSON (loaded after the page),
    cached per run and result version."""
    run = _run_or_404(request, pk, defer_result=True)
    if run.status != RunStatus.SUCCEEDED:
        raise Http404("the run has no result")
    key = _view_cache_key("run-charts", run, request)
    body = _cache_get(key)
    if not isinstance(body, str):
        result = _result_of(run)
        if result is None:
            raise Http404("the run has no result")
        systems = results.systems_of(result)
        body = _charts_json(run, systems, _baseline(request, len(systems)), request)
        _cache_set(key, body)
    response = HttpResponse(body, content_type="application/json")
    response["Cache-Control"] = "private, max-age=300"
    return response


@login_required
@require_GET
def run_figure(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """A figure that calls the core (roofline, H2M2 footprint), as Plotly JSON.

    Cached per run and catalog version: the figure evaluates the current catalog's device
    models at the run's scenario, so a catalog edit gives a new figure."""
    run = _run_or_404(request, pk, defer_result=True)
    if run.status != RunStatus.SUCCEEDED or (
        name not in COMMON_LAZY_FIGURES and name not in POLICY_FIGURES
    ):
        raise Http404("no such figure")
    key = _view_cache_key(f"run-figure-{name}", run, request, catalog_selectors.catalog_version())
    body = _cache_get(key)
    if not isinstance(body, str):
        try:
            spec = scenario_services.scenario_validate(run.document)
        except ScenarioValidationError as exc:
            return JsonResponse(
                {"error": f"the run's scenario no longer validates against the catalog: {exc}"},
                status=409,
            )
        body = json.dumps(_figure_payload(spec, name))
        _cache_set(key, body)
    return HttpResponse(body, content_type="application/json")


def _figure_payload(spec: Any, name: str) -> dict[str, Any]:
    """``{"figure": Plotly JSON or None, "notes": [...]}`` of a lazy figure."""
    if name == "roofline":
        series, notes, (prompt, output) = analysis.scenario_rooflines(spec)
        if not series:
            return {"figure": None, "notes": notes}
        fig = roofline_figure(
            series,
            "Roofline with the scenario's operating points",
            subtitle=f"prefill of a {prompt}-token prompt and the average decode step over "
            f"{output} output tokens, batch 1 · datasheet roof solid, stack roof dotted",
        )
        return {"figure": figure_dict(fig), "notes": notes}
    # a policy's own figure: the first system of a policy declaring it that has rows
    prompt, output = analysis.representative_lengths(spec)
    shown: PolicyFigure | None = None
    fig_notes: list[str] = []
    for system in spec.systems:
        policy = _policy(system.policy)
        if policy is None or name not in policy.figures:
            continue
        data = policy.figure_data(name, system, spec, prompt, output)
        if data.rows and shown is None:
            shown = data
        if data.note:
            fig_notes.append(f"{system.name}: {data.note}")
    if shown is None:
        return {"figure": None, "notes": fig_notes}
    fig = POLICY_FIGURES[name](shown.rows, esc(shown.title))
    return {"figure": figure_dict(fig), "notes": fig_notes}


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a queued or running run."""
    run = _run_or_404(request, pk)
    try:
        changed = run_services.run_cancel(run=run, user=request.user)
    except PermissionDenied:
        raise Http404("no such run") from None
    if changed:
        messages.success(request, f"Run {run.pk} cancelled.")
    else:
        messages.info(request, f"Run {run.pk} had already finished.")
    return redirect("frontend:run_detail", pk=run.pk)


def _filename(run: SimulationRun, suffix: str) -> str:
    name = slugify(str((run.document or {}).get("name", "")))[:60] or "scenario"
    return f"run-{run.pk}-{name}{suffix}"


@login_required
@require_GET
def run_result_json(request: HttpRequest, pk: int) -> HttpResponse:
    """The result document (docs/architecture.md) as a JSON download."""
    run = _run_or_404(request, pk)
    if run.status != RunStatus.SUCCEEDED or run.result is None:
        raise Http404("the run has no result")
    response = HttpResponse(
        json.dumps(run.result, indent=1), content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{_filename(run, "-result.json")}"'
    return response


@login_required
@require_GET
def run_result_csv(request: HttpRequest, pk: int) -> HttpResponse:
    """One row per system (and per device group) as CSV, with the ratios to the baseline."""
    run = _run_or_404(request, pk)
    if run.status != RunStatus.SUCCEEDED or run.result is None:
        raise Http404("the run has no result")
    baseline = _baseline(request, len(results.systems_of(run.result)))
    response = HttpResponse(
        results.result_csv(run.result, baseline), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{_filename(run, "-result.csv")}"'
    return response


@login_required
@require_GET
def run_scenario_json(request: HttpRequest, pk: int) -> HttpResponse:
    """The scenario document the run simulated (re-run it with ``manage.py simulate``)."""
    run = _run_or_404(request, pk)
    response = HttpResponse(
        json.dumps(run.document, indent=1), content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{_filename(run, "-scenario.json")}"'
    return response


class _BadIdsError(ValueError):
    """``?ids=`` does not name between two and MAX_COMPARED_RUNS distinct run ids."""


def _compare_ids(request: HttpRequest) -> list[int]:
    """The run ids of ``?ids=1,2,3`` (or ``?ids=1&ids=2``, as the run list's form sends
    them), distinct, in order. Raises _BadIdsError saying what is wrong."""
    raw = [p.strip() for v in request.GET.getlist("ids") for p in v.split(",") if p.strip()]
    try:
        ids = list(dict.fromkeys(int(p) for p in raw[: run_selectors.MAX_COMPARED_RUNS + 1]))
    except ValueError:
        raise _BadIdsError("ids: give run numbers separated by commas, e.g. ?ids=3,7") from None
    if len(ids) < 2 or len(raw) > run_selectors.MAX_COMPARED_RUNS:
        raise _BadIdsError(
            f"ids: select between 2 and {run_selectors.MAX_COMPARED_RUNS} distinct runs"
        )
    return ids


def _compared(request: HttpRequest) -> run_selectors.RunsToCompare:
    """The runs ``?ids=`` names, their results unread (404 when any is not the viewer's to
    see, without saying which). _BadIdsError propagates."""
    ids = _compare_ids(request)
    try:
        return run_selectors.runs_to_compare(request.user, ids)
    except SimulationRun.DoesNotExist:
        raise Http404("no such run") from None


def _compared_systems(runs: list[SimulationRun]) -> list[dict[str, Any]]:
    """The runs' systems labelled by run (reads their results)."""
    found = run_selectors.run_results([r.pk for r in runs])
    return results.compared_systems([(r.pk, found.get(r.pk)) for r in runs])


def _compare_cache_key(kind: str, runs: list[SimulationRun], request: HttpRequest) -> str:
    """A cache key for what ``kind`` renders of these runs' results: their result versions
    and the baseline asked for (hashed: user input)."""
    versions = "|".join(_result_version(r) for r in runs)
    baseline = request.GET.get("baseline", "")[:16]
    digest = hashlib.sha256(f"{versions}#{baseline}".encode()).hexdigest()[:32]
    return f"{kind}:v1:{digest}"


def _common_slo(runs: list[SimulationRun]) -> dict[str, Any]:
    """The runs' SLO if they all share it (the CDFs then draw its targets), else none."""
    slos = [(r.document or {}).get("slo") or {} for r in runs]
    return slos[0] if slos and all(s == slos[0] for s in slos) else {}


@login_required
@require_GET
def run_compare(request: HttpRequest) -> HttpResponse:
    """Saved runs side by side (``?ids=1,2,3``): the run page's tables and charts over the
    systems of every selected succeeded run, each labelled "run #id · system"."""
    try:
        chosen = _compared(request)
    except _BadIdsError as exc:
        return render(request, "frontend/runs/compare.html", {"error": str(exc)}, status=400)
    ids = ",".join(str(r.pk) for r in chosen.runs)
    context: dict[str, Any] = {"runs": chosen.runs, "left_out": chosen.left_out, "ids": ids}
    # the tables depend only on the stored results and the baseline: cached per result
    # versions, so a second view reads none of the (large) result documents
    key = _compare_cache_key("run-compare", chosen.runs, request)
    comparison = _cache_get(key)
    if not isinstance(comparison, dict):
        comparison = _compare_tables(_compared_systems(chosen.runs), request, ids)
        _cache_set(key, comparison)
    context.update(comparison)
    return render(request, "frontend/runs/compare.html", context)


def _compare_tables(
    systems: list[dict[str, Any]], request: HttpRequest, ids: str
) -> dict[str, Any]:
    """The comparison page's tables over ``systems`` (and where its charts load from)."""
    baseline = _baseline(request, len(systems))
    query = urlencode({"ids": ids, "baseline": baseline})
    context: dict[str, Any] = {
        "systems": [{"name": s["name"], "policy": s.get("policy", "")} for s in systems],
        "baseline": baseline,
    }
    if systems:
        context.update(
            {
                "summary": results.summary_rows(systems, baseline),
                "clipped": results.clipped_requests(systems),
                "provenance": result_provenance(systems),
                "tco": costs.tco_rows(systems),
                "cloud_prices": costs.cloud_price_notes(costs.tco_rows(systems)),
                "capacity": costs.capacity_rows(systems),
                "parallel": parallel_rows(systems),
                "disaggregated": pool_rows(systems),
                "charts": COMPARISON_CHARTS,
                "charts_src": f"{reverse('frontend:run_compare_charts')}?{query}",
            }
        )
    return context


@login_required
@require_GET
def run_compare_charts(request: HttpRequest) -> HttpResponse:
    """The comparison page's charts as Plotly JSON (loaded after the page)."""
    try:
        chosen = _compared(request)
    except _BadIdsError as exc:
        return JsonResponse({"ids": [str(exc)]}, status=400)
    key = _compare_cache_key("run-compare-charts", chosen.runs, request)
    body = _cache_get(key)
    if not isinstance(body, str):
        systems = _compared_systems(chosen.runs)
        if not systems:
            raise Http404("no run of the comparison has a result")
        slo = _common_slo(chosen.runs)
        body = _charts_body(_comparison_charts(systems, _baseline(request, len(systems)), slo))
        _cache_set(key, body)
    response = HttpResponse(body, content_type="application/json")
    response["Cache-Control"] = "private, max-age=300"
    return response
