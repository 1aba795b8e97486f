"""Reads of traces, workloads and scenarios, and who may see them.

A user sees their own scenarios and workloads plus those others shared (read-only); never
another user's private rows. Traces: their own, shared and public ones
(:class:`~simulations.choices.TraceVisibility`).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from simulations.ownership import visible_to
from simulations.scenarios.models import Scenario, Trace, Workload


def trace_list() -> QuerySet[Trace]:
    """Every trace without its (large) parsed data or upload text (staff tools; users get
    :func:`traces_visible_to`)."""
    return Trace.objects.defer("data", "upload_text").order_by("slug")


def traces_visible_to(user: Any) -> QuerySet[Trace]:
    """Traces ``user`` may see and use in scenarios, workloads, sweeps and plans: their own,
    shared and public ones (with their parsed data; ``.defer("data")`` for lists)."""
    if user is None or not user.is_authenticated:
        return Trace.objects.none()
    return Trace.objects.filter(visible_to(user)).defer("upload_text").order_by("slug")


def trace_get_for(user: Any, slug: str) -> Trace:
    """A trace ``user`` may see (Trace.DoesNotExist otherwise — no hint it exists)."""
    return traces_visible_to(user).get(slug=slug)


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
