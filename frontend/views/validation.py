"""The validation page: each paper's reproduced figures beside the published values."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from frontend import validation
from frontend.charts import chart
from frontend.charts.validation import validation_figure
from simulations.core.policies import papers as registered_papers


@login_required
def validation_page(request: HttpRequest) -> HttpResponse:
    """Every paper's stored reproduction report: a chart and the table of checks."""
    papers = validation.reports()
    for entry in papers:
        entry["chart"] = (
            chart(
                f"validation-{entry['paper']}", validation_figure(entry["paper"], entry["checks"])
            )
            if entry["checks"]
            else None
        )
    return render(
        request,
        "frontend/validation.html",
        {
            "papers": papers,
            "totals": validation.totals(papers),
            "busy": any(p["busy"] for p in papers),
        },
    )


@login_required
@require_POST
def validation_recompute(request: HttpRequest, paper: str) -> HttpResponse:
    """Queue a recomputation of one paper's report (staff only: it occupies a worker)."""
    if paper not in {p.name for p in registered_papers()}:
        raise Http404("no such paper")
    if not request.user.is_staff:
        messages.error(request, "Only staff can recompute the validation reports.")
    elif validation.request(paper):
        messages.success(
            request, f"Reproducing {paper} on a worker; the page updates when it is done."
        )
    else:
        messages.info(request, f"{paper} is already being reproduced.")
    return redirect("frontend:validation")
