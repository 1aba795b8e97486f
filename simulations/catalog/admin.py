"""Admin for the catalog: staff maintain devices (their memory tiers inline and their
family's parameters as form fields), runtime profiles and models (also imported from a
Hugging Face ``config.json``). Registered by :mod:`simulations.admin`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from simulations.catalog import services as catalog_services
from simulations.catalog.models import Device, LLMModel, MemoryTier, RuntimeProfile
from simulations.core.devices import CONTAINER_KINDS, device_kinds
from simulations.device_families import kind_label, param_schema, params_errors
from simulations.permissions import can_edit_catalog


class CatalogEditorAdmin(admin.ModelAdmin):
    """Writes to a shared catalog table need :func:`can_edit_catalog` (the rule the API and
    the pages apply) on top of Django's model permissions."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return can_edit_catalog(request.user) and super().has_add_permission(request, *args)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_edit_catalog(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_edit_catalog(request.user) and super().has_delete_permission(request, obj)


class MemoryTierFormSet(BaseInlineFormSet):
    """A device other than a container (a SoC) needs at least one memory tier (its local
    memory)."""

    def clean(self) -> None:
        super().clean()
        kept = [f for f in self.forms if f.cleaned_data and not f.cleaned_data.get("DELETE", False)]
        if not kept and self.instance.kind not in CONTAINER_KINDS:
            raise ValidationError("A device needs at least one memory tier (its local memory).")


class MemoryTierInline(admin.TabularInline):
    """Memory tiers edited on the device page; order 0 is the local memory."""

    model = MemoryTier
    formset = MemoryTierFormSet
    extra = 0
    fields = ("order", "kind", "capacity_gb", "bw_gbps")


#: Prefix of the admin form's parameter fields: ``param:<kind>:<name>``.
PARAM_FIELD_PREFIX = "param:"


def param_field_name(kind: str, name: str) -> str:
    """The admin form field of parameter ``name`` of ``kind`` devices."""
    return f"{PARAM_FIELD_PREFIX}{kind}:{name}"


class IntListField(forms.CharField):
    """A list of integers typed as ``512, 1024, 2048`` (a list parameter)."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return ", ".join(str(v) for v in value)
        return value

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text or not text.strip():
            return None
        try:
            return [int(part) for part in text.replace(";", ",").split(",") if part.strip()]
        except ValueError:
            raise ValidationError("Enter whole numbers separated by commas.") from None


def _param_form_field(kind: str, entry: dict[str, Any]) -> forms.Field:
    """A form field rendering one declared parameter: label, unit, bounds and help text all
    from the family's schema."""
    help_text = entry["help"]
    bounds = []
    if "minimum" in entry:
        bounds.append(f"{'>' if entry.get('exclusive_minimum') else '≥'} {entry['minimum']:g}")
    if "maximum" in entry:
        bounds.append(f"≤ {entry['maximum']:g}")
    if bounds:
        help_text += f" ({', '.join(bounds)})"
    if entry.get("required"):
        help_text += f"; required for {kind_label(kind)} devices"
    elif entry.get("default") not in (None, []):
        help_text += f"; default {entry['default']}"
    common: dict[str, Any] = {"required": False, "label": entry["label"], "help_text": help_text}
    if entry["type"] == "int":
        return forms.IntegerField(**common)
    if entry["type"] == "float":
        return forms.FloatField(**common)
    if entry["type"] == "bool":
        return forms.NullBooleanField(**common)
    if entry["type"] == "list":
        return IntListField(**common)
    if entry.get("choices"):
        return forms.ChoiceField(choices=[("", "—")] + [(c, c) for c in entry["choices"]], **common)
    return forms.CharField(**common)


