"""Traces, workloads and scenarios: the inputs of a simulation.

Writes go through :mod:`simulations.scenarios.services`.
"""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from simulations.choices import (
    ArrivalKind,
    TraceParseStatus,
)
from simulations.core import scenario as scenario_rules
from simulations.fields import bounded, positive_float, positive_int, slug_validator
from simulations.ownership import owner_field, visibility_constraint, visibility_field

# --- workloads -----------------------------------------------------------------------------


class Trace(models.Model):
    """A request trace in the Azure LLM inference format, stored parsed.

    Uploaded as CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``); ``data`` holds the
    columns ``arrival_s`` (seconds from the first row), ``input_tokens`` and
    ``output_tokens``. Scenarios refer to a trace by its slug; which rows use it is kept in
    :class:`TraceReference` (and ``Workload.trace``), so a trace in use cannot be deleted.
    ``visibility`` says who may see and use it (:class:`TraceVisibility`).
    """

    slug = models.CharField(
        max_length=64,
        validators=[slug_validator],
        help_text="Identifier scenarios use (workload.arrival.trace).",
    )
    name = models.CharField(max_length=200, help_text="Display name.")
    source = models.TextField(
        blank=True, help_text="Where the trace comes from (dataset, commit, file)."
    )
    owner = owner_field(
        related_name="traces", help_text="Who uploaded it (empty: a built-in trace)."
    )
    visibility = visibility_field(
        help_text="Who may see and use it: its owner only, every signed-in user, or everyone "
        "as part of the built-in catalog."
    )
    # empty (NULL) until the trace is parsed: large uploads are parsed by a worker
    request_count = positive_int(
        "Rows (requests) in the trace (count); empty until parsed.",
        maximum=scenario_rules.MAX_TRACE_ROWS,
    )
    duration_s = positive_float(
        "Time from the first to the last arrival, s; empty until parsed.", allow_zero=True
    )
    data = models.JSONField(
        null=True,
        blank=True,
        help_text="Parsed columns: arrival_s (s), input_tokens, output_tokens (tokens); "
        "empty until parsed.",
    )
    parse_status = models.CharField(
        max_length=16,
        choices=TraceParseStatus.choices,
        default=TraceParseStatus.DONE,
        help_text="Parsing of the upload: large files are parsed by a worker.",
    )
    parse_error = models.TextField(
        blank=True, help_text="Why parsing failed (line and column), when it did."
    )
    parse_attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Deliveries of the parse task that claimed the trace (count)."
    )
    enqueued_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the parse task was last sent (empty: not sent yet, or the broker "
        "refused it — the reconciler sends it).",
    )
    parse_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When the current parse attempt started."
    )
    upload_text = models.TextField(
        blank=True,
        help_text="The uploaded CSV while it waits to be parsed (emptied once parsed).",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was uploaded.")

    class Meta:
        ordering = ("slug",)
        constraints = [
            models.UniqueConstraint(fields=["slug"], name="%(app_label)s_%(class)s_unique_slug"),
            visibility_constraint(),
            bounded("request_count", minimum=1, maximum=scenario_rules.MAX_TRACE_ROWS),
            bounded("duration_s", allow_zero=True),
            # a parsed trace has its columns; scenarios only ever read parsed traces
            models.CheckConstraint(
                condition=~models.Q(parse_status=TraceParseStatus.DONE)
                | models.Q(
                    request_count__isnull=False, duration_s__isnull=False, data__isnull=False
                ),
                name="%(app_label)s_%(class)s_parsed_has_data",
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.slug


class TraceReference(models.Model):
    """One row (a scenario, a sweep or a plan) using a trace by its slug in its document.

    Maintained by the services that store those rows; ``on_delete=PROTECT`` on the trace
    makes the database itself refuse to delete a trace in use, even past a racing check.
    Exactly one of ``scenario``, ``sweep`` and ``plan`` is set; deleting it drops the row.
    """

    trace = models.ForeignKey(
        Trace,
        on_delete=models.PROTECT,
        related_name="references",
        help_text="The trace used.",
    )
    scenario = models.ForeignKey(
        "simulations.Scenario",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="trace_references",
        help_text="The scenario whose document uses the trace.",
    )
    sweep = models.ForeignKey(
        "simulations.Sweep",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="trace_references",
        help_text="The sweep whose template (or an axis value) uses the trace.",
    )
    plan = models.ForeignKey(
        "simulations.Plan",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="trace_references",
        help_text="The capacity plan whose document uses the trace.",
    )

    class Meta:
        ordering = ("trace", "id")
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(scenario__isnull=False, sweep__isnull=True, plan__isnull=True)
                    | Q(scenario__isnull=True, sweep__isnull=False, plan__isnull=True)
                    | Q(scenario__isnull=True, sweep__isnull=True, plan__isnull=False)
                ),
                name="%(app_label)s_%(class)s_one_referrer",
            ),
            models.UniqueConstraint(
                fields=["trace", "scenario"], name="%(app_label)s_%(class)s_unique_scenario"
            ),
            models.UniqueConstraint(
                fields=["trace", "sweep"], name="%(app_label)s_%(class)s_unique_sweep"
            ),
            models.UniqueConstraint(
                fields=["trace", "plan"], name="%(app_label)s_%(class)s_unique_plan"
            ),
        ]

    def __str__(self) -> str:
        kind = "scenario" if self.scenario_id else "sweep" if self.sweep_id else "plan"
        row = self.scenario_id or self.sweep_id or self.plan_id
        return f"trace {self.trace_id} used by {kind} {row}"


