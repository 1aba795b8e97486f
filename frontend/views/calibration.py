"""Calibration pages: measurement sets (list, import, rows), the
calibrate page (choose a set or upload a CSV, and a stack → fit), and a fit's page (measured
against predicted per operator and token count, the residual table, MAPE / max / hold-out,
the fitted values, and saving it as a private profile or — staff — publishing it).

The forms live here, beside the only views that use them. Writes go through
:mod:`simulations.measurements.services`, reads through its selectors (another user's
private set or fit is a 404).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from frontend.charts import chart
from frontend.charts.calibration import fit_figure
from frontend.views.common import validation_messages
from simulations.catalog.models import Device, LLMModel
from simulations.core.calibration.measurements import MAX_BYTES
from simulations.core.devices import calibrated_kinds
from simulations.measurements import selectors, services
from simulations.measurements.models import Calibration, MeasurementSet
from simulations.ownership import Visibility
from simulations.permissions import can_edit_catalog

SLUG_HELP = "Lower-case letters, digits and hyphens."


def _choice_field(form: forms.Form, name: str) -> forms.ChoiceField:
    """The form's choice field ``name`` (its choices are set per user)."""
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    return field


def _stack_choices(user: Any) -> list[tuple[str, str]]:
    """The stacks the user may see of the families the calibration fits."""
    return [
        (r.slug, f"{r.name} ({r.slug})")
        for r in selectors.runtimes_visible_to(user).filter(device_kind__in=calibrated_kinds())
    ]


class MeasurementImportForm(forms.Form):
    """A measurement CSV and what it measured (device / model default to the rows')."""

    slug = forms.SlugField(max_length=64, help_text=SLUG_HELP)
    name = forms.CharField(max_length=200, required=False)
    stack = forms.ChoiceField(help_text="The catalog stack the measured software corresponds to.")
    device = forms.ChoiceField(required=False, help_text="Empty: the device the rows name.")
    model = forms.ChoiceField(required=False, help_text="Empty: the model the rows name.")
    visibility = forms.ChoiceField(choices=Visibility.choices, initial=Visibility.PRIVATE)
    source = forms.CharField(max_length=2000, required=False)
    file = forms.FileField(
        label="Measurement CSV",
        help_text="Per-operator kernel times (op, tokens, time_ms_per_layer, …) or end-to-end "
        "points (phase, tokens, batch, kv_tokens, latency_ms, optional power_w).",
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "stack").choices = _stack_choices(user)
        _choice_field(self, "device").choices = [("", "—")] + [
            (d.slug, d.name)
            for d in Device.objects.filter(kind__in=calibrated_kinds()).order_by("slug")
        ]
        _choice_field(self, "model").choices = [("", "—")] + [
            (m.slug, m.name) for m in LLMModel.objects.order_by("slug")
        ]
        if not can_edit_catalog(user):
            _choice_field(self, "visibility").choices = [
                c for c in Visibility.choices if c[0] != Visibility.PUBLIC
            ]

    def clean_file(self) -> Any:
        f = self.cleaned_data["file"]
        if f.size > MAX_BYTES:
            raise ValidationError(f"At most {MAX_BYTES} bytes.")
        return f


class CalibrateForm(forms.Form):
    """What to fit: a set the user may see, or an uploaded CSV (stored as a private set)."""

    measurement_set = forms.ChoiceField(required=False, label="Measurement set")
    file = forms.FileField(required=False, label="…or upload a CSV")
    upload_slug = forms.SlugField(
        max_length=64, required=False, label="Slug of the uploaded set", help_text=SLUG_HELP
    )
    stack = forms.ChoiceField(
        required=False, help_text="The stack to fit (empty: the set's own stack)."
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "measurement_set").choices = [("", "—")] + [
            (m.slug, f"{m.name} ({m.device.slug}, {m.llm.slug}, {m.row_count} rows)")
            for m in selectors.measurement_sets_visible_to(user).defer("rows")
        ]
        _choice_field(self, "stack").choices = [("", "—"), *_stack_choices(user)]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        has_set, has_file = bool(data.get("measurement_set")), data.get("file") is not None
        if has_set == has_file:
            raise ValidationError("Choose a measurement set or upload a CSV (one).")
        if has_file:
            if not data.get("upload_slug"):
                self.add_error("upload_slug", "Name the uploaded set.")
            if not data.get("stack"):
                self.add_error("stack", "Name the stack the upload measured.")
            if data["file"].size > MAX_BYTES:
                self.add_error("file", f"At most {MAX_BYTES} bytes.")
        return data


class SaveProfileForm(forms.Form):
    """Save a fit as a runtime profile."""

    slug = forms.SlugField(max_length=64, help_text=SLUG_HELP)
    name = forms.CharField(max_length=200, required=False)
    publish = forms.BooleanField(
        required=False, help_text="Publish to the catalog for every user (staff only)."
    )


def _form_errors(form: forms.Form, exc: ValidationError, file_field: str = "file") -> None:
    for key, msgs in validation_messages(exc).items():
        target = file_field if key == "text" else (key if key in form.fields else None)
        for m in msgs:
            form.add_error(target, m)


