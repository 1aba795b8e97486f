"""The catalog: ``/api/devices/`` (with ``/api/devices/kinds/``), ``/api/runtimes/`` and
``/api/models/``.

Catalog rows are shown and accepted in the catalog-record shape of
``simulations/core/data`` (spec field names, nested memory tiers and links), so a GET body
can be PUT back. Writes are validated here for types and bounds, then as core specs
(:mod:`simulations.core.catalog`), then stored through :mod:`simulations.catalog.services`;
a rejected input stores nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from api import fields as strict
from api.common import (
    CATALOG_METHODS,
    MAX_MEMORY_TIERS,
    MAX_NOTES_CHARS,
    MAX_PARAMS,
    PRECISION_CHOICES,
    SLUG,
    SLUG_LOOKUP,
    SourcesField,
    catalog_spec,
    dimension,
    drop_none,
    quantity,
)
from api.filters import StrictFilterSet, StrictQueryMixin
from api.permissions import CatalogEditorOrReadOnly
from api.throttles import (
    UploadThrottle,
)
from simulations.adapters import (
    device_spec,
    device_values,
    model_spec,
    runtime_spec,
)
from simulations.catalog import selectors, services
from simulations.catalog.models import Device, LLMModel, RuntimeProfile
from simulations.choices import (
    FfnKind,
    LinkKind,
    MemoryKind,
)
from simulations.core.catalog import device_from_dict, model_from_dict, runtime_from_dict
from simulations.core.spec import MAX_QUANTITY
from simulations.device_families import (
    MAX_PARAMS as MAX_DEVICE_PARAMS,
)
from simulations.device_families import (
    device_kind_choices,
    param_schema,
    params_errors,
)
from simulations.measurements.selectors import runtimes_visible_to

# --- serializers -----------------------------------------------------------------------------


class DeviceKindField(serializers.ChoiceField):
    """A device kind, one of the registered device families'. The choices are read when the
    field is made — DRF makes a serializer's fields afresh for every serializer instance —
    so a family registered later is accepted without any change here."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(choices=device_kind_choices(), **kw)


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": True,
        "description": "The kind-specific parameters the device's family declares (name → "
        "number, or list of numbers); their names, units, bounds and help texts per kind: "
        "GET /api/devices/kinds/.",
    }
)
class DeviceParamsField(serializers.DictField):
    """A device's ``params``: checked against its family's declaration in
    :meth:`DeviceSerializer.validate` (the kind decides which names exist)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(required=False, **kw)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        if len(value) > MAX_DEVICE_PARAMS:
            raise serializers.ValidationError(f"At most {MAX_DEVICE_PARAMS} parameters.")
        return value


class DeviceParamSchemaSerializer(serializers.Serializer):
    """One parameter a device family declares (its schema entry)."""

    name = serializers.CharField()
    label = serializers.CharField(help_text="Its name in words, with its unit.")  # type: ignore[assignment]  # a field named like a Field attribute
    type = serializers.ChoiceField(choices=["int", "float", "bool", "str", "list"])
    help = serializers.CharField()
    unit = serializers.CharField(required=False)
    default = serializers.JSONField(allow_null=True)
    minimum = serializers.FloatField(required=False)
    exclusive_minimum = serializers.BooleanField(required=False)
    maximum = serializers.FloatField(required=False)
    required = serializers.BooleanField(required=False)  # type: ignore[assignment]  # a field named like a Field attribute
    items = serializers.CharField(required=False, help_text="Type of a list's items.")
    choices = serializers.ListField(child=serializers.JSONField(), required=False)


class DeviceKindSerializer(serializers.Serializer):
    """A device kind and the parameters its family declares."""

    kind = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like a Field attribute
    params = DeviceParamSchemaSerializer(many=True)


def device_kinds_schema() -> list[dict[str, Any]]:
    """Every device kind with the parameters its family declares (label, unit, bounds,
    help text, required), as ``GET /api/devices/kinds/`` shows them."""
    return [
        {"kind": kind, "label": label, "params": param_schema(kind)}
        for kind, label in device_kind_choices()
    ]


# --- catalog ---------------------------------------------------------------------------------


class MemoryTierSerializer(strict.Serializer):
    """One memory tier: technology, capacity and peak bandwidth."""

    kind = serializers.ChoiceField(choices=MemoryKind.choices)
    capacity_gb = quantity(required=True, help_text="Capacity, GB.")
    bw_gbps = quantity(required=True, help_text="Peak bandwidth, GB/s.")


class LinkSerializer(strict.Serializer):
    """A host or peer link."""

    kind = serializers.ChoiceField(choices=LinkKind.choices)
    bw_gbps = quantity(required=True, help_text="Bandwidth per direction, GB/s.")
    latency_us = quantity(allow_zero=True, help_text="Latency per transfer, µs.")
    pcie_gen = strict.IntegerField(required=False, allow_null=True, min_value=1, max_value=10)
    lanes = strict.IntegerField(required=False, allow_null=True, min_value=1, max_value=256)


class CatalogSerializer(strict.Serializer):
    """Common behaviour of catalog serializers: slug checks and core-spec validation."""

    model_class: type[Any]

    id = strict.IntegerField(read_only=True)
    slug = strict.CharField(max_length=64, validators=[SLUG])
    name = strict.CharField(max_length=200)
    sources = SourcesField()
    notes = strict.CharField(max_length=MAX_NOTES_CHARS, required=False, allow_blank=True)
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)

    def validate_slug(self, value: str) -> str:
        if self.instance is not None and value != self.instance.slug:
            raise serializers.ValidationError("The slug cannot change (create a new entry).")
        if self.instance is None and self.model_class.objects.filter(slug=value).exists():
            raise serializers.ValidationError(f"{value!r} already exists.")
        return value

    def record(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """The catalog record of the validated attributes (without notes)."""
        return {k: v for k, v in attrs.items() if k != "notes"}


class DeviceSerializer(CatalogSerializer):
    """A device's datasheet facts in the catalog-record shape."""

    model_class = Device

    kind = DeviceKindField(help_text="Device kind: a registered device family.")
    vendor = strict.CharField(max_length=100)
    parent = strict.CharField(  # type: ignore[assignment]  # a field named like a Field attribute
        max_length=64,
        required=False,
        allow_null=True,
        validators=[SLUG],
        help_text="Slug of the SoC this component belongs to.",
    )
    memory = MemoryTierSerializer(many=True, max_length=MAX_MEMORY_TIERS)  # type: ignore[call-arg]  # many=True: DRF's ListSerializer takes them
    fp16_tflops = quantity(help_text="Peak dense FP16 tensor compute, TFLOP/s.")
    bf16_tflops = quantity(help_text="Peak dense BF16 tensor compute, TFLOP/s.")
    fp8_tflops = quantity(help_text="Peak dense FP8 tensor compute, TFLOP/s (empty: no FP8).")
    fp32_tflops = quantity(help_text="Peak dense FP32 compute, TFLOP/s.")
    int8_tops = quantity(help_text="Peak dense INT8 compute, TOP/s.")
    int4_tops = quantity(help_text="Peak dense INT4 compute, TOP/s.")
    tdp_w = quantity(
        help_text="Thermal design power, W; null (or omitted) when the vendor publishes none "
        "(scenarios and plans then must give the placement's tdp_w)."
    )
    idle_w = quantity(required=True, allow_zero=True, help_text="Idle power, W.")
    typical_w = quantity(help_text="Typical power under load, W.")
    price_usd = quantity(help_text="List price, US dollars.")
    host_link = LinkSerializer(required=False, allow_null=True)
    peer_link = LinkSerializer(required=False, allow_null=True)
    params = DeviceParamsField()
    sources = SourcesField(
        help_text="Field name → source text; a parameter's source is keyed ``params.<name>``."
    )

    def to_representation(self, instance: Device) -> dict[str, Any]:
        spec = device_spec(instance)
        columns = device_values(spec)
        out: dict[str, Any] = {
            "id": instance.pk,
            "slug": spec.slug,
            "name": spec.name,
            "kind": str(spec.kind),  # a new family's kind is a plain string
            "vendor": spec.vendor,
            "parent": spec.parent,
            "memory": [
                {"kind": t.kind.value, "capacity_gb": t.capacity_gb, "bw_gbps": t.bw_gbps}
                for t in spec.memory
            ],
        }
        for name in (
            "fp16_tflops",
            "bf16_tflops",
            "fp8_tflops",
            "fp32_tflops",
            "int8_tops",
            "int4_tops",
            "tdp_w",
            "idle_w",
            "typical_w",
            "price_usd",
        ):
            out[name] = getattr(spec, name)
        for name in ("host_link", "peer_link"):
            link = getattr(spec, name)
            out[name] = (
                None
                if link is None
                else {
                    "kind": link.kind.value,
                    "bw_gbps": link.bw_gbps,
                    "latency_us": link.latency_us,
                    "pcie_gen": link.pcie_gen,
                    "lanes": link.lanes,
                }
            )
        out["params"] = columns["params"]
        out["sources"] = columns["sources"]
        out["notes"] = instance.notes
        out["created_at"] = serializers.DateTimeField().to_representation(instance.created_at)
        out["updated_at"] = serializers.DateTimeField().to_representation(instance.updated_at)
        return out

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        record = drop_none(self.record(attrs))
        # null is a fact here (no published power), not an omission: the record keeps it
        record["tdp_w"] = attrs.get("tdp_w")
        record["memory"] = [dict(t) for t in attrs.get("memory", [])]
        for name in ("host_link", "peer_link"):
            if attrs.get(name) is not None:
                record[name] = drop_none(dict(attrs[name]))
        # the family's declaration decides the params: errors name ``params.<name>``
        errors = params_errors(record["kind"], record.get("params", {}))
        if errors:
            raise serializers.ValidationError({k: [v] for k, v in errors.items()})
        attrs["spec"] = catalog_spec(device_from_dict, record)
        return attrs

    def save(self, **kwargs: Any) -> Device:
        from simulations.catalog.services import device_save

        self.instance = device_save(
            self.validated_data["spec"], notes=self.validated_data.get("notes", "")
        )
        return self.instance


