"""Simulation runs and their lifecycle events.

A run holds a copy of its scenario document; writes go through
:mod:`simulations.runs.services` (conditional updates, one event per transition).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q

from simulations.choices import (
    RunEventKind,
    RunStatus,
)
from simulations.fields import bounded
from simulations.jobs import ClaimedJob
from simulations.scenarios.models import Scenario


class RunImmutableError(RuntimeError):
    """Raised when code tries to ``save()`` an existing run instead of using the services."""


class SimulationRun(ClaimedJob):
    """One execution of a scenario on a Celery worker, and its result document.

    Lifecycle: queued → running → succeeded / failed / cancelled. Every transition is a
    conditional UPDATE in :mod:`simulations.runs.services` (``WHERE status = …``), so final
    states are never left and a result is stored once: only the attempt that holds the
    claim (``status = running AND attempts = n``) may store it. The CheckConstraints keep
    each status consistent with its timestamps, result and error. ``document`` is the
    scenario as it was when the run was submitted. ``attempts`` counts deliveries to a
    worker (at most ``HETPLANNER_MAX_ATTEMPTS``). The lifecycle columns it shares with a plan
    come from :class:`~simulations.jobs.ClaimedJob`.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="simulation_runs",
        help_text="Who submitted it.",
    )
    scenario = models.ForeignKey(
        Scenario,
        on_delete=models.RESTRICT,
        related_name="runs",
        help_text="The scenario it runs (its document is copied into the run).",
    )
    document = models.JSONField(help_text="The scenario document as submitted.")
    progress = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="Progress of the current attempt, percent (0–100).",
    )
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Times a worker claimed the run (count)."
    )
    result = models.JSONField(
        null=True,
        blank=True,
        help_text="The result document (docs/architecture.md) once succeeded.",
    )

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [
            models.Index(fields=["owner", "-created_at"]),
            models.Index(fields=["status", "heartbeat_at"]),
        ]
        constraints = [
            ClaimedJob.status_constraint(),
            bounded("progress", nullable=False, allow_zero=True, maximum=100),
            models.CheckConstraint(
                condition=(
                    Q(
                        status=RunStatus.QUEUED,
                        finished_at__isnull=True,
                        result__isnull=True,
                    )
                    | Q(
                        status=RunStatus.RUNNING,
                        started_at__isnull=False,
                        heartbeat_at__isnull=False,
                        finished_at__isnull=True,
                        result__isnull=True,
                        attempts__gte=1,
                    )
                    | Q(
                        status=RunStatus.SUCCEEDED,
                        finished_at__isnull=False,
                        result__isnull=False,
                        progress=100,
                        attempts__gte=1,
                    )
                    | (
                        Q(
                            status=RunStatus.FAILED,
                            finished_at__isnull=False,
                            result__isnull=True,
                        )
                        & ~Q(error="")
                    )
                    | Q(
                        status=RunStatus.CANCELLED,
                        finished_at__isnull=False,
                        result__isnull=True,
                    )
                ),
                name="%(app_label)s_%(class)s_status_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Insert only: every later change is a conditional update in the services."""
        if not self._state.adding:
            raise RunImmutableError(
                "SimulationRun rows change only through simulations.runs.services (conditional "
                "updates); do not save() an existing run."
            )
        super().save(*args, **kwargs)


class RunEvent(models.Model):
    """One lifecycle event of a run (created, claimed, requeued, stored, failed, cancelled).

    Written in the same transaction as the conditional update it records, and only when
    that update changed the row, so the log shows exactly what happened — e.g. a single
    ``succeeded`` event per succeeded run even when a worker died mid-run.
    """

    run = models.ForeignKey(
        SimulationRun,
        on_delete=models.CASCADE,
        related_name="events",
        help_text="The run.",
    )
    kind = models.CharField(max_length=16, choices=RunEventKind.choices, help_text="What happened.")
    attempt = models.PositiveSmallIntegerField(
        default=0, help_text="The run's attempt number at the time (count)."
    )
    message = models.TextField(blank=True, help_text="Details (worker, error message).")
    at = models.DateTimeField(auto_now_add=True, help_text="When it happened.")

    class Meta:
        ordering = ("run", "id")
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=RunEventKind.values),
                name="%(app_label)s_%(class)s_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} (attempt {self.attempt})"
