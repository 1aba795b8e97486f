"""Rows the dashboard keeps for itself: the papers' reproduction reports.

Reproducing a paper runs many simulations (Neo's takes minutes), so the validation page
shows the last stored report per paper; ``manage.py validate_papers`` or the page's
"recompute" button (a Celery task) refreshes it.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from simulations.core.policies import papers


class ValidationReport(models.Model):
    """The reproduction document (docs/architecture.md) of one paper, as last computed."""

    class Status(models.TextChoices):
        """Whether the report is being computed, ready or failed."""

        COMPUTING = "computing", "Computing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    paper = models.CharField(
        max_length=32,
        unique=True,
        # no choices: the paper registry decides (clean), so a new paper needs no migration
        help_text="Paper key, a registered paper (simulations.core.policies.papers).",
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.COMPUTING, help_text="State."
    )
    document = models.JSONField(
        null=True, blank=True, help_text="reproduce(paper): {paper, checks: [...]}."
    )
    error = models.TextField(blank=True, help_text="Why the last computation failed.")
    seconds = models.FloatField(
        null=True, blank=True, help_text="Wall time of the last computation, s."
    )
    requested_at = models.DateTimeField(
        null=True, blank=True, help_text="When the last computation was requested."
    )
    computed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the stored document was computed."
    )

    class Meta:
        ordering = ("paper",)
        constraints = [
            models.CheckConstraint(
                condition=~Q(status="ready") | Q(document__isnull=False),
                name="frontend_validationreport_ready_has_document",
            ),
            models.CheckConstraint(
                condition=Q(seconds__isnull=True) | Q(seconds__gte=0, seconds__lte=1e7),
                name="frontend_validationreport_seconds_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.paper} ({self.status})"

    def clean(self) -> None:
        """``paper`` must be a registered paper."""
        super().clean()
        known = [p.name for p in papers()]
        if self.paper not in known:
            raise ValidationError(
                {"paper": f"Unknown paper {self.paper!r} (known: {', '.join(known)})."}
            )
