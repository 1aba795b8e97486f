"""Sweep rows: the sweep, its chunks (units of work for the workers) and one result row per
configuration.

Imported by :mod:`simulations.models`, so these models belong to the ``simulations`` app.
Writes go through :mod:`simulations.sweeps.services`:

* :class:`Sweep` holds the template, the axes and two counters (configurations recorded as
  succeeded / failed) updated in the same transaction as each result row; the finaliser
  moves it to ``finished`` once the counters reach ``total``.
* :class:`SweepChunk` is a contiguous range of configuration indexes sent as one Celery
  task; its ``attempts`` counts deliveries (at most ``HETPLANNER_MAX_ATTEMPTS``) and its
  heartbeat lets the reconciler re-queue chunks whose worker died.
* :class:`SweepResult` is unique on (sweep, index): a configuration is recorded exactly
  once however often its chunk is delivered.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from simulations.jobs import ChunkJob, Job


class SweepStatus(models.TextChoices):
    """Lifecycle of a sweep: queued → running → finished / cancelled (final)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    CANCELLED = "cancelled", "Cancelled"


SWEEP_ACTIVE_STATUSES = (SweepStatus.QUEUED, SweepStatus.RUNNING)


class ConfigurationStatus(models.TextChoices):
    """Outcome of one configuration."""

    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class Sweep(Job):
    """A scenario template and parameter axes, expanded into ``total`` configurations."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="sweeps",
        help_text="Who submitted it.",
    )
    name = models.CharField(max_length=200, help_text="Display name.")
    template = models.JSONField(
        help_text="The scenario document the axes vary (docs/architecture.md)."
    )
    axes = models.JSONField(
        help_text='Swept parameters: [{"name", "path", "values"}], last axis varying fastest.'
    )
    total = models.PositiveIntegerField(help_text="Configurations (product of the axis lengths).")
    chunk_size = models.PositiveIntegerField(help_text="Configurations per chunk task (count).")
    succeeded_count = models.PositiveIntegerField(
        default=0, help_text="Configurations recorded as succeeded (count)."
    )
    failed_count = models.PositiveIntegerField(
        default=0, help_text="Configurations recorded as failed (count)."
    )
    status = models.CharField(
        max_length=16,
        choices=SweepStatus.choices,
        default=SweepStatus.QUEUED,
        help_text="Lifecycle state.",
    )
    summary = models.JSONField(
        null=True, blank=True, help_text="Written by the finaliser: counts and best configurations."
    )
    started_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker started its first chunk."
    )

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["owner", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=SweepStatus.values),
                name="%(app_label)s_%(class)s_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(total__gte=1, chunk_size__gte=1),
                name="%(app_label)s_%(class)s_sizes_positive",
            ),
            models.CheckConstraint(
                condition=Q(succeeded_count__lte=F("total") - F("failed_count")),
                name="%(app_label)s_%(class)s_counts_within_total",
            ),
            models.CheckConstraint(
                condition=(
                    Q(status__in=SWEEP_ACTIVE_STATUSES, finished_at__isnull=True)
                    | Q(
                        status=SweepStatus.FINISHED,
                        finished_at__isnull=False,
                        summary__isnull=False,
                        succeeded_count=F("total") - F("failed_count"),
                    )
                    | Q(status=SweepStatus.CANCELLED, finished_at__isnull=False)
                ),
                name="%(app_label)s_%(class)s_status_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"sweep {self.pk} ({self.status})"

    @property
    def recorded(self) -> int:
        """Configurations recorded so far (succeeded or failed)."""
        return self.succeeded_count + self.failed_count

    @property
    def progress(self) -> int:
        """Percent of the configurations recorded (0–100)."""
        return 100 * self.recorded // self.total if self.total else 0

    @property
    def is_final(self) -> bool:
        """Whether the sweep reached a state it never leaves."""
        return self.status in (SweepStatus.FINISHED, SweepStatus.CANCELLED)

    @property
    def status_label(self) -> str:
        """The status in the words runs and plans use: a finished sweep whose
        configurations all succeeded reads "Succeeded", one with failures says how many."""
        if self.status == SweepStatus.FINISHED:
            if self.failed_count:
                return f"Finished, {self.failed_count} of {self.total} failed"
            return "Succeeded"
        return str(self.get_status_display())


class SweepChunk(ChunkJob):
    """Configurations ``start`` ≤ index < ``stop`` of a sweep, run by one Celery task."""

    sweep = models.ForeignKey(
        Sweep, on_delete=models.CASCADE, related_name="chunks", help_text="The sweep."
    )
    number = models.PositiveIntegerField(help_text="Position among the sweep's chunks.")
    start = models.PositiveIntegerField(help_text="First configuration index (inclusive).")
    stop = models.PositiveIntegerField(help_text="Last configuration index (exclusive).")

    class Meta(ChunkJob.Meta):
        ordering = ("sweep", "number")
        constraints = [
            models.UniqueConstraint(
                fields=["sweep", "number"], name="%(app_label)s_%(class)s_unique_number"
            ),
            models.CheckConstraint(
                condition=Q(stop__gt=F("start")), name="%(app_label)s_%(class)s_range_nonempty"
            ),
            ChunkJob.status_constraint(),
        ]

    def __str__(self) -> str:
        return f"chunk {self.number} [{self.start}, {self.stop}) of sweep {self.sweep_id}"


class SweepResult(models.Model):
    """The outcome of one configuration of a sweep (recorded exactly once)."""

    sweep = models.ForeignKey(
        Sweep, on_delete=models.CASCADE, related_name="results", help_text="The sweep."
    )
    index = models.PositiveIntegerField(help_text="Configuration index (0 … total − 1).")
    parameters = models.JSONField(help_text="Axis name → value of this configuration.")
    status = models.CharField(
        max_length=16, choices=ConfigurationStatus.choices, help_text="Outcome."
    )
    result = models.JSONField(
        null=True,
        blank=True,
        help_text="Per-system metrics of the result document when succeeded.",
    )
    error = models.TextField(blank=True, help_text="Why it failed (empty otherwise).")
    attempt = models.PositiveSmallIntegerField(
        default=1, help_text="The chunk attempt that recorded it (count)."
    )
    worker = models.CharField(max_length=200, blank=True, help_text="Worker that recorded it.")
    recorded_at = models.DateTimeField(auto_now_add=True, help_text="When it was recorded.")

    class Meta:
        ordering = ("sweep", "index")
        constraints = [
            models.UniqueConstraint(
                fields=["sweep", "index"], name="%(app_label)s_%(class)s_unique_configuration"
            ),
            models.CheckConstraint(
                condition=(
                    Q(status=ConfigurationStatus.SUCCEEDED, result__isnull=False)
                    | (Q(status=ConfigurationStatus.FAILED, result__isnull=True) & ~Q(error=""))
                ),
                name="%(app_label)s_%(class)s_status_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"configuration {self.index} of sweep {self.sweep_id} ({self.status})"
