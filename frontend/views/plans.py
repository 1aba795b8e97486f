"""Capacity plans: submit a plan document, follow the search, read the
recommendation and the Pareto front (capex vs throughput, configurations that meet the
targets highlighted), and open the recommended systems as a scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from frontend import examples
from frontend.charts import chart
from frontend.charts.base import finite, fmt_distinct
from frontend.charts.sweep import pareto_figure
from frontend.forms import PlanForm
from frontend.provenance import plan_provenance
from frontend.views.common import int_or_404, page_number
from simulations.core import json_fields
from simulations.core.errors import ScenarioValidationError
from simulations.jobs import QuotaExceededError
from simulations.plans import selectors as plan_selectors
from simulations.plans import services as plan_services
from simulations.plans.models import Plan
from simulations.scenarios import services

#: The plan document the form starts from.
EXAMPLE_PLAN = Path(settings.BASE_DIR) / "examples" / "plan-llama2-7b-conv.json"
#: Largest plan document the form accepts (characters).
MAX_PLAN_CHARS = 256 * 1024


def _plan_or_404(request: HttpRequest, pk: Any) -> Plan:
    try:
        return plan_selectors.plan_get_for(request.user, int_or_404(pk))
    except Plan.DoesNotExist:
        raise Http404("no such plan") from None


def _example_text() -> str:
    if not EXAMPLE_PLAN.is_file():
        return ""
    doc = examples.rewrite_traces(json.loads(EXAMPLE_PLAN.read_text()))
    return json.dumps(doc, indent=2)


def _ensure_example_traces() -> None:
    """Store the traces the example plan names (it refers to the repository's trace file)."""
    example = examples.Example("plan", "plan", "planner", EXAMPLE_PLAN)
    if EXAMPLE_PLAN.is_file():
        examples.ensure_traces(example)


def _plan_form(request: HttpRequest, data: Any = None) -> PlanForm:
    """The plan form with the catalog's models, priced devices with a published power (the
    form has no quote fields; the JSON editor takes both quotes) and screened policies, the
    traces the user may use, and the planner's objectives."""
    from simulations.builtin_traces import builtin_traces_seed
    from simulations.catalog import selectors as catalog_selectors
    from simulations.core.planner.document import OBJECTIVES
    from simulations.core.policies import get_policy, screened_policies
    from simulations.scenarios import selectors as scenario_selectors

    builtin_traces_seed()  # the shipped Azure traces, stored once
    devices = [
        (d.slug, f"{d.name} (${d.price_usd:,.0f})")
        for d in catalog_selectors.device_list()
        if d.price_usd and d.tdp_w is not None and d.parent_id is None
    ]
    return PlanForm(
        data,
        models=[(m.slug, m.name) for m in catalog_selectors.model_list()],
        traces=[
            (t.slug, f"trace: {t.name}")
            for t in scenario_selectors.traces_visible_to(request.user).defer("data")
        ],
        devices=devices,
        policies=[(n, f"{n} — {get_policy(n).summary}") for n in screened_policies()],
        objectives=[(o, o.replace("_", " ")) for o in OBJECTIVES],
        initial={
            "devices": ["a100-80gb", "u280"],
            "policies": ["homogeneous", "glitches"],
            "objective": "capex",
            "model": "llama2-7b",
            "lengths": "azure-conv-2023",
        },
    )


def _submit(request: HttpRequest, document: Any) -> tuple[Plan | None, list[tuple[str, str]]]:
    """Store and queue the plan ``document``, or say why not (JSON path, message)."""
    try:
        _ensure_example_traces()
        return plan_services.plan_create(spec=document, owner=request.user), []
    except ScenarioValidationError as exc:
        return None, [(path, m) for path, msgs in exc.errors.items() for m in msgs]
    except QuotaExceededError as exc:
        return None, [("document", str(exc))]
    except ValidationError as exc:
        return None, [("document", "; ".join(exc.messages))]


@login_required
def plan_list(request: HttpRequest) -> HttpResponse:
    """The user's plans, and two ways to submit one: the form, or the plan document as JSON
    (pre-filled with the example) for what the form does not offer."""
    text = _example_text()
    errors: list[tuple[str, str]] = []
    status = 200
    form = _plan_form(request)
    json_open = False
    if request.method == "POST":
        if request.POST.get("mode") == "json" or "document" in request.POST:
            json_open = True
            text = request.POST.get("document", "")[:MAX_PLAN_CHARS]
            try:
                document = json_fields.loads(text)
            except json_fields.JsonInputError as exc:
                errors = [(path, m) for path, msgs in exc.problems.items() for m in msgs]
            else:
                plan, errors = _submit(request, document)
                if plan is not None:
                    return redirect("frontend:plan_detail", pk=plan.pk)
        else:
            form = _plan_form(request, request.POST)
            if form.is_valid():
                plan, errors = _submit(request, form.document())
                if plan is not None:
                    return redirect("frontend:plan_detail", pk=plan.pk)
                text = json.dumps(form.document(), indent=2)
        status = 400
    qs = plan_selectors.plans_visible_to(request.user).defer("document", "result")
    page = Paginator(qs, 25).get_page(page_number(request))
    return render(
        request,
        "frontend/plans/list.html",
        {"page": page, "text": text, "errors": errors, "form": form, "json_open": json_open},
        status=status,
    )


def _points(plan: Plan) -> list[dict[str, Any]]:
    """Chart points: the result's evaluated configurations once the plan finished, else the
    configurations confirmed so far."""
    if plan.result:
        fronts = {
            p["key"] for p in (plan.result.get("pareto") or {}).get("capex_vs_throughput", [])
        }
        rows = [
            {
                "key": e.get("key"),
                "label": e.get("description") or e.get("key"),
                "capex_usd": finite(e.get("capex_usd")),
                "throughput_tok_s": finite((e.get("metrics") or {}).get("throughput_tok_s")),
                "feasible": e.get("feasible"),
                "on_front": e.get("key") in fronts,
                "ttft_p90_ms": finite((e.get("metrics") or {}).get("ttft_p90_ms")),
                "tpot_p90_ms": finite((e.get("metrics") or {}).get("tpot_p90_ms")),
            }
            for e in plan.result.get("evaluated") or ()
        ]
    else:
        rows = [dict(p, label=p["key"]) for p in plan_selectors.plan_pareto_points(plan)]
    for p in rows:
        p["slo_met"] = bool(p.get("feasible"))
    return rows


def _front_rows(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Pareto front's rows with their figures written to as many digits as it takes to
    tell the configurations apart."""
    front = [p for p in points if p.get("on_front")]
    for key in ("capex_usd", "throughput_tok_s"):
        for p, label in zip(front, fmt_distinct([p[key] for p in front]), strict=True):
            p[f"{key}_label"] = label
    return front


def _energy_front_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The finished plan's capex-vs-energy-per-token front (as the CLI prints it), figures
    written to as many digits as it takes to tell the configurations apart."""
    front = [dict(p) for p in (result.get("pareto") or {}).get("capex_vs_energy_per_token", [])]
    for key in ("capex_usd", "energy_j_per_token", "throughput_tok_s"):
        for p, label in zip(front, fmt_distinct([p.get(key) for p in front]), strict=True):
            p[f"{key}_label"] = label
    return front


@login_required
def plan_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A plan: progress, recommendation and why, Pareto front, cheapest per device type."""
    plan = _plan_or_404(request, pk)
    points = _points(plan)
    pareto = None
    if any(p["capex_usd"] is not None and p["throughput_tok_s"] is not None for p in points):
        pareto = chart(
            "pareto",
            pareto_figure(
                points,
                f"Capex against throughput — {len(points)} configurations confirmed on the engine "
                "(green: meets every target)",
                front_of_slo_meeting=True,
            ),
        )
    result = plan.result or {}
    return render(
        request,
        "frontend/plans/detail.html",
        {
            "plan": plan,
            "progress": plan_selectors.plan_progress(plan),
            "result": result,
            "recommendation": result.get("recommendation"),
            "recommendation_provenance": plan_provenance(result.get("recommendation")),
            "per_device_type": result.get("per_device_type") or [],
            "pareto": pareto,
            "front": _front_rows(points),
            "energy_front": _energy_front_rows(result),
            "sensitivity": result.get("sensitivity"),
        },
    )


@login_required
@require_GET
def plan_status(request: HttpRequest, pk: int) -> JsonResponse:
    """Progress of a plan, polled by its page while the search runs."""
    plan = _plan_or_404(request, pk)
    response = JsonResponse(
        {
            "id": plan.pk,
            "status": plan.status,
            "status_display": plan.get_status_display(),
            "progress": plan_selectors.plan_progress(plan),
            "final": plan.is_final,
            "error": plan.error,
        }
    )
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def plan_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a queued or running plan."""
    plan = _plan_or_404(request, pk)
    try:
        changed = plan_services.plan_cancel(plan=plan, user=request.user)
    except PermissionDenied:
        raise Http404("no such plan") from None
    messages.info(request, "Plan cancelled." if changed else "The plan had already finished.")
    return redirect("frontend:plan_detail", pk=plan.pk)


@login_required
@require_POST
def plan_scenario(request: HttpRequest, pk: int) -> HttpResponse:
    """Store the plan's recommended systems (its result's scenario) as a scenario."""
    plan = _plan_or_404(request, pk)
    document = (plan.result or {}).get("scenario")
    if not document:
        raise Http404("the plan has no recommended scenario")
    try:
        scenario = services.scenario_create(owner=request.user, document=document)
    except ScenarioValidationError as exc:
        messages.error(request, f"The recommended scenario no longer validates: {exc}")
        return redirect("frontend:plan_detail", pk=plan.pk)
    return redirect("frontend:scenario_detail", pk=scenario.pk)