class RuntimeProfileSerializer(CatalogSerializer):
    """A software stack's fitted behaviour on one kind of device."""

    model_class = RuntimeProfile
    output_only_keys = ("calibration",)

    device_kind = DeviceKindField(help_text="Kind of device this stack runs on.")
    weight_bits = serializers.ChoiceField(choices=PRECISION_CHOICES)
    act_bits = serializers.ChoiceField(choices=PRECISION_CHOICES)
    kv_bits = serializers.ChoiceField(choices=PRECISION_CHOICES)
    compute_eff = strict.PositiveFloatField(max_value=1.0, help_text="(0, 1].")
    bw_eff = strict.PositiveFloatField(max_value=1.0, help_text="(0, 1].")
    kernel_launch_us = strict.FloatField(
        required=False, min_value=0.0, max_value=MAX_QUANTITY, help_text="µs per kernel."
    )
    kernels_per_layer = strict.IntegerField(required=False, min_value=0, max_value=10**6)
    fp8 = strict.BooleanField(
        required=False, help_text="8-bit numbers are FP8 floats (the device's FP8 path)."
    )
    params = serializers.DictField(
        child=strict.FloatField(min_value=-MAX_QUANTITY, max_value=MAX_QUANTITY),
        required=False,
        help_text="Extra fitted parameters: name → number.",
    )
    default_for_kind = strict.BooleanField(required=False)

    def to_representation(self, instance: RuntimeProfile) -> dict[str, Any]:
        spec = runtime_spec(instance)
        dt = serializers.DateTimeField()
        return {
            "id": instance.pk,
            "slug": spec.slug,
            "name": spec.name,
            "device_kind": str(spec.device_kind),
            "weight_bits": spec.weight_bits,
            "act_bits": spec.act_bits,
            "kv_bits": spec.kv_bits,
            "compute_eff": spec.compute_eff,
            "bw_eff": spec.bw_eff,
            "kernel_launch_us": spec.kernel_launch_us,
            "kernels_per_layer": spec.kernels_per_layer,
            "fp8": spec.fp8,
            "params": dict(spec.params),
            "default_for_kind": instance.default_for_kind,
            "sources": dict(spec.sources),
            "calibration": spec.calibration.as_dict(),
            "notes": instance.notes,
            "created_at": dt.to_representation(instance.created_at),
            "updated_at": dt.to_representation(instance.updated_at),
        }

    def validate_params(self, value: dict[str, float]) -> dict[str, float]:
        if len(value) > MAX_PARAMS:
            raise serializers.ValidationError(f"At most {MAX_PARAMS} parameters.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        record = self.record(attrs)
        record.pop("default_for_kind", None)
        attrs["spec"] = catalog_spec(runtime_from_dict, record)
        return attrs

    def save(self, **kwargs: Any) -> RuntimeProfile:
        from simulations.catalog.services import runtime_save

        self.instance = runtime_save(
            self.validated_data["spec"],
            default_for_kind=self.validated_data.get("default_for_kind", False),
            notes=self.validated_data.get("notes", ""),
        )
        return self.instance


class LLMModelSerializer(CatalogSerializer):
    """The shapes of a decoder-only LLM."""

    model_class = LLMModel

    n_layers = dimension(required=True)
    hidden_size = dimension(required=True)
    n_heads = dimension(required=True)
    n_kv_heads = dimension(required=True)
    head_dim = dimension(required=True)
    ffn_size = dimension(required=True)
    ffn_kind = serializers.ChoiceField(choices=FfnKind.choices)
    vocab_size = dimension(required=True)
    tied_embeddings = strict.BooleanField(required=False)
    max_context = dimension(required=False)
    moe = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Mixture-of-experts block (n_experts, experts_per_token, expert_ffn_size, "
        "n_shared_experts, shared_ffn_size, first_dense_layers, expert_weight_bits); null for "
        "a dense model.",
    )
    mla = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Multi-head latent attention block (kv_lora_rank, qk_rope_head_dim, "
        "qk_nope_head_dim, v_head_dim, q_lora_rank); null without MLA.",
    )
    sliding_window = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Sliding-window block (window_tokens, layers); null without one.",
    )

    def to_representation(self, instance: LLMModel) -> dict[str, Any]:
        spec = model_spec(instance)
        dt = serializers.DateTimeField()
        out: dict[str, Any] = {"id": instance.pk}
        for name in (
            "slug",
            "name",
            "n_layers",
            "hidden_size",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "ffn_size",
        ):
            out[name] = getattr(spec, name)
        out.update(
            ffn_kind=spec.ffn_kind.value,
            vocab_size=spec.vocab_size,
            tied_embeddings=spec.tied_embeddings,
            max_context=spec.max_context,
            **{k: spec.architecture().get(k) for k in ("moe", "mla", "sliding_window")},
            sources=dict(spec.sources),
            notes=instance.notes,
            created_at=dt.to_representation(instance.created_at),
            updated_at=dt.to_representation(instance.updated_at),
        )
        return out

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        record = drop_none(self.record(attrs))
        attrs["spec"] = catalog_spec(model_from_dict, record)
        return attrs

    def save(self, **kwargs: Any) -> LLMModel:
        from simulations.catalog.services import model_save

        self.instance = model_save(
            self.validated_data["spec"], notes=self.validated_data.get("notes", "")
        )
        return self.instance


