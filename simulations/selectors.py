"""Reads for the simulations app: querysets the pages, the API and the admin build on.

Visibility rules live here: a user sees their own scenarios, workloads and runs plus the
scenarios and workloads others shared (read-only); never another user's private rows.
Traces: their own, shared and public ones (:class:`~simulations.choices.TraceVisibility`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max, Prefetch, Q, QuerySet

from simulations.choices import RunStatus, TraceVisibility
from simulations.models import (
    Device,
    LLMModel,
    MemoryTier,
    RunEvent,
    RuntimeProfile,
    Scenario,
    SimulationRun,
    Trace,
    Workload,
)


def device_list() -> QuerySet[Device]:
    """Every device with its memory tiers (ordered) and parent, by kind then slug."""
    return (
        Device.objects.select_related("parent")
        .prefetch_related(Prefetch("memory_tiers", queryset=MemoryTier.objects.order_by("order")))
        .order_by("kind", "slug")
    )


def runtime_list() -> QuerySet[RuntimeProfile]:
    """Every runtime profile, by device kind then slug."""
    return RuntimeProfile.objects.order_by("device_kind", "slug")


def model_list() -> QuerySet[LLMModel]:
    """Every LLM model, by slug."""
    return LLMModel.objects.order_by("slug")


def trace_list() -> QuerySet[Trace]:
    """Every trace without its (large) parsed data or upload text (staff tools; users get
    :func:`traces_visible_to`)."""
    return Trace.objects.defer("data", "upload_text").order_by("slug")


def _trace_visible(user: Any) -> Q:
    return Q(owner=user) | Q(visibility__in=(TraceVisibility.SHARED, TraceVisibility.PUBLIC))


def traces_visible_to(user: Any) -> QuerySet[Trace]:
    """Traces ``user`` may see and use in scenarios, workloads, sweeps and plans: their own,
    shared and public ones (with their parsed data; ``.defer("data")`` for lists)."""
    if user is None or not user.is_authenticated:
        return Trace.objects.none()
    return Trace.objects.filter(_trace_visible(user)).defer("upload_text").order_by("slug")


def trace_get_for(user: Any, slug: str) -> Trace:
    """A trace ``user`` may see (Trace.DoesNotExist otherwise — no hint it exists)."""
    return traces_visible_to(user).get(slug=slug)


def catalog_overview() -> dict[str, Any]:
    """Devices, runtime profiles and models for the catalog page (the catalog's public
    profiles: a profile a user saved from a calibration is listed to them on /calibrate/)."""
    return {
        "devices": list(device_list()),
        "runtimes": list(runtime_list().filter(visibility=TraceVisibility.PUBLIC)),
        "models": list(model_list()),
    }


def catalog_version() -> str:
    """A text that changes whenever a device, runtime profile or model is added, edited or
    deleted (row counts and latest ``updated_at``): what caches of figures computed from
    the catalog are keyed by."""
    parts = []
    for model in (Device, RuntimeProfile, LLMModel):
        agg = model.objects.aggregate(n=Count("pk"), t=Max("updated_at"))
        parts.append(f"{agg['n']}@{agg['t'].timestamp() if agg['t'] else 0}")
    return "/".join(parts)


def _visible(user: Any) -> Q:
    return Q(owner=user) | Q(shared=True)


def scenarios_visible_to(user: Any) -> QuerySet[Scenario]:
    """Scenarios ``user`` may read: their own and shared ones."""
    if not user.is_authenticated:
        return Scenario.objects.none()
    return Scenario.objects.filter(_visible(user)).select_related("owner")


def scenario_get_for(user: Any, pk: int) -> Scenario:
    """A scenario ``user`` may read (Scenario.DoesNotExist otherwise — no hint it exists)."""
    return scenarios_visible_to(user).get(pk=pk)


def workloads_visible_to(user: Any) -> QuerySet[Workload]:
    """Workloads ``user`` may read: their own and shared ones."""
    if not user.is_authenticated:
        return Workload.objects.none()
    return Workload.objects.filter(_visible(user)).select_related("owner", "trace")


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


def runs_to_compare(user: Any, ids: Sequence[int]) -> RunsToCompare:
    """The runs ``ids`` names for a comparison, each one ``user`` may see.

    Raises SimulationRun.DoesNotExist when any id is not a run ``user`` may see (the
    caller answers 404 without saying which: nothing of another user's run is shown).
    The result documents are left unread (:func:`run_results` reads them when needed)."""
    found = {r.pk: r for r in runs_visible_to(user).defer("result").filter(pk__in=ids)}
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
