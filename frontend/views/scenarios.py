"""Scenarios: the builder (new, from an example, edit), list, detail, run, export, and the
load sweep that draws latency against load."""

from __future__ import annotations

import copy
import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_POST

from frontend import builder, examples
from frontend.forms import SweepForm
from frontend.provenance import builder_provenance
from frontend.views.common import catalog_choices, int_or_404, page_number, saved_workload_documents
from frontend.views.runs import submit_run
from simulations.core.errors import ScenarioValidationError
from simulations.jobs import QuotaExceededError
from simulations.runs import selectors as run_selectors
from simulations.scenarios import selectors as scenario_selectors
from simulations.scenarios import services
from simulations.scenarios.models import Scenario


def _scenario_or_404(request: HttpRequest, pk: Any, *, own: bool = False) -> Scenario:
    """A scenario the user may read (or, with ``own``, edit); 404 otherwise."""
    try:
        scenario = scenario_selectors.scenario_get_for(request.user, int_or_404(pk))
    except Scenario.DoesNotExist:
        raise Http404("no such scenario") from None
    if own and scenario.owner_id != request.user.pk:
        raise Http404("no such scenario")
    return scenario


@login_required
def scenario_list(request: HttpRequest) -> HttpResponse:
    """The user's scenarios and the ones others shared."""
    qs = scenario_selectors.scenarios_visible_to(request.user).order_by("-updated_at", "-id")
    page = Paginator(qs, 25).get_page(page_number(request))
    return render(request, "frontend/scenarios/list.html", {"page": page})


def _builder_context(
    request: HttpRequest, state: builder.BuilderState, **extra: Any
) -> dict[str, Any]:
    choices = catalog_choices(request.user)
    registry = builder.policies()
    price_hints = {
        d["slug"]: builder.catalog_price_hint(d["price_usd"]) for d in choices["devices"]
    }
    power_hints = {d["slug"]: builder.catalog_power_hint(d["tdp_w"]) for d in choices["devices"]}
    provenance = builder_provenance(request.user, choices["device_kinds"])
    systems = []
    for i, block in enumerate(state.systems):
        policy = next((p for p in registry if p["name"] == block.policy), None)
        roles = [r["name"] for r in policy["roles"]] if policy else []
        systems.append(
            {
                "i": i,
                "block": block,
                "roles": roles,
                "policies": [
                    {
                        "entry": p,
                        "selected": p["name"] == block.policy,
                        "options": [
                            {
                                "spec": o,
                                "field": f"sys-{i}-opt-{p['name']}-{o['name']}",
                                "value": block.option_text(p["name"], o["name"]),
                                "errors": block.errors.get(f"opt-{o['name']}", [])
                                if p["name"] == block.policy
                                else [],
                            }
                            for o in p["options"]
                        ],
                    }
                    for p in registry
                ],
                "devices": [
                    {
                        "j": j,
                        "row": row,
                        "price_field": f"sys-{i}-dev-{j}-price_usd",
                        "price_hint": price_hints.get(row.device.strip(), builder.PRICE_HINT),
                        "power_field": f"sys-{i}-dev-{j}-tdp_w",
                        "power_hint": power_hints.get(row.device.strip(), builder.POWER_HINT),
                        "provenance": provenance.get(f"{row.device.strip()}|{row.runtime.strip()}"),
                    }
                    for j, row in enumerate(block.devices)
                ],
            }
        )
    registry_json = {
        "policies": {p["name"]: {"roles": p["roles"], "options": p["options"]} for p in registry},
        "deviceKinds": choices["device_kinds"],
        "priceHints": price_hints,
        "priceHint": builder.PRICE_HINT,
        "powerHints": power_hints,
        "powerHint": builder.POWER_HINT,
        "provenance": provenance,
        "runtimes": [
            {"slug": r["slug"], "kind": r["device_kind"], "default": r["default_for_kind"]}
            for r in choices["runtimes"]
        ],
    }
    trace = state.workload.trace.strip()
    return {
        "state": state,
        "extra_trace": trace
        if trace and trace not in {t["slug"] for t in choices["traces"]}
        else "",
        "systems": systems,
        "registry": registry,
        "registry_json": registry_json,
        "slo_fields": [
            {
                "key": k,
                "label": label,
                "unit": unit,
                "value": state.slo.get(k, ""),
                "field": f"slo-{k}",
            }
            for k, label, unit in builder.SLO_FIELDS
        ],
        "cost_fields": [
            {
                "key": k,
                "label": label,
                "unit": unit,
                "value": state.costs.get(k, ""),
                "field": f"costs-{k}",
            }
            for k, label, unit in builder.COST_FIELDS
        ],
        "capacity_fields": [
            {
                "key": k,
                "label": label,
                "unit": unit,
                "value": state.capacity.get(k, ""),
                "field": f"capacity-{k}",
            }
            for k, label, unit in builder.CAPACITY_FIELDS
        ],
        "link_slugs": [link["slug"] for link in choices["links"]],
        "length_kinds": builder.LENGTH_KINDS,
        "arrival_kinds": builder.ARRIVAL_KINDS,
        **choices,
        **extra,
    }