class HfImportSerializer(strict.Serializer):
    """A Hugging Face ``config.json`` (as a JSON object) to import as a model."""

    slug = strict.CharField(max_length=64, validators=[SLUG])
    name = strict.CharField(max_length=200)
    config = serializers.DictField(help_text="The config.json object.")

    def validate_config(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > 500:
            raise serializers.ValidationError("At most 500 keys.")
        return value


# --- views -----------------------------------------------------------------------------------


# --- catalog ---------------------------------------------------------------------------------


@extend_schema_field({"type": "string", "enum": [k for k, _ in device_kind_choices()]})
class KindFilter(filters.ChoiceFilter):
    """A device kind: the registered families' slugs (their choices are computed, so the
    schema states them here)."""


class DeviceFilter(StrictFilterSet):
    """Devices by kind and vendor."""

    kind = KindFilter(choices=device_kind_choices)
    vendor = filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = Device
        fields = ("kind", "vendor")


@extend_schema_view(
    list=extend_schema(summary="List devices", tags=["catalog"]),
    retrieve=extend_schema(summary="A device's datasheet facts", tags=["catalog"]),
    create=extend_schema(summary="Add a device (staff)", tags=["catalog"]),
    update=extend_schema(summary="Replace a device (staff)", tags=["catalog"]),
    destroy=extend_schema(summary="Delete a device (staff)", tags=["catalog"]),
)
class DeviceViewSet(StrictQueryMixin, viewsets.ModelViewSet):
    """Devices: read for everyone signed in, write for staff."""

    serializer_class = DeviceSerializer
    permission_classes = [CatalogEditorOrReadOnly]
    lookup_field = "slug"
    lookup_value_regex = SLUG_LOOKUP
    filterset_class = DeviceFilter
    ordering_fields = ("slug", "name", "kind", "vendor", "price_usd", "tdp_w", "fp16_tflops")
    ordering = ("kind", "slug")
    http_method_names = CATALOG_METHODS

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.device_list()

    @extend_schema(
        summary="Device kinds and the parameters each family declares",
        tags=["catalog"],
        responses={200: DeviceKindSerializer(many=True)},
    )
    @action(
        detail=False, methods=["get"], url_path="kinds", pagination_class=None, filter_backends=[]
    )
    def kinds(self, request: Request) -> Response:
        """Every device kind with its family's parameters (name, label, type, unit, bounds,
        help text, required): what a device's ``params`` may hold."""
        return Response(device_kinds_schema())


class RuntimeFilter(StrictFilterSet):
    """Runtime profiles by device kind."""

    device_kind = KindFilter(choices=device_kind_choices)

    class Meta:
        model = RuntimeProfile
        fields = ("device_kind", "default_for_kind")


@extend_schema_view(
    list=extend_schema(summary="List runtime profiles", tags=["catalog"]),
    retrieve=extend_schema(summary="A runtime profile", tags=["catalog"]),
    create=extend_schema(summary="Add a runtime profile (staff)", tags=["catalog"]),
    update=extend_schema(summary="Replace a runtime profile (staff)", tags=["catalog"]),
    destroy=extend_schema(summary="Delete a runtime profile (staff)", tags=["catalog"]),
)
class RuntimeProfileViewSet(StrictQueryMixin, viewsets.ModelViewSet):
    """Runtime profiles (software stacks): read for everyone signed in, write for staff."""

    serializer_class = RuntimeProfileSerializer
    permission_classes = [CatalogEditorOrReadOnly]
    lookup_field = "slug"
    lookup_value_regex = SLUG_LOOKUP
    filterset_class = RuntimeFilter
    ordering_fields = ("slug", "name", "device_kind", "compute_eff", "bw_eff")
    ordering = ("device_kind", "slug")
    http_method_names = CATALOG_METHODS

    def get_queryset(self) -> QuerySet[Any]:
        # the catalog's profiles plus the caller's own (saved from a calibration) and shared ones
        return runtimes_visible_to(self.request.user)


@extend_schema_view(
    list=extend_schema(summary="List LLM models", tags=["catalog"]),
    retrieve=extend_schema(summary="An LLM model's shapes", tags=["catalog"]),
    create=extend_schema(summary="Add a model (staff)", tags=["catalog"]),
    update=extend_schema(summary="Replace a model (staff)", tags=["catalog"]),
    destroy=extend_schema(summary="Delete a model (staff)", tags=["catalog"]),
)
class LLMModelViewSet(StrictQueryMixin, viewsets.ModelViewSet):
    """LLM models: read for everyone signed in, write (and Hugging Face import) for staff."""

    serializer_class = LLMModelSerializer
    permission_classes = [CatalogEditorOrReadOnly]
    lookup_field = "slug"
    lookup_value_regex = SLUG_LOOKUP
    filterset_fields = ("ffn_kind",)
    ordering_fields = ("slug", "name", "n_layers", "hidden_size", "vocab_size")
    ordering = ("slug",)
    http_method_names = CATALOG_METHODS

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.model_list()

    def get_throttles(self) -> list[Any]:
        if self.action == "import_hf":
            return [*super().get_throttles(), UploadThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Import a model from a Hugging Face config.json (staff)",
        tags=["catalog"],
        request=HfImportSerializer,
        responses={201: LLMModelSerializer},
    )
    @action(detail=False, methods=["post"], url_path="import-hf")
    def import_hf(self, request: Request) -> Response:
        """Create or update the model ``slug`` from a ``config.json`` object."""
        data = HfImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row = services.hf_model_import(
            config=data.validated_data["config"],
            slug=data.validated_data["slug"],
            name=data.validated_data["name"],
        )
        return Response(LLMModelSerializer(row).data, status=status.HTTP_201_CREATED)
