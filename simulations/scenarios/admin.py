"""Admin for traces (uploaded as a CSV, parsed on validation), workloads and scenarios.
Registered by :mod:`simulations.admin`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest

from simulations.choices import TraceVisibility
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import trace_names
from simulations.scenarios import services as scenario_services
from simulations.scenarios.models import Scenario, Trace, Workload


class TraceUploadForm(forms.ModelForm):
    """A trace upload: the CSV is parsed on validation and stored as columns."""

    csv_file = forms.FileField(
        required=False,
        label="Trace CSV",
        help_text="Azure format: TIMESTAMP,ContextTokens,GeneratedTokens.",
    )

    class Meta:
        model = Trace
        fields = ("slug", "name", "source", "visibility")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["visibility"].required = False

    def clean_visibility(self) -> str:
        """Left empty: private, the default of an upload."""
        return self.cleaned_data.get("visibility") or TraceVisibility.PRIVATE

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns, typed as such
        upload = data.get("csv_file")
        if upload is None:
            if self.instance.pk is None:
                self.add_error("csv_file", "Upload the trace CSV.")
            return data
        try:
            values = scenario_services.trace_parse(
                slug=data.get("slug") or "trace",
                text=upload.read(scenario_services.MAX_TRACE_BYTES + 1),
            )
        except ValidationError as exc:
            for error in exc.message_dict.get("text", exc.messages):
                self.add_error("csv_file", error)
            return data
        for key, value in values.items():
            setattr(self.instance, key, value)
        return data


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    """Traces: uploaded Azure-format CSVs, stored parsed. A trace that scenarios, sweeps,
    plans or workloads use cannot be deleted (the admin lists what protects it)."""

    form = TraceUploadForm
    list_display = (
        "slug",
        "name",
        "visibility",
        "parse_status",
        "request_count",
        "duration_s",
        "owner",
        "created_at",
    )
    list_filter = ("visibility", "parse_status")
    search_fields = ("slug", "name")
    readonly_fields = (
        "request_count",
        "duration_s",
        "parse_status",
        "parse_error",
        "owner",
        "created_at",
    )

    def save_model(self, request: HttpRequest, obj: Trace, form: Any, change: bool) -> None:
        if not change:
            obj.owner = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)


class WorkloadForm(forms.ModelForm):
    """Checks the workload as a scenario's workload object (JSON paths in the messages)."""

    class Meta:
        model = Workload
        fields = "__all__"

    def _post_clean(self) -> None:
        # The instance holds the form's values only after ModelForm._post_clean.
        super()._post_clean()  # type: ignore[misc]  # private in django-stubs
        if self.errors:
            return
        try:
            scenario_services.workload_validate(self.instance)
        except ScenarioValidationError as exc:
            for path_, errors in exc.errors.items():
                for error in errors:
                    self.add_error(None, f"{path_}: {error}")


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    """Workloads: reusable request mixes."""

    form = WorkloadForm
    list_display = ("name", "owner", "requests", "arrival_kind", "rate_per_s", "trace", "shared")
    list_filter = ("arrival_kind", "shared")
    search_fields = ("name",)
    raw_id_fields = ("owner",)


class ScenarioForm(forms.ModelForm):
    """Validates the document against the catalog; messages carry their JSON paths."""

    class Meta:
        model = Scenario
        fields = ("owner", "document", "shared")

    def clean_document(self) -> Any:
        document = self.cleaned_data["document"]
        try:
            spec = scenario_services.scenario_validate(document)
        except ScenarioValidationError as exc:
            raise ValidationError(
                [f"{p}: {m}" for p, msgs in exc.errors.items() for m in msgs]
            ) from exc
        self.instance.name = spec.name
        return document


@admin.register(Scenario)
class ScenarioAdmin(admin.ModelAdmin):
    """Scenarios: validated documents, owned by users."""

    form = ScenarioForm
    list_display = ("name", "owner", "shared", "created_at")
    list_filter = ("shared",)
    search_fields = ("name",)
    raw_id_fields = ("owner",)

    def save_model(self, request: HttpRequest, obj: Scenario, form: Any, change: bool) -> None:
        """Save, and record the traces the document uses (as the services do), together."""
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            scenario_services.trace_references_set(trace_names(obj.document), scenario=obj)