@login_required
def scenario_new(request: HttpRequest) -> HttpResponse:
    """The builder: blank, from an example (``?example=``) or a copy (``?from=``)."""
    if request.method == "POST":
        return _builder_post(request, None)
    state = builder.BuilderState()
    source = ""
    key = request.GET.get("example")
    if key:
        example = examples.get(key)
        if example is None:
            raise Http404("no such example")
        try:
            examples.ensure_traces(example)
        except ValidationError as exc:
            messages.error(request, f"The example's trace could not be stored: {exc}")
        state = builder.state_from_document(example.document)
        source = f"example “{example.title}”"
    elif request.GET.get("from"):
        scenario = _scenario_or_404(request, request.GET["from"])
        doc = copy.deepcopy(scenario.document)
        doc["name"] = f"{doc.get('name', scenario.name)} (copy)"
        state = builder.state_from_document(doc)
        source = f"a copy of “{scenario.name}”"
    else:
        state.systems[0].name = "system 1"
    return render(
        request,
        "frontend/scenarios/builder.html",
        _builder_context(request, state, source=source, scenario=None),
    )


@login_required
def scenario_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """The builder on one of the user's scenarios."""
    scenario = _scenario_or_404(request, pk, own=True)
    if request.method == "POST":
        return _builder_post(request, scenario)
    state = builder.state_from_document(scenario.document)
    return render(
        request,
        "frontend/scenarios/builder.html",
        _builder_context(request, state, source="", scenario=scenario),
    )


def _builder_post(request: HttpRequest, scenario: Scenario | None) -> HttpResponse:
    """Apply an editing button, or validate and save (and run) the scenario."""
    state = builder.state_from_post(request.POST)
    action = request.POST.get("action", "save")
    template = "frontend/scenarios/builder.html"
    if builder.apply_action(state, action):
        return render(
            request, template, _builder_context(request, state, scenario=scenario, source="")
        )
    workloads = catalog_choices(request.user)["workloads"]
    document = state.to_document(saved_workload_documents(workloads))
    errors: dict[str, list[str]] = {}
    try:
        services.scenario_validate(document, user=request.user)
    except ScenarioValidationError as exc:
        errors = exc.errors
    if not errors and not state.has_errors:
        if action == "validate":
            messages.success(request, "The scenario is valid.")
            return render(
                request, template, _builder_context(request, state, scenario=scenario, source="")
            )
        try:
            if scenario is None:
                scenario = services.scenario_create(owner=request.user, document=document)
            else:
                scenario = services.scenario_update(scenario=scenario, document=document)
        except ScenarioValidationError as exc:  # the catalog changed in between
            errors = exc.errors
    if errors or state.has_errors:
        state.attach_errors(errors)
        return render(
            request,
            template,
            _builder_context(request, state, scenario=scenario, source=""),
            status=400,
        )
    assert scenario is not None
    if action == "save_run":
        try:
            run = submit_run(request, scenario)
        except (ScenarioValidationError, PermissionDenied) as exc:
            messages.error(request, str(exc))
            run = None
        if run is not None:
            return redirect("frontend:run_detail", pk=run.pk)
    else:
        messages.success(request, f"Saved “{scenario.name}”.")
    return redirect("frontend:scenario_detail", pk=scenario.pk)


