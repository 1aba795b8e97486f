"""Reads for measurement sets, calibrations and the runtime profiles users save.

Visibility (:data:`~simulations.measurements.models.Visibility`): a user sees their own
sets and profiles plus shared and public ones — another user's private set or profile is
absent (404, unknown slug), never forbidden. Calibrations are their owner's only.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from simulations.catalog.models import RuntimeProfile
from simulations.measurements.models import Calibration, MeasurementSet
from simulations.ownership import Visibility, visible_to


def measurement_sets_visible_to(user: Any) -> QuerySet[MeasurementSet]:
    """Measurement sets ``user`` may see and fit: their own, shared and public ones (the
    rows deferred: ``.get`` the one to fit)."""
    if user is None or not user.is_authenticated:
        return MeasurementSet.objects.none()
    return (
        MeasurementSet.objects.filter(visible_to(user))
        .select_related("device", "llm", "runtime", "owner")
        .order_by("slug")
    )


def measurement_set_get_for(user: Any, slug: str) -> MeasurementSet:
    """A set ``user`` may see (MeasurementSet.DoesNotExist otherwise — no hint it exists)."""
    return measurement_sets_visible_to(user).get(slug=slug)


def runtimes_visible_to(user: Any) -> QuerySet[RuntimeProfile]:
    """Runtime profiles ``user`` may see and simulate with: the catalog's (public), shared
    ones, and the private profiles they saved. ``user`` None: every profile (workers and
    the command line run documents that were validated with their user)."""
    rows = RuntimeProfile.objects.order_by("device_kind", "slug")
    if user is None:
        return rows
    if not user.is_authenticated:
        return rows.filter(visibility=Visibility.PUBLIC)
    return rows.filter(visible_to(user))


def calibrations_of(user: Any) -> QuerySet[Calibration]:
    """Fits ``user`` ran, newest first."""
    if user is None or not user.is_authenticated:
        return Calibration.objects.none()
    return Calibration.objects.filter(owner=user).select_related(
        "measurement_set", "measurement_set__device", "base_runtime", "profile"
    )


def calibration_get_for(user: Any, pk: int) -> Calibration:
    """A fit ``user`` ran (Calibration.DoesNotExist otherwise)."""
    return calibrations_of(user).get(pk=pk)
