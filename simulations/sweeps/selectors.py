"""Reads for sweeps: a user sees their own sweeps and their results (sweeps are never shared)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from simulations.sweeps.models import Sweep, SweepResult


def sweeps_visible_to(user: Any) -> QuerySet[Sweep]:
    """Sweeps ``user`` submitted."""
    if not user.is_authenticated:
        return Sweep.objects.none()
    return Sweep.objects.filter(owner=user)


def sweep_get_for(user: Any, pk: int) -> Sweep:
    """A sweep ``user`` submitted (Sweep.DoesNotExist otherwise — no hint it exists)."""
    return sweeps_visible_to(user).get(pk=pk)


def sweep_results(sweep: Sweep) -> QuerySet[SweepResult]:
    """The configurations recorded so far (partial while the sweep runs), by index."""
    return SweepResult.objects.filter(sweep=sweep).order_by("index")
