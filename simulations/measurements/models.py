"""Measurement-set and calibration rows.

Imported by :mod:`simulations.models`, so these models belong to the ``simulations`` app.
Writes go through :mod:`simulations.measurements.services`; reads through
:mod:`simulations.measurements.selectors`, which enforce ``visibility``.

*Rows as one validated JSON document, not a row table.* A measurement set is only ever used
whole: a fit reads every row, the page shows the whole table, and a set is never edited row
by row (re-import to change one). The core's parser
(:func:`simulations.core.calibration.measurements.parse_measurements`) is the one validator,
and ``rows`` holds exactly its :class:`~simulations.core.calibration.measurements.MeasurementRow`
fields, so the fit rebuilds the core set without a second schema to keep in step with the
core's columns; importing up to 20 000 rows is one INSERT, and a set is stored whole or
not at all.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from simulations.core.calibration.measurements import MeasurementFormat as CoreFormat
from simulations.core.calibration.measurements import MeasurementRow as CoreRow
from simulations.core.calibration.measurements import MeasurementSet as CoreSet
from simulations.ownership import owner_field, visibility_constraint, visibility_field

#: The catalog's slug rule (as ``simulations.models.slug_validator``, which this module
#: cannot import: ``simulations.models`` imports it).
SLUG = RegexValidator(
    re.compile(r"^[a-z0-9][a-z0-9._-]*\Z"),
    "Use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit.",
)


class MeasurementFormat(models.TextChoices):
    """The two row layouts (values mirror the core's MeasurementFormat)."""

    OPERATORS = CoreFormat.OPERATORS.value, "Per-operator kernel times"
    END_TO_END = CoreFormat.END_TO_END.value, "End-to-end points (prefill / decode latency)"


class MeasurementSet(models.Model):
    """Measurements of one serving stack running one model on one device.

    ``rows`` is the parsed file (the core's row fields, one object per row, with the CSV
    line each came from); ``device``, ``llm`` and ``runtime`` are what every row measured.
    """

    slug = models.CharField(
        max_length=64,
        validators=[SLUG],
        help_text="Identifier (a runtime profile's calibration names it).",
    )
    name = models.CharField(max_length=200, help_text="Display name.")
    owner = owner_field(
        related_name="measurement_sets", help_text="Who imported it (empty: a built-in set)."
    )
    visibility = visibility_field(
        help_text="Who may see and fit it: its owner only, every signed-in user, or everyone "
        "as part of the catalog."
    )
    device = models.ForeignKey(
        "simulations.Device",
        on_delete=models.PROTECT,
        related_name="measurement_sets",
        help_text="The device measured.",
    )
    llm = models.ForeignKey(
        "simulations.LLMModel",
        on_delete=models.PROTECT,
        related_name="measurement_sets",
        help_text="The model measured.",
    )
    runtime = models.ForeignKey(
        "simulations.RuntimeProfile",
        on_delete=models.PROTECT,
        related_name="measurement_sets",
        help_text="The catalog stack the measured software corresponds to (what a fit refines).",
    )
    precision = models.CharField(
        max_length=32, help_text="Precision measured (fp16, bf16, w4a16, …)."
    )
    tensor_parallel = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(1024)],
        help_text="Tensor-parallel degree of the measured runs (count; fits need 1).",
    )
    format = models.CharField(
        max_length=16, choices=MeasurementFormat.choices, help_text="Row layout."
    )
    source = models.TextField(blank=True, help_text="Where the figures come from.")
    notes = models.TextField(blank=True, help_text="Free-text remarks.")
    rows = models.JSONField(
        help_text="The parsed rows: line, phase, op, tokens, batch, kv_tokens, time_ms, "
        "power_w, source (and the row's device, model, stack, precision, tp)."
    )
    row_count = models.PositiveIntegerField(help_text="Rows in the set (count).")
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was imported.")
    updated_at = models.DateTimeField(auto_now=True, help_text="When it last changed.")

    class Meta:
        ordering = ("slug",)
        constraints = [
            models.UniqueConstraint(fields=["slug"], name="%(app_label)s_%(class)s_unique_slug"),
            visibility_constraint(),
            models.CheckConstraint(
                condition=Q(format__in=MeasurementFormat.values),
                name="%(app_label)s_%(class)s_format_valid",
            ),
            models.CheckConstraint(
                condition=Q(row_count__gte=1), name="%(app_label)s_%(class)s_has_rows"
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.slug

    def to_core(self) -> CoreSet:
        """The core's MeasurementSet of these rows (named by the slug)."""
        return CoreSet(
            self.slug,
            CoreFormat(self.format),
            tuple(CoreRow(**row) for row in self.rows),
        )


class Calibration(models.Model):
    """One fit of a stack to a measurement set: the fit's report (the calibration document
    of ``docs/architecture.md``) and, once saved, the runtime profile it became."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="calibrations",
        help_text="Who ran the fit.",
    )
    measurement_set = models.ForeignKey(
        MeasurementSet,
        on_delete=models.CASCADE,
        related_name="calibrations",
        help_text="The measurements fitted.",
    )
    base_runtime = models.ForeignKey(
        "simulations.RuntimeProfile",
        on_delete=models.PROTECT,
        related_name="calibrations",
        help_text="The stack whose parameters were fitted (its structure and kept values).",
    )
    report = models.JSONField(
        help_text="The calibration document: parameters, rows (measured, predicted, error), "
        "MAPE, max and hold-out errors, notes."
    )
    mape = models.FloatField(null=True, blank=True, help_text="MAPE (fraction).")
    holdout_mape = models.FloatField(null=True, blank=True, help_text="Hold-out MAPE (fraction).")
    profile = models.ForeignKey(
        "simulations.RuntimeProfile",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The runtime profile the fit was saved as (empty: not saved).",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When the fit ran.")

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.base_runtime_id} fitted to {self.measurement_set_id}"

    @property
    def fitted_values(self) -> dict[str, Any]:
        """The values the rows determined (name → value)."""
        return {
            name: p["value"]
            for name, p in (self.report.get("parameters") or {}).items()
            if p.get("fitted")
        }
