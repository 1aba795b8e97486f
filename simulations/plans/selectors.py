"""Reads for plans: a user sees their own plans and their results (plans are never shared).

For the API and the pages: :func:`plans_visible_to` / :func:`plan_get_for` (404 semantics:
another user's plan does not exist for you), :func:`plan_progress` (percent, live while a
round runs), :func:`plan_results` (the configurations confirmed so far, cheapest first —
partial while the plan runs) and :func:`plan_pareto_points` (what a Pareto chart plots).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from simulations.plans.models import Plan, PlanResult, PlanStage


def plans_visible_to(user: Any) -> QuerySet[Plan]:
    """Plans ``user`` submitted."""
    if not user.is_authenticated:
        return Plan.objects.none()
    return Plan.objects.filter(owner=user)


def plan_get_for(user: Any, pk: int) -> Plan:
    """A plan ``user`` submitted (Plan.DoesNotExist otherwise — no hint it exists)."""
    return plans_visible_to(user).get(pk=pk)


def plan_progress(plan: Plan) -> int:
    """Percent done: the stage's last report, interpolated over the current round."""
    if plan.is_final:
        return 100 if plan.status == "succeeded" else plan.progress
    if plan.stage == PlanStage.CONFIRM and plan.round_total:
        span = max(0, plan.round_progress_end - plan.progress)
        return min(99, plan.progress + span * plan.round_done // plan.round_total)
    return plan.progress


def plan_results(plan: Plan) -> QuerySet[PlanResult]:
    """The configurations confirmed so far, cheapest first."""
    return PlanResult.objects.filter(plan=plan).order_by("capex_usd", "key")


def plan_pareto_points(plan: Plan) -> list[dict[str, Any]]:
    """Every confirmed configuration as a chart point: key, capex, throughput, energy per
    token, feasibility, and whether it is on either Pareto front of the finished plan."""
    fronts: set[str] = set()
    if plan.result:
        for name in ("capex_vs_throughput", "capex_vs_energy_per_token"):
            fronts.update(p["key"] for p in plan.result.get("pareto", {}).get(name, []))
    points = []
    for key, capex, feasible, ev in plan_results(plan).values_list(
        "key", "capex_usd", "feasible", "evaluation"
    ):
        metrics = (ev or {}).get("metrics") or {}
        points.append(
            {
                "key": key,
                "capex_usd": capex,
                "feasible": feasible,
                "throughput_tok_s": metrics.get("throughput_tok_s"),
                "energy_j_per_token": metrics.get("energy_j_per_token"),
                "on_front": key in fronts,
            }
        )
    return points
