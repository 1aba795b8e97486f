"""Reads of runs: a user sees the runs they submitted (runs are never shared)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from simulations.choices import RunStatus
from simulations.runs.models import RunEvent, SimulationRun


def runs_visible_to(user: Any) -> QuerySet[SimulationRun]:
    """Runs ``user`` submitted (runs are never shared)."""
    if not user.is_authenticated:
        return SimulationRun.objects.none()
    return SimulationRun.objects.filter(owner=user).select_related("scenario")


def run_get_for(user: Any, pk: int) -> SimulationRun:
    """A run ``user`` submitted (SimulationRun.DoesNotExist otherwise)."""
    return runs_visible_to(user).get(pk=pk)


#: The most runs one comparison page shows (each brings its whole result document).
MAX_COMPARED_RUNS = 8


@dataclass(frozen=True)
class RunsToCompare:
    """The succeeded runs of a comparison, in the order asked, and the ids left out
    because they have not succeeded (visible to the viewer, so naming them leaks nothing)."""

    runs: list[SimulationRun]
    left_out: list[SimulationRun]


def comparable_runs(user: Any) -> QuerySet[SimulationRun]:
    """Runs ``user`` may put in a comparison: their own, and — so a comparison link can be
    shared with signed-in colleagues — the runs of scenarios their owners shared (sharing a
    scenario shares what it produced; the run pages themselves stay the owner's)."""
    if not user.is_authenticated:
        return SimulationRun.objects.none()
    return SimulationRun.objects.filter(Q(owner=user) | Q(scenario__shared=True)).select_related(
        "scenario"
    )


def runs_to_compare(user: Any, ids: Sequence[int]) -> RunsToCompare:
    """The runs ``ids`` names for a comparison, each one ``user`` may compare
    (:func:`comparable_runs`).

    Raises SimulationRun.DoesNotExist when any id is not such a run (the caller answers 404
    without saying which: nothing of another user's private run is shown). The result
    documents are left unread (:func:`run_results` reads them when needed)."""
    found = {r.pk: r for r in comparable_runs(user).defer("result").filter(pk__in=ids)}
    if len(found) != len(set(ids)):
        raise SimulationRun.DoesNotExist("no such run")
    ordered = [found[i] for i in dict.fromkeys(ids)]
    return RunsToCompare(
        runs=[r for r in ordered if r.status == RunStatus.SUCCEEDED],
        left_out=[r for r in ordered if r.status != RunStatus.SUCCEEDED],
    )


def run_results(run_ids: Sequence[int]) -> dict[int, Any]:
    """The stored result documents of the given runs (only those columns read)."""
    return dict(SimulationRun.objects.filter(pk__in=run_ids).values_list("pk", "result"))


def run_events(run: SimulationRun) -> QuerySet[RunEvent]:
    """The run's lifecycle events, oldest first."""
    return RunEvent.objects.filter(run=run).order_by("id")
