"""Admin: staff maintain the catalog (devices with their memory tiers inline, runtime
profiles, models — also imported from a Hugging Face ``config.json`` —, traces) and can
inspect scenarios and runs. Runs are read-only here: they change only through the services.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from simulations import services
from simulations.choices import DeviceKind, TraceVisibility
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import trace_names
from simulations.models import (
    Device,
    LLMModel,
    MemoryTier,
    RunEvent,
    RuntimeProfile,
    Scenario,
    SimulationRun,
    Trace,
    Workload,
)
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
    """A device other than a SoC needs at least one memory tier (its local memory)."""

    def clean(self) -> None:
        super().clean()
        kept = [f for f in self.forms if f.cleaned_data and not f.cleaned_data.get("DELETE", False)]
        if not kept and self.instance.kind != DeviceKind.SOC:
            raise ValidationError("A device needs at least one memory tier (its local memory).")


class MemoryTierInline(admin.TabularInline):
    """Memory tiers edited on the device page; order 0 is the local memory."""

    model = MemoryTier
    formset = MemoryTierFormSet
    extra = 0
    fields = ("order", "kind", "capacity_gb", "bw_gbps")


@admin.register(Device)
class DeviceAdmin(CatalogEditorAdmin):
    """Devices: datasheet facts with a source for every number."""

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
        (
            "FPGA",
            {
                "classes": ("collapse",),
                "fields": ("fpga_clock_mhz", "fpga_hbm_channels", "fpga_issue_cycles"),
            },
        ),
        (
            "NPU",
            {
                "classes": ("collapse",),
                "fields": ("npu_array_rows", "npu_array_cols", "npu_static_shapes"),
            },
        ),
        (
            "CPU",
            {
                "classes": ("collapse",),
                "fields": ("cpu_cores", "cpu_simd_width_bits", "cpu_clock_ghz"),
            },
        ),
        ("Sources and notes", {"fields": ("sources", "notes")}),
    )

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
    )
    list_filter = ("device_kind", "default_for_kind")
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
        data = super().clean()
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
                row = services.hf_model_import(
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
        data = super().clean()
        upload = data.get("csv_file")
        if upload is None:
            if self.instance.pk is None:
                self.add_error("csv_file", "Upload the trace CSV.")
            return data
        try:
            values = services.trace_parse(
                slug=data.get("slug") or "trace", text=upload.read(services.MAX_TRACE_BYTES + 1)
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
        super()._post_clean()
        if self.errors:
            return
        try:
            services.workload_validate(self.instance)
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
            spec = services.scenario_validate(document)
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
            services.trace_references_set(trace_names(obj.document), scenario=obj)


class RunEventInline(admin.TabularInline):
    """The run's lifecycle, read-only."""

    model = RunEvent
    extra = 0
    can_delete = False
    fields = ("at", "kind", "attempt", "message")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SimulationRun)
class SimulationRunAdmin(admin.ModelAdmin):
    """Runs, read-only (they change only through the services); staff may cancel them."""

    inlines = [RunEventInline]
    list_display = ("id", "scenario", "owner", "status", "progress", "attempts", "created_at")
    list_filter = ("status",)
    search_fields = ("scenario__name", "owner__username")
    actions = ["cancel_runs"]
    readonly_fields = (
        "owner",
        "scenario",
        "status",
        "progress",
        "attempts",
        "worker",
        "error",
        "document",
        "result",
        "created_at",
        "enqueued_at",
        "started_at",
        "heartbeat_at",
        "finished_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Cancel selected runs")
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[SimulationRun]) -> None:
        cancelled = sum(services.run_cancel(run=run, user=request.user) for run in queryset)
        self.message_user(request, f"Cancelled {cancelled} run(s).", messages.SUCCESS)
