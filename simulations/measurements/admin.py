"""Admin for measurement sets (catalog data: staff import and curate them) and a read-only
view of calibrations. Registered by :mod:`simulations.admin`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from simulations.catalog.models import Device, LLMModel, RuntimeProfile
from simulations.measurements import services
from simulations.measurements.models import Calibration, MeasurementSet
from simulations.ownership import Visibility
from simulations.permissions import can_edit_catalog


class MeasurementSetImportForm(forms.ModelForm):
    """A measurement CSV (operator or end-to-end rows), parsed and checked on validation by
    the same service as the API, the page and the CLI; bad cells are listed by line and
    column and nothing is stored."""

    csv_file = forms.FileField(
        required=False,
        label="Measurement CSV",
        help_text="Per-operator kernel times or end-to-end points "
        "(simulations/core/calibration/measurements.py lists the columns).",
    )

    class Meta:
        model = MeasurementSet
        fields = ("slug", "name", "device", "llm", "runtime", "visibility", "source", "notes")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._related("device").queryset = Device.objects.order_by("slug")
        self._related("llm").queryset = LLMModel.objects.order_by("slug")
        self._related("runtime").queryset = RuntimeProfile.objects.filter(
            visibility=Visibility.PUBLIC
        ).order_by("slug")
        if self.instance.pk is not None:
            # the rows define the set: re-import to change what was measured
            for name in ("device", "llm", "runtime"):
                self.fields[name].disabled = True

    def _related(self, name: str) -> forms.ModelChoiceField[Any]:
        """The form field of the foreign key ``name`` (a ModelChoiceField)."""
        field = self.fields[name]
        assert isinstance(field, forms.ModelChoiceField)
        return field

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        upload = data.get("csv_file")
        if self.instance.pk is not None:
            if upload is not None:
                self.add_error("csv_file", "Import a new set to change its rows.")
            return data
        if upload is None:
            self.add_error("csv_file", "Upload the measurement CSV.")
            return data
        if self.errors:
            return data
        try:
            built = services.measurement_set_build(
                slug=data["slug"],
                name=data["name"],
                text=upload.read(),
                stack=data["runtime"].slug,
                device=data["device"].slug,
                model=data["llm"].slug,
                owner=None,  # set by save_model; staff may publish
                visibility=data.get("visibility") or Visibility.PUBLIC,
                source=data.get("source", ""),
                notes=data.get("notes", ""),
            )
        except ValidationError as exc:
            for key, messages in exc.message_dict.items():
                target = "csv_file" if key == "text" else key
                for message in messages:
                    self.add_error(target if target in self.fields else None, message)
            return data
        for key in ("precision", "tensor_parallel", "format", "rows", "row_count"):
            setattr(self.instance, key, getattr(built, key))
        # a form field: the instance takes it from cleaned_data (empty: the rows' source)
        data["source"] = built.source
        return data


@admin.register(MeasurementSet)
class MeasurementSetAdmin(admin.ModelAdmin):
    """Measurement sets: staff import a CSV (stored parsed, all rows or none) and choose who
    sees it; the rows themselves are read-only."""

    form = MeasurementSetImportForm
    list_display = (
        "slug",
        "name",
        "device",
        "llm",
        "runtime",
        "format",
        "row_count",
        "visibility",
        "owner",
        "created_at",
    )
    list_filter = ("visibility", "format")
    search_fields = ("slug", "name")
    readonly_fields = ("precision", "tensor_parallel", "format", "row_count", "owner", "rows")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return can_edit_catalog(request.user) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_edit_catalog(request.user) and super().has_change_permission(request, obj)

    def save_model(
        self, request: HttpRequest, obj: MeasurementSet, form: Any, change: bool
    ) -> None:
        if not change:
            obj.owner = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)


@admin.register(Calibration)
class CalibrationAdmin(admin.ModelAdmin):
    """Fits users ran (read-only: they change only through the services)."""

    list_display = ("id", "owner", "measurement_set", "base_runtime", "mape", "holdout_mape")
    readonly_fields = (
        "owner",
        "measurement_set",
        "base_runtime",
        "report",
        "mape",
        "holdout_mape",
        "profile",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