def _index(
    request: HttpRequest,
    *,
    import_form: MeasurementImportForm | None = None,
    calibrate_form: CalibrateForm | None = None,
    status: int = 200,
) -> HttpResponse:
    user = request.user
    return render(
        request,
        "frontend/calibration/index.html",
        {
            "sets": list(selectors.measurement_sets_visible_to(user).defer("rows")),
            "calibrations": list(selectors.calibrations_of(user).defer("report")[:20]),
            "import_form": import_form or MeasurementImportForm(user=user),
            "calibrate_form": calibrate_form or CalibrateForm(user=user),
            "max_fit_rows": services.MAX_FIT_ROWS,
        },
        status=status,
    )


@login_required
def calibrate(request: HttpRequest) -> HttpResponse:
    """GET: the sets the user may see, their fits, and the import and calibrate forms.
    POST: fit (synchronously: the service bounds the set's size) → the fit's page."""
    if request.method != "POST":
        return _index(request)
    form = CalibrateForm(request.POST, request.FILES, user=request.user)
    if form.is_valid():
        d = form.cleaned_data
        try:
            if d.get("file") is not None:
                mset = services.measurement_set_import(
                    slug=d["upload_slug"],
                    name=d["upload_slug"],
                    text=d["file"].read(),
                    stack=d["stack"],
                    owner=request.user,
                )
            else:
                mset = selectors.measurement_set_get_for(request.user, d["measurement_set"])
            cal = services.calibration_run(
                owner=request.user, measurement_set=mset, stack=d.get("stack") or None
            )
        except ValidationError as exc:
            _form_errors(form, exc)
        except MeasurementSet.DoesNotExist:
            form.add_error("measurement_set", "No such measurement set.")
        else:
            return redirect("frontend:calibration_detail", pk=cal.pk)
    return _index(request, calibrate_form=form, status=400)


@login_required
@require_POST
def measurement_import(request: HttpRequest) -> HttpResponse:
    """Store an uploaded measurement set (all rows or none)."""
    form = MeasurementImportForm(request.POST, request.FILES, user=request.user)
    if form.is_valid():
        d = form.cleaned_data
        try:
            mset = services.measurement_set_import(
                slug=d["slug"],
                name=d["name"] or d["slug"],
                text=d["file"].read(),
                stack=d["stack"],
                device=d["device"] or None,
                model=d["model"] or None,
                owner=request.user,
                visibility=d["visibility"],
                source=d["source"],
            )
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, f"Stored “{mset.slug}” ({mset.row_count} rows).")
            return redirect("frontend:measurement_detail", slug=mset.slug)
    return _index(request, import_form=form, status=400)


@login_required
def measurement_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """A measurement set: what it measured and its rows."""
    try:
        mset = selectors.measurement_set_get_for(request.user, slug)
    except MeasurementSet.DoesNotExist:
        raise Http404("no such measurement set") from None
    return render(
        request,
        "frontend/calibration/measurement_detail.html",
        {"set": mset, "rows": mset.rows},
    )


def _calibration_or_404(user: Any, pk: int) -> Calibration:
    try:
        return selectors.calibration_get_for(user, pk)
    except Calibration.DoesNotExist:
        raise Http404("no such calibration") from None


def _render_fit(
    request: HttpRequest, cal: Calibration, form: SaveProfileForm | None = None, status: int = 200
) -> HttpResponse:
    report = cal.report
    return render(
        request,
        "frontend/calibration/detail.html",
        {
            "cal": cal,
            "report": report,
            "chart": chart("calibration-fit", fit_figure(report)),
            "parameters": sorted(
                report["parameters"].items(), key=lambda kv: (not kv[1]["fitted"], kv[0])
            ),
            "form": form
            or SaveProfileForm(initial={"slug": f"{cal.base_runtime.slug}-{cal.pk}"[:64]}),
            "can_publish": can_edit_catalog(request.user),
        },
        status=status,
    )


@login_required
def calibration_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A fit: the chart, residuals, errors, fitted values and the save form."""
    return _render_fit(request, _calibration_or_404(request.user, pk))


@login_required
@require_POST
def calibration_save(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the fit as a profile: private, or published to the catalog (staff only)."""
    cal = _calibration_or_404(request.user, pk)
    form = SaveProfileForm(request.POST)
    if form.is_valid():
        d = form.cleaned_data
        try:
            profile = services.calibration_save_profile(
                calibration=cal,
                user=request.user,
                slug=d["slug"],
                name=d["name"],
                publish=d["publish"],
            )
        except PermissionDenied as exc:
            form.add_error("publish", str(exc))
            return _render_fit(request, cal, form, status=403)
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            where = "published to the catalog" if d["publish"] else "saved (private to you)"
            messages.success(
                request,
                f"Runtime profile “{profile.slug}” {where}; name it as a device's runtime "
                "in a scenario.",
            )
            return redirect("frontend:calibration_detail", pk=cal.pk)
    return _render_fit(request, cal, form, status=400)