class DeviceAdminForm(forms.ModelForm):
    """The device form with a field per parameter the device families declare (made from
    their schemas, :func:`simulations.device_families.param_schema`): the chosen kind's
    fields become ``params``, checked as the model checks them; a value typed into another
    kind's field is an error, not silently dropped."""

    class Meta:
        model = Device
        exclude = ("params",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance_kind = self.instance.kind if self.instance.pk is not None else None
        kinds = [instance_kind] if instance_kind else device_kinds()
        for kind in kinds:
            for entry in param_schema(kind):
                name = param_field_name(kind, entry["name"])
                self.fields[name] = _param_form_field(kind, entry)
                if kind == instance_kind and entry["name"] in (self.instance.params or {}):
                    self.initial[name] = self.instance.params[entry["name"]]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns, typed as such
        kind = data.get("kind") or self.instance.kind
        params: dict[str, Any] = {}
        for name in self.fields:
            if not name.startswith(PARAM_FIELD_PREFIX) or data.get(name) in (None, "", []):
                continue
            field_kind, param = name[len(PARAM_FIELD_PREFIX) :].split(":", 1)
            if field_kind != kind:
                self.add_error(name, f"{kind_label(kind)} devices do not take this parameter.")
            else:
                params[param] = data[name]
        if not kind:
            return data  # the kind field reports it
        for key, message in params_errors(kind, params).items():
            field = param_field_name(kind, key.removeprefix("params."))
            self.add_error(field if field in self.fields else None, message)
        self.instance.params = params
        return data

    def _update_errors(self, errors: ValidationError) -> None:
        # the model's own check names ``params.<name>``: shown on that parameter's field
        if hasattr(errors, "error_dict"):
            kind = self.cleaned_data.get("kind") or self.instance.kind
            remapped: dict[str, list[Any]] = {}
            for key, messages in errors.error_dict.items():
                if key == "params" or key.startswith("params."):
                    field = param_field_name(kind, key.removeprefix("params."))
                    if self.has_error(field):
                        continue  # clean() reported it already
                    key = field if field in self.fields else NON_FIELD_ERRORS
                remapped.setdefault(key, []).extend(messages)
            errors = ValidationError(remapped)
        super()._update_errors(errors)  # type: ignore[misc]  # private in django-stubs


@admin.register(Device)
class DeviceAdmin(CatalogEditorAdmin):
    """Devices: datasheet facts with a source for every number."""

    form = DeviceAdminForm
    inlines = [MemoryTierInline]
    list_display = (
        "slug",
        "name",
        "kind",
        "vendor",
        "fp16_tflops",
        "int8_tops",
        "memory_summary",
        "tdp_w",
        "price_usd",
    )
    list_filter = ("kind", "vendor")
    search_fields = ("slug", "name", "vendor")
    autocomplete_fields = ("parent",)
    fieldsets = (
        (None, {"fields": ("slug", "name", "kind", "vendor", "parent")}),
        (
            "Peak dense compute",
            {"fields": ("fp16_tflops", "bf16_tflops", "fp32_tflops", "int8_tops", "int4_tops")},
        ),
        ("Power and price", {"fields": ("tdp_w", "idle_w", "typical_w", "price_usd")}),
        (
            "Host link",
            {
                "fields": (
                    "host_link_kind",
                    "host_link_bw_gbps",
                    "host_link_latency_us",
                    "host_link_pcie_gen",
                    "host_link_lanes",
                )
            },
        ),
        (
            "Peer link",
            {
                "fields": (
                    "peer_link_kind",
                    "peer_link_bw_gbps",
                    "peer_link_latency_us",
                    "peer_link_pcie_gen",
                    "peer_link_lanes",
                )
            },
        ),
        ("Sources and notes", {"fields": ("sources", "notes")}),
    )

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """The fixed fieldsets, then one per device family that declares parameters (the
        family's own on a device's page; every family's on the add page, only the chosen
        kind's being kept)."""
        fieldsets = list(super().get_fieldsets(request, obj))
        kinds = [obj.kind] if obj is not None and obj.kind else device_kinds()
        extra = []
        for kind in kinds:
            names = tuple(param_field_name(kind, p["name"]) for p in param_schema(kind))
            if names:
                classes = () if obj is not None else ("collapse",)
                extra.append(
                    (f"{kind_label(kind)} parameters", {"classes": classes, "fields": names})
                )
        return [*fieldsets[:-1], *extra, fieldsets[-1]]

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any
    ) -> Any:
        # the parameter fields are made by the form itself (per family): leave them out of
        # the model form's field list
        kw["fields"] = [
            f
            for f in flatten_fieldsets(self.get_fieldsets(request, obj))
            if not f.startswith(PARAM_FIELD_PREFIX)
        ]
        return super().get_form(request, obj, change, **kw)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Device]:
        return super().get_queryset(request).prefetch_related("memory_tiers")

    @admin.display(description="Memory")
    def memory_summary(self, obj: Device) -> str:
        return " + ".join(str(t) for t in obj.memory_tiers.all()) or "—"