class Workload(models.Model):
    """A reusable workload: request count, token-length distributions, arrivals and seed.

    ``input_tokens`` / ``output_tokens`` use the scenario document's shape (an integer or a
    distribution object, docs/architecture.md); :meth:`to_document` gives the scenario's
    ``workload`` object. Owned by a user, optionally shared read-only.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="workloads",
        help_text="Who owns it.",
    )
    name = models.CharField(max_length=200, help_text="Display name (unique per owner).")
    shared = models.BooleanField(default=False, help_text="Other users may read (not edit) it.")
    requests = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(scenario_rules.MAX_REQUESTS)],
        help_text=f"Requests to simulate (count, 1–{scenario_rules.MAX_REQUESTS}).",
    )
    input_tokens = models.JSONField(
        help_text="Prompt length, tokens: an integer or a distribution object "
        '(e.g. {"dist": "uniform", "low": 128, "high": 2048}).'
    )
    output_tokens = models.JSONField(
        help_text="Generated length, tokens: an integer or a distribution object."
    )
    arrival_kind = models.CharField(
        max_length=16,
        choices=ArrivalKind.choices,
        default=ArrivalKind.CLOSED,
        help_text="Arrival process.",
    )
    rate_per_s = positive_float(
        "Poisson arrival rate, requests/s (Poisson arrivals only).",
        validators=[MaxValueValidator(scenario_rules.MAX_RATE_PER_S)],
    )
    time_scale = positive_float(
        "Stretch factor for trace timestamps (2.0 = twice as slow; dimensionless).",
        null=False,
        default=1.0,
    )
    trace = models.ForeignKey(
        Trace,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="workloads",
        help_text="Trace supplying arrivals and/or token lengths.",
    )
    seed = models.BigIntegerField(
        default=0,
        validators=[MinValueValidator(0), MaxValueValidator(scenario_rules.MAX_SEED)],
        help_text="Random seed for drawing requests (integer ≥ 0).",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was created.")
    updated_at = models.DateTimeField(auto_now=True, help_text="When it last changed.")

    class Meta:
        ordering = ("owner", "name")
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], name="%(app_label)s_%(class)s_unique_name_per_owner"
            ),
            models.CheckConstraint(
                condition=Q(arrival_kind__in=ArrivalKind.values),
                name="%(app_label)s_%(class)s_arrival_valid",
            ),
            bounded("requests", nullable=False, minimum=1, maximum=scenario_rules.MAX_REQUESTS),
            bounded("rate_per_s", maximum=scenario_rules.MAX_RATE_PER_S),
            bounded("time_scale", nullable=False, maximum=scenario_rules.MAX_TIME_SCALE),
            bounded("seed", nullable=False, minimum=0, maximum=scenario_rules.MAX_SEED),
            models.CheckConstraint(
                condition=~Q(arrival_kind=ArrivalKind.POISSON) | Q(rate_per_s__isnull=False),
                name="%(app_label)s_%(class)s_poisson_has_rate",
            ),
            models.CheckConstraint(
                condition=~Q(arrival_kind=ArrivalKind.TRACE) | Q(trace__isnull=False),
                name="%(app_label)s_%(class)s_trace_arrival_has_trace",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def to_document(self) -> dict[str, Any]:
        """The scenario document's ``workload`` object for this row."""
        arrival: dict[str, Any] = {"kind": self.arrival_kind}
        if self.arrival_kind == ArrivalKind.POISSON:
            arrival["rate_per_s"] = self.rate_per_s
        elif self.arrival_kind == ArrivalKind.TRACE:
            arrival["trace"] = self.trace.slug if self.trace else None
            arrival["time_scale"] = self.time_scale
        input_tokens, output_tokens = copy.deepcopy((self.input_tokens, self.output_tokens))
        if self.trace is not None:
            for dist in (input_tokens, output_tokens):
                if isinstance(dist, dict) and dist.get("dist") == "trace":
                    dist.setdefault("trace", self.trace.slug)
        return {
            "requests": self.requests,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "arrival": arrival,
            "seed": self.seed,
        }


# --- scenarios and runs --------------------------------------------------------------------


class Scenario(models.Model):
    """A validated scenario document (docs/architecture.md) owned by a user.

    ``document`` passed :func:`simulations.core.scenario.parse_scenario` against the catalog
    when it was stored; runs re-validate it (the catalog may have changed since). ``shared``
    lets every signed-in user read (never edit) it.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="scenarios",
        help_text="Who owns it.",
    )
    name = models.CharField(max_length=200, help_text="The document's name.")
    document = models.JSONField(help_text="The scenario document (docs/architecture.md).")
    shared = models.BooleanField(default=False, help_text="Other users may read (not edit) it.")
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was created.")
    updated_at = models.DateTimeField(auto_now=True, help_text="When it last changed.")

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = [
            models.CheckConstraint(
                condition=~Q(name=""), name="%(app_label)s_%(class)s_name_not_empty"
            ),
        ]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self) -> str:
        return self.name