@login_required
def scenario_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A scenario's document, its runs and sweeps, and what can be done with it."""
    scenario = _scenario_or_404(request, pk)
    runs = list(
        run_selectors.runs_visible_to(request.user)
        .filter(scenario=scenario)
        .defer("result", "document")[:20]
    )
    arrival = ((scenario.document or {}).get("workload") or {}).get("arrival") or {}
    rate = arrival.get("rate_per_s") if arrival.get("kind") == "poisson" else None
    suggested = (
        ", ".join(f"{rate * f:g}" for f in (0.25, 0.5, 1, 1.5, 2))
        if isinstance(rate, int | float)
        else ""
    )
    return render(
        request,
        "frontend/scenarios/detail.html",
        {
            "scenario": scenario,
            "document_json": json.dumps(scenario.document, indent=2),
            "runs": runs,
            "own": scenario.owner_id == request.user.pk,
            "sweep_form": SweepForm(document=scenario.document, initial={"values": suggested}),
        },
    )


@login_required
@require_POST
def scenario_run(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a run of the scenario (own or shared)."""
    scenario = _scenario_or_404(request, pk)
    try:
        run = submit_run(request, scenario)
    except ScenarioValidationError as exc:
        messages.error(request, f"The scenario no longer validates against the catalog: {exc}")
        return redirect("frontend:scenario_detail", pk=scenario.pk)
    except PermissionDenied:
        raise Http404("no such scenario") from None
    if run is None:
        return redirect("frontend:scenario_detail", pk=scenario.pk)
    return redirect("frontend:run_detail", pk=run.pk)


@login_required
@require_POST
def scenario_share(request: HttpRequest, pk: int) -> HttpResponse:
    """Share the scenario read-only with every user, or stop sharing it."""
    scenario = _scenario_or_404(request, pk, own=True)
    services.scenario_update(scenario=scenario, shared=request.POST.get("shared") == "1")
    return redirect("frontend:scenario_detail", pk=scenario.pk)


@login_required
@require_GET
def scenario_document(request: HttpRequest, pk: int) -> HttpResponse:
    """The scenario document as a JSON download (for ``manage.py simulate`` or the API)."""
    scenario = _scenario_or_404(request, pk)
    response = HttpResponse(
        json.dumps(scenario.document, indent=1), content_type="application/json; charset=utf-8"
    )
    name = slugify(scenario.name)[:60] or "scenario"
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    return response


@login_required
@require_POST
def scenario_load_sweep(request: HttpRequest, pk: int) -> HttpResponse:
    """Start a sweep of one numeric setting (the Poisson arrival rate by default) over the
    given values."""
    from simulations.sweeps import services as sweep_services
    from simulations.sweeps.expand import SweepValidationError

    scenario = _scenario_or_404(request, pk)
    form = SweepForm(request.POST, document=scenario.document)
    if not form.is_valid():
        for msgs in form.errors.values():
            for m in msgs:
                messages.error(request, f"Sweep: {m}")
        return redirect("frontend:scenario_detail", pk=scenario.pk)
    template = copy.deepcopy(scenario.document)
    path, values = form.cleaned_data["parameter"], form.cleaned_data["values"]
    if path == "workload.arrival.rate_per_s":
        workload = template.get("workload") or {}
        workload["arrival"] = {"kind": "poisson", "rate_per_s": values[0]}
        template["workload"] = workload
    axes = [{"name": form.cleaned_data["name"], "path": path, "values": values}]
    label = form.parameters[path][0]
    try:
        sweep = sweep_services.sweep_create(
            owner=request.user, name=f"{scenario.name}: {label} sweep", template=template, axes=axes
        )
    except SweepValidationError as exc:
        messages.error(request, f"Sweep: {exc}")
        return redirect("frontend:scenario_detail", pk=scenario.pk)
    except QuotaExceededError as exc:
        messages.error(request, str(exc))
        return redirect("frontend:scenario_detail", pk=scenario.pk)
    return redirect("frontend:sweep_detail", pk=sweep.pk)