@admin.register(RuntimeProfile)
class RuntimeProfileAdmin(CatalogEditorAdmin):
    """Runtime profiles: fitted software behaviour, one per stack."""

    list_display = (
        "slug",
        "name",
        "device_kind",
        "weight_bits",
        "act_bits",
        "kv_bits",
        "compute_eff",
        "bw_eff",
        "default_for_kind",
        "visibility",
        "owner",
    )
    list_filter = ("device_kind", "default_for_kind", "visibility")
    search_fields = ("slug", "name")


class HfImportForm(forms.Form):
    """A Hugging Face config.json, pasted or uploaded, with the slug and name to store."""

    slug = forms.CharField(max_length=64, help_text="e.g. llama2-7b")
    name = forms.CharField(max_length=200, help_text="e.g. LLaMA-2 7B")
    origin = forms.CharField(
        max_length=200,
        required=False,
        help_text="Where the file comes from (e.g. meta-llama/Llama-2-7b-hf).",
    )
    config_text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 16, "cols": 80}),
        required=False,
        label="config.json (paste)",
    )
    config_file = forms.FileField(required=False, label="config.json (upload)")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns, typed as such
        upload = data.get("config_file")
        if upload is not None:
            data["config"] = upload.read(1024 * 1024 + 1)
        elif data.get("config_text"):
            data["config"] = data["config_text"]
        else:
            raise ValidationError("Paste or upload a config.json.")
        return data


@admin.register(LLMModel)
class LLMModelAdmin(CatalogEditorAdmin):
    """LLM models: shapes, importable from a Hugging Face config.json."""

    change_list_template = "admin/simulations/llmmodel/change_list.html"
    list_display = (
        "slug",
        "name",
        "n_layers",
        "hidden_size",
        "n_heads",
        "n_kv_heads",
        "ffn_size",
        "ffn_kind",
        "vocab_size",
    )
    list_filter = ("ffn_kind", "tied_embeddings")
    search_fields = ("slug", "name")

    def get_urls(self) -> list[URLPattern]:
        extra = [
            path(
                "import-hf/",
                self.admin_site.admin_view(self.import_hf_view),
                name="simulations_llmmodel_import_hf",
            )
        ]
        return extra + super().get_urls()

    def import_hf_view(self, request: HttpRequest) -> HttpResponse:
        """Import (create or update) a model from a Hugging Face config.json."""
        if not self.has_add_permission(request) or not self.has_change_permission(request):
            raise PermissionDenied
        form = HfImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            origin = form.cleaned_data["origin"] or "Hugging Face config.json"
            try:
                row = catalog_services.hf_model_import(
                    config=form.cleaned_data["config"],
                    slug=form.cleaned_data["slug"],
                    name=form.cleaned_data["name"],
                    origin=f"{origin} config.json" if form.cleaned_data["origin"] else origin,
                )
            except ValidationError as exc:
                for key, errors in exc.message_dict.items():
                    target = key if key in ("slug", "name") else None
                    for error in errors:
                        form.add_error(target, f"{key}: {error}" if target is None else error)
            else:
                self.message_user(request, f"Imported {row.slug}.", messages.SUCCESS)
                return HttpResponseRedirect(
                    reverse("admin:simulations_llmmodel_change", args=[row.pk])
                )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "title": "Import a model from a Hugging Face config.json",
        }
        return TemplateResponse(request, "admin/simulations/llmmodel/import_hf.html", context)
