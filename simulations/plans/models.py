"""Plan rows: the capacity search job, its confirmation chunks and one result row
per confirmed configuration.

Imported by :mod:`simulations.models`, so these models belong to the ``simulations`` app.
Writes go through :mod:`simulations.plans.services`.

A plan moves through *stages*: ``screen`` (one task runs the analytic screen and picks the
first round), then alternating ``confirm`` (the round's configurations, split into
:class:`PlanChunk` tasks fanned out over the workers, each configuration recorded once in
:class:`PlanResult` while ``round_done`` counts them) and ``decide`` (one task reads every
result, picks the next round or, when nothing more is needed, runs the load sensitivity
and stores the result document). The single-task stages are claimed like runs:
``stage_status`` queued → running by a conditional UPDATE that counts ``stage_attempts``
(at most ``HETPLANNER_MAX_ATTEMPTS`` per stage), with a heartbeat.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import F, Q

from simulations.choices import RunStatus
from simulations.jobs import ChunkJob, ClaimedJob


class PlanStage(models.TextChoices):
    """What a running plan is doing."""

    SCREEN = "screen", "Screening the space"
    CONFIRM = "confirm", "Confirming a round on the engine"
    DECIDE = "decide", "Choosing the next round or finishing"


class StageStatus(models.TextChoices):
    """Whether the current single-task stage (screen, decide) waits for or has a worker."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"


class Plan(ClaimedJob):
    """A capacity search: the plan document, where the search is, and its result.

    The lifecycle columns it shares with a run come from :class:`~simulations.jobs.ClaimedJob`;
    ``worker``, ``enqueued_at`` and ``heartbeat_at`` are its current screen or decide
    stage's (its confirmation chunks keep their own).
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="plans",
        help_text="Who submitted it.",
    )
    name = models.CharField(max_length=200, help_text="The document's name.")
    document = models.JSONField(help_text="The plan document as submitted.")
    stage = models.CharField(
        max_length=16,
        choices=PlanStage.choices,
        default=PlanStage.SCREEN,
        help_text="Current stage of the search.",
    )
    stage_status = models.CharField(
        max_length=16,
        choices=StageStatus.choices,
        default=StageStatus.QUEUED,
        help_text="Whether the screen/decide task of the stage waits or runs.",
    )
    stage_attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Deliveries of the current screen/decide task (count)."
    )
    round = models.PositiveIntegerField(default=0, help_text="Confirmation rounds started.")
    round_total = models.PositiveIntegerField(
        default=0, help_text="Configurations in the current round (count)."
    )
    round_done = models.PositiveIntegerField(
        default=0, help_text="Configurations of the current round recorded (count)."
    )
    confirmed = models.PositiveIntegerField(
        default=0, help_text="Configurations confirmed by the engine so far (count)."
    )
    admitted = models.PositiveIntegerField(
        default=0, help_text="Configurations that satisfy the constraints (count)."
    )
    survivors = models.PositiveIntegerField(
        default=0, help_text="Configurations that passed the screen (count)."
    )
    progress = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="Progress of the search, percent (0–100), as of the stage's last report.",
    )
    round_progress_end = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="Progress, percent, once the current round is recorded (the selector "
        "interpolates with round_done / round_total while the round runs).",
    )
    result = models.JSONField(
        null=True, blank=True, help_text="The plan's result document once succeeded."
    )

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [
            models.Index(fields=["owner", "-created_at"]),
            models.Index(fields=["status", "stage", "heartbeat_at"]),
        ]
        constraints = [
            ClaimedJob.status_constraint(),
            models.CheckConstraint(
                condition=Q(stage__in=PlanStage.values, stage_status__in=StageStatus.values),
                name="%(app_label)s_%(class)s_stage_valid",
            ),
            models.CheckConstraint(
                condition=Q(progress__lte=100), name="%(app_label)s_%(class)s_progress_range"
            ),
            models.CheckConstraint(
                condition=Q(round_done__lte=F("round_total")),
                name="%(app_label)s_%(class)s_round_within_total",
            ),
            models.CheckConstraint(
                condition=(
                    Q(status=RunStatus.QUEUED, finished_at__isnull=True, result__isnull=True)
                    | Q(status=RunStatus.RUNNING, finished_at__isnull=True, result__isnull=True)
                    | Q(
                        status=RunStatus.SUCCEEDED,
                        finished_at__isnull=False,
                        result__isnull=False,
                        progress=100,
                    )
                    | (
                        Q(status=RunStatus.FAILED, finished_at__isnull=False, result__isnull=True)
                        & ~Q(error="")
                    )
                    | Q(status=RunStatus.CANCELLED, finished_at__isnull=False, result__isnull=True)
                ),
                name="%(app_label)s_%(class)s_status_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"plan {self.pk} ({self.status})"


class PlanChunk(ChunkJob):
    """Some configurations of one confirmation round, simulated by one Celery task."""

    plan = models.ForeignKey(
        Plan, on_delete=models.CASCADE, related_name="chunks", help_text="The plan."
    )
    round = models.PositiveIntegerField(help_text="The confirmation round (1, 2, …).")
    number = models.PositiveIntegerField(help_text="Position among the round's chunks.")
    configs = models.JSONField(
        help_text="The configurations to simulate (planner configuration dicts, with keys)."
    )

    class Meta(ChunkJob.Meta):
        ordering = ("plan", "round", "number")
        constraints = [
            models.UniqueConstraint(
                fields=["plan", "round", "number"], name="%(app_label)s_%(class)s_unique_number"
            ),
            ChunkJob.status_constraint(),
        ]

    def __str__(self) -> str:
        return f"chunk {self.number} of round {self.round} of plan {self.plan_id}"


class PlanResult(models.Model):
    """The engine's verdict on one configuration of a plan (recorded exactly once)."""

    plan = models.ForeignKey(
        Plan, on_delete=models.CASCADE, related_name="results", help_text="The plan."
    )
    key = models.CharField(max_length=1000, help_text="The configuration's canonical key.")
    round = models.PositiveIntegerField(help_text="The round that confirmed it.")
    feasible = models.BooleanField(help_text="Whether it meets every target in the engine.")
    capex_usd = models.FloatField(help_text="Capital cost of its devices, US dollars.")
    evaluation = models.JSONField(
        help_text="The planner's evaluation (metrics without timelines, missed targets)."
    )
    attempt = models.PositiveSmallIntegerField(
        default=1, help_text="The chunk attempt that recorded it (count)."
    )
    worker = models.CharField(max_length=200, blank=True, help_text="Worker that recorded it.")
    recorded_at = models.DateTimeField(auto_now_add=True, help_text="When it was recorded.")

    class Meta:
        ordering = ("plan", "capex_usd", "key")
        constraints = [
            models.UniqueConstraint(
                fields=["plan", "key"], name="%(app_label)s_%(class)s_unique_configuration"
            ),
            models.CheckConstraint(
                condition=Q(capex_usd__gte=0, capex_usd__lte=1e15),
                name="%(app_label)s_%(class)s_capex_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} of plan {self.plan_id}"
