"""The dashboard (recent runs, example scenarios ready to run) and running an example."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from frontend import examples
from frontend.views.runs import submit_run
from simulations.catalog import selectors as catalog_selectors
from simulations.core.errors import ScenarioValidationError
from simulations.runs import selectors as run_selectors
from simulations.scenarios import selectors as scenario_selectors
from simulations.scenarios import services

#: Rows of each list on the dashboard.
RECENT = 8


def index(request: HttpRequest) -> HttpResponse:
    """Signed in: the dashboard. Otherwise: the catalog overview with a sign-in link."""
    if not request.user.is_authenticated:
        context = catalog_selectors.catalog_overview()
        context["anonymous"] = True
        return render(request, "frontend/landing.html", context)
    runs = list(run_selectors.runs_visible_to(request.user).defer("result", "document")[:RECENT])
    scenarios = list(
        scenario_selectors.scenarios_visible_to(request.user)
        .defer("document")
        .order_by("-updated_at")[:RECENT]
    )
    return render(
        request,
        "frontend/dashboard.html",
        {"runs": runs, "scenarios": scenarios, "examples": examples.available()},
    )


@login_required
@require_POST
def run_example(request: HttpRequest, key: str) -> HttpResponse:
    """Store the example as one of the user's scenarios and run it at once."""
    example = examples.get(key)
    if example is None:
        raise Http404("no such example")
    try:
        examples.ensure_traces(example)
        scenario = services.scenario_create(owner=request.user, document=example.document)
    except ScenarioValidationError as exc:
        messages.error(request, f"The example does not validate against this catalog: {exc}")
        return redirect("frontend:index")
    except ValidationError as exc:
        messages.error(
            request, f"The example's trace could not be stored: {'; '.join(exc.messages)}"
        )
        return redirect("frontend:index")
    try:
        run = submit_run(request, scenario)
    except (ScenarioValidationError, PermissionDenied) as exc:
        messages.error(request, str(exc))
        return redirect("frontend:scenario_detail", pk=scenario.pk)
    if run is None:
        return redirect("frontend:scenario_detail", pk=scenario.pk)
    return redirect("frontend:run_detail", pk=run.pk)
