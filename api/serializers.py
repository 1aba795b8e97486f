"""Serializers: request validation (field-level errors, finite bounded numbers, capped lists)
and the JSON shapes of the API.

Catalog rows are shown and accepted in the catalog-record shape of
``simulations/core/data`` (spec field names, nested memory tiers and links), so a GET body
can be PUT back. Writes are validated here for types and bounds, then as core specs
(:mod:`simulations.core.catalog`), then stored through :mod:`simulations.services`; a
rejected input stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api import fields as strict
from api.models import ApiToken
from simulations import selectors
from simulations.adapters import (
    device_spec,
    device_values,
    model_spec,
    runtime_spec,
)
from simulations.choices import (
    ArrivalKind,
    FfnKind,
    LinkKind,
    MemoryKind,
    TraceVisibility,
)
from simulations.core import scenario as scenario_rules
from simulations.core.catalog import device_from_dict, model_from_dict, runtime_from_dict
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.json_fields import MAX_NAME_LENGTH
from simulations.core.spec import MAX_QUANTITY
from simulations.device_families import (
    MAX_PARAMS as MAX_DEVICE_PARAMS,
)
from simulations.device_families import (
    device_kind_choices,
    param_schema,
    params_errors,
)
from simulations.models import (
    MAX_MODEL_DIM,
    PRECISION_BITS,
    Device,
    LLMModel,
    RunEvent,
    RuntimeProfile,
    Scenario,
    SimulationRun,
    Trace,
    Workload,
)
from simulations.plans.models import Plan, PlanResult
from simulations.services import MAX_TRACE_BYTES
from simulations.sweeps.expand import MAX_AXES, MAX_AXIS_VALUES, MAX_PATH_LENGTH
from simulations.sweeps.models import Sweep, SweepResult

#: Entries of a ``sources`` object, and characters of one source text.
MAX_SOURCES = 200
MAX_SOURCE_CHARS = 2000
#: Characters of free-text notes.
MAX_NOTES_CHARS = 10_000
#: Memory tiers of one device.
MAX_MEMORY_TIERS = 8
#: Extra fitted parameters of one runtime profile.
MAX_PARAMS = 64

#: Precisions (bits) a runtime profile may use, as choices.
PRECISION_CHOICES = [(b, f"{b}-bit") for b in PRECISION_BITS]

SLUG = RegexValidator(
    r"^[a-z0-9][a-z0-9._-]*\Z",
    "Use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit.",
)


def quantity(*, required: bool = False, allow_zero: bool = False, **kw: Any) -> Any:
    """A finite physical quantity in (0, 1e15] (or [0, 1e15]); null allowed unless required."""
    field = strict.FloatField if allow_zero else strict.PositiveFloatField
    return field(
        required=required,
        allow_null=not required,
        min_value=0.0,
        max_value=MAX_QUANTITY,
        **kw,
    )


def dimension(*, required: bool = False, maximum: int = MAX_MODEL_DIM, **kw: Any) -> Any:
    """An integer count or size in [1, maximum]."""
    return strict.IntegerField(
        required=required, allow_null=not required, min_value=1, max_value=maximum, **kw
    )


class SourcesField(serializers.DictField):
    """Field name → source text (datasheet, paper table or section)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(
            child=strict.CharField(max_length=MAX_SOURCE_CHARS),
            required=False,
            **kw,
        )

    def to_internal_value(self, data: Any) -> dict[str, str]:
        value = super().to_internal_value(data)
        if len(value) > MAX_SOURCES:
            raise serializers.ValidationError(f"At most {MAX_SOURCES} entries.")
        return value


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
    label = serializers.CharField(help_text="Its name in words, with its unit.")
    type = serializers.ChoiceField(choices=["int", "float", "bool", "str", "list"])
    help = serializers.CharField()
    unit = serializers.CharField(required=False)
    default = serializers.JSONField(allow_null=True)
    minimum = serializers.FloatField(required=False)
    exclusive_minimum = serializers.BooleanField(required=False)
    maximum = serializers.FloatField(required=False)
    required = serializers.BooleanField(required=False)
    items = serializers.CharField(required=False, help_text="Type of a list's items.")
    choices = serializers.ListField(child=serializers.JSONField(), required=False)


class DeviceKindSerializer(serializers.Serializer):
    """A device kind and the parameters its family declares."""

    kind = serializers.CharField()
    label = serializers.CharField()
    params = DeviceParamSchemaSerializer(many=True)


def device_kinds_schema() -> list[dict[str, Any]]:
    """Every device kind with the parameters its family declares (label, unit, bounds,
    help text, required), as ``GET /api/devices/kinds/`` shows them."""
    return [
        {"kind": kind, "label": label, "params": param_schema(kind)}
        for kind, label in device_kind_choices()
    ]


def _spec_error(exc: SpecError) -> serializers.ValidationError:
    """A core SpecError as a field error keyed by the last part of its path."""
    key = exc.field.rsplit(".", 1)[-1] or "non_field_errors"
    key = key.split("[", 1)[0] or "non_field_errors"
    return serializers.ValidationError({key: [exc.message]})


def _catalog_spec(build: Callable[[dict[str, Any]], Any], record: dict[str, Any]) -> Any:
    """``build(record)`` (a catalog record to its spec), its errors as validation errors: a
    SpecError under its field, any other bad value under ``non_field_errors``."""
    try:
        return build(record)
    except SpecError as exc:
        raise _spec_error(exc) from exc
    except (TypeError, ValueError) as exc:
        raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from exc


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


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
    parent = strict.CharField(
        max_length=64,
        required=False,
        allow_null=True,
        validators=[SLUG],
        help_text="Slug of the SoC this component belongs to.",
    )
    memory = MemoryTierSerializer(many=True, max_length=MAX_MEMORY_TIERS)
    fp16_tflops = quantity(help_text="Peak dense FP16 tensor compute, TFLOP/s.")
    bf16_tflops = quantity(help_text="Peak dense BF16 tensor compute, TFLOP/s.")
    fp8_tflops = quantity(help_text="Peak dense FP8 tensor compute, TFLOP/s (empty: no FP8).")
    fp32_tflops = quantity(help_text="Peak dense FP32 compute, TFLOP/s.")
    int8_tops = quantity(help_text="Peak dense INT8 compute, TOP/s.")
    int4_tops = quantity(help_text="Peak dense INT4 compute, TOP/s.")
    tdp_w = quantity(required=True, help_text="Thermal design power, W.")
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
        record = _drop_none(self.record(attrs))
        record["memory"] = [dict(t) for t in attrs.get("memory", [])]
        for name in ("host_link", "peer_link"):
            if attrs.get(name) is not None:
                record[name] = _drop_none(dict(attrs[name]))
        # the family's declaration decides the params: errors name ``params.<name>``
        errors = params_errors(record["kind"], record.get("params", {}))
        if errors:
            raise serializers.ValidationError({k: [v] for k, v in errors.items()})
        attrs["spec"] = _catalog_spec(device_from_dict, record)
        return attrs

    def save(self, **kwargs: Any) -> Device:
        from simulations.services import device_save

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
        attrs["spec"] = _catalog_spec(runtime_from_dict, record)
        return attrs

    def save(self, **kwargs: Any) -> RuntimeProfile:
        from simulations.services import runtime_save

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
        record = _drop_none(self.record(attrs))
        attrs["spec"] = _catalog_spec(model_from_dict, record)
        return attrs

    def save(self, **kwargs: Any) -> LLMModel:
        from simulations.services import model_save

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


# --- traces and workloads --------------------------------------------------------------------


class TraceSerializer(strict.ModelSerializer):
    """An uploaded trace's summary (the parsed columns are not listed)."""

    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Trace
        fields = (
            "id",
            "slug",
            "name",
            "source",
            "request_count",
            "duration_s",
            "owner",
            "visibility",
            "parse_status",
            "parse_error",
            "created_at",
        )
        read_only_fields = fields


class TraceUploadSerializer(strict.Serializer):
    """An Azure-format trace: a CSV ``file`` (multipart) or its ``text`` (JSON)."""

    slug = strict.CharField(max_length=64, validators=[SLUG])
    name = strict.CharField(max_length=200)
    source = strict.CharField(max_length=2000, required=False, allow_blank=True)
    file = serializers.FileField(required=False, help_text="The CSV file (multipart upload).")
    text = strict.CharField(
        required=False,
        max_length=MAX_TRACE_BYTES,
        trim_whitespace=False,
        help_text="The CSV text (TIMESTAMP,ContextTokens,GeneratedTokens).",
    )
    visibility = serializers.ChoiceField(
        choices=TraceVisibility.choices,
        default=TraceVisibility.PRIVATE,
        help_text="private (you only; the default), shared (every signed-in user) or public "
        "(staff only: part of the built-in catalog).",
    )

    def validate_slug(self, value: str) -> str:
        if Trace.objects.filter(slug=value).exists():
            raise serializers.ValidationError(f"{value!r} already exists.")
        return value

    def validate_file(self, value: Any) -> Any:
        if value is not None and value.size > MAX_TRACE_BYTES:
            raise serializers.ValidationError(f"At most {MAX_TRACE_BYTES} bytes.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("file" in attrs) == ("text" in attrs):
            raise serializers.ValidationError({"file": ["Send either a file or text (one)."]})
        return attrs


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": scenario_rules.MAX_TOKENS},
            {
                "type": "object",
                "properties": {
                    "dist": {"type": "string", "enum": ["fixed", "uniform", "lognormal", "trace"]}
                },
                "required": ["dist"],
                "additionalProperties": True,
            },
        ]
    }
)
class TraceTextUploadSerializer(TraceUploadSerializer):
    """An Azure-format trace sent as JSON: its CSV ``text`` (files go as multipart)."""

    file = None  # type: ignore[assignment]
    text = strict.CharField(
        max_length=MAX_TRACE_BYTES,
        trim_whitespace=False,
        help_text="The CSV text (TIMESTAMP,ContextTokens,GeneratedTokens).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return attrs


class TokensField(serializers.JSONField):
    """A token count: an integer, or a distribution object the core validates."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if isinstance(value, bool) or not isinstance(value, int | dict):
            raise serializers.ValidationError(
                'Must be an integer or a distribution object ({"dist": ...}).'
            )
        return value


class WorkloadSerializer(strict.ModelSerializer):
    """A reusable workload (owned; shared ones are read-only to others)."""

    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    trace = serializers.SlugRelatedField(
        slug_field="slug", queryset=Trace.objects.all(), required=False, allow_null=True
    )
    input_tokens = TokensField(
        help_text='Tokens: an integer or a distribution object ({"dist": "uniform", ...}).'
    )
    output_tokens = TokensField(help_text="Tokens: an integer or a distribution object.")
    rate_per_s = strict.PositiveFloatField(
        required=False,
        allow_null=True,
        max_value=scenario_rules.MAX_RATE_PER_S,
    )
    time_scale = strict.PositiveFloatField(
        required=False,
        max_value=scenario_rules.MAX_TIME_SCALE,
    )
    requests = strict.IntegerField(min_value=1, max_value=scenario_rules.MAX_REQUESTS)
    seed = strict.IntegerField(required=False, min_value=0, max_value=scenario_rules.MAX_SEED)

    class Meta:
        model = Workload
        fields = (
            "id",
            "name",
            "shared",
            "owner",
            "requests",
            "input_tokens",
            "output_tokens",
            "arrival_kind",
            "rate_per_s",
            "time_scale",
            "trace",
            "seed",
            "created_at",
            "updated_at",
        )
        read_only_fields = ("id", "owner", "created_at", "updated_at")
        # Uniqueness per owner is checked in validate_name (the owner is not in the input).
        validators: list[Any] = []

    def validate_name(self, value: str) -> str:
        owner = self.context["request"].user
        clash = Workload.objects.filter(owner=owner, name=value)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError("You already have a workload with this name.")
        return value

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A workload may use only the traces its owner may use (another's private trace is
        # "does not exist", as in a scenario).
        request = self.context.get("request")
        field = self.fields["trace"]
        assert isinstance(field, serializers.SlugRelatedField)
        field.queryset = selectors.traces_visible_to(request.user if request else None).defer(
            "data"
        )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        merged = {
            key: attrs.get(key, getattr(self.instance, key, None))
            for key in ("arrival_kind", "rate_per_s", "trace")
        }
        kind = merged["arrival_kind"] or ArrivalKind.CLOSED
        if kind == ArrivalKind.POISSON and merged["rate_per_s"] is None:
            raise serializers.ValidationError({"rate_per_s": ["Poisson arrivals need a rate."]})
        if kind == ArrivalKind.TRACE and merged["trace"] is None:
            raise serializers.ValidationError({"trace": ["Trace arrivals need a trace."]})
        return attrs

    @staticmethod
    def _workload_errors(exc: ScenarioValidationError) -> serializers.ValidationError:
        """``workload.input_tokens.low`` → ``input_tokens``; arrival paths → their column."""
        errors: dict[str, list[str]] = {}
        for path, messages in exc.errors.items():
            parts = path.split(".")
            key = parts[1] if len(parts) > 1 else "non_field_errors"
            if key == "arrival":
                key = {"kind": "arrival_kind", "trace": "trace"}.get(
                    parts[2] if len(parts) > 2 else "kind", parts[2] if len(parts) > 2 else key
                )
            errors.setdefault(key, []).extend(f"{path}: {m}" for m in messages)
        return serializers.ValidationError(errors)

    def create(self, validated_data: dict[str, Any]) -> Workload:
        from simulations.services import workload_create

        try:
            return workload_create(owner=self.context["request"].user, **validated_data)
        except ScenarioValidationError as exc:
            raise self._workload_errors(exc) from exc

    def update(self, instance: Workload, validated_data: dict[str, Any]) -> Workload:
        from simulations.services import workload_validate

        for key, value in validated_data.items():
            setattr(instance, key, value)
        instance.full_clean()
        try:
            workload_validate(instance)
        except ScenarioValidationError as exc:
            raise self._workload_errors(exc) from exc
        instance.save()
        return instance


# --- scenarios and runs ----------------------------------------------------------------------


def _document_schema(description: str, required: list[str], extra: dict[str, Any]) -> Any:
    """The OpenAPI schema of a document: its top-level keys (the core refuses any other),
    typed; their contents are validated by the core (400 keyed by JSON path)."""
    properties: dict[str, Any] = {
        "name": {"type": "string", "pattern": r"\S", "maxLength": MAX_NAME_LENGTH},
        "description": {"type": "string", "maxLength": 2000, "nullable": True},
        "model": {"type": "string", "minLength": 1, "description": "A catalog model slug."},
        "workload": {"type": "object", "additionalProperties": True},
        **extra,
    }
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


@extend_schema_field(
    _document_schema(
        "A scenario document (DESIGN.md §3): name, model, workload, systems, slo, and "
        "optionally costs (TCO) and capacity (max load within the SLO); "
        "docs/architecture.md describes each.",
        ["name", "model", "workload", "systems"],
        {
            "systems": {
                "type": "array",
                "minItems": 1,
                "maxItems": scenario_rules.MAX_SYSTEMS,
                "items": {"type": "object", "additionalProperties": True},
            },
            "slo": {"type": "object", "additionalProperties": True, "nullable": True},
            "costs": {"type": "object", "additionalProperties": True, "nullable": True},
            "capacity": {
                "oneOf": [{"type": "boolean"}, {"type": "object", "additionalProperties": True}]
            },
        },
    )
)
class DocumentField(serializers.JSONField):
    """A JSON object (the scenario document); anything else is rejected."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object (a scenario document).")
        return value


class ScenarioSerializer(strict.ModelSerializer):
    """A validated scenario document; ``name`` comes from the document."""

    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    document = DocumentField()
    is_owner = serializers.SerializerMethodField()

    class Meta:
        model = Scenario
        fields = (
            "id",
            "name",
            "document",
            "shared",
            "owner",
            "is_owner",
            "created_at",
            "updated_at",
        )
        read_only_fields = ("id", "name", "owner", "is_owner", "created_at", "updated_at")

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_is_owner(self, obj: Scenario) -> bool:
        request = self.context.get("request")
        return bool(request and obj.owner_id == request.user.pk)

    def create(self, validated_data: dict[str, Any]) -> Scenario:
        from simulations.services import scenario_create

        return scenario_create(
            owner=self.context["request"].user,
            document=validated_data["document"],
            shared=validated_data.get("shared", False),
            new_systems=True,
        )

    def update(self, instance: Scenario, validated_data: dict[str, Any]) -> Scenario:
        from simulations.services import scenario_update

        return scenario_update(
            scenario=instance,
            document=validated_data.get("document"),
            shared=validated_data.get("shared"),
        )


class RunEventSerializer(strict.ModelSerializer):
    """One lifecycle event of a run."""

    class Meta:
        model = RunEvent
        fields = ("kind", "attempt", "message", "at")
        read_only_fields = fields


class VisibleScenarioField(serializers.PrimaryKeyRelatedField):
    """A scenario the requesting user may read (own or shared); others look nonexistent."""

    def get_queryset(self) -> Any:
        return selectors.scenarios_visible_to(self.context["request"].user)


class RunSerializer(strict.ModelSerializer):
    """A run: lifecycle state, progress, timestamps (the result has its own endpoint)."""

    scenario = VisibleScenarioField()
    scenario_name = strict.CharField(source="scenario.name", read_only=True)

    class Meta:
        model = SimulationRun
        fields = (
            "id",
            "scenario",
            "scenario_name",
            "status",
            "progress",
            "attempts",
            "error",
            "created_at",
            "enqueued_at",
            "started_at",
            "heartbeat_at",
            "finished_at",
        )
        read_only_fields = tuple(f for f in fields if f != "scenario")


class RunDetailSerializer(RunSerializer):
    """A run with its document and lifecycle events."""

    document = serializers.JSONField(read_only=True)
    events = RunEventSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = (*RunSerializer.Meta.fields, "document", "events")
        read_only_fields = fields


class RunResultSerializer(strict.Serializer):
    """The result document (DESIGN.md §4) of a succeeded run."""

    run = strict.IntegerField()
    result = serializers.DictField(help_text="The result document.")


# --- policies --------------------------------------------------------------------------------


class PolicyRoleSerializer(strict.Serializer):
    """A device role a policy understands."""

    name = strict.CharField()
    help = strict.CharField()
    kinds = serializers.ListField(child=strict.CharField())
    required = strict.BooleanField()


class PolicyOptionSerializer(strict.Serializer):
    """An option a policy accepts, with its type, default and bounds."""

    name = strict.CharField()
    type = strict.CharField()
    default = serializers.JSONField()
    help = strict.CharField()
    minimum = strict.FloatField(required=False)
    maximum = strict.FloatField(required=False)
    choices = serializers.ListField(child=serializers.JSONField(), required=False)
    unit = strict.CharField(required=False)
    catalog = strict.CharField(
        required=False,
        help_text="The catalog collection whose slug the option names (links: an "
        "interconnect, e.g. nvlink4 or pcie5-x16).",
    )


class PolicySerializer(strict.Serializer):
    """A registered scheduling policy."""

    name = strict.CharField()
    summary = strict.CharField()
    roles = PolicyRoleSerializer(many=True)
    options = PolicyOptionSerializer(many=True)
    defaults = serializers.DictField(help_text="Option name → default value.")


# --- sweeps ----------------------------------------------------------------------------------


class AxisSerializer(strict.Serializer):
    """One swept parameter: a path into the template and the values it takes."""

    name = strict.CharField(max_length=MAX_PATH_LENGTH, required=False)
    path = strict.CharField(
        max_length=MAX_PATH_LENGTH,
        help_text="Where the value goes, e.g. systems[0].devices[0].count, "
        "systems[0].policy, systems[0].options.max_batch, workload.arrival.rate_per_s.",
    )
    values = serializers.ListField(
        child=serializers.JSONField(), min_length=1, max_length=MAX_AXIS_VALUES
    )


class SweepSerializer(strict.ModelSerializer):
    """A sweep: template, axes, counters, progress and (once finished) its summary."""

    template = DocumentField()
    axes = AxisSerializer(many=True, min_length=1, max_length=MAX_AXES)
    chunk_size = strict.IntegerField(
        required=False, min_value=1, max_value=1000, help_text="Configurations per task."
    )
    progress = strict.IntegerField(read_only=True, help_text="Percent recorded.")

    class Meta:
        model = Sweep
        fields = (
            "id",
            "name",
            "status",
            "template",
            "axes",
            "total",
            "chunk_size",
            "succeeded_count",
            "failed_count",
            "progress",
            "summary",
            "created_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = (
            "id",
            "status",
            "total",
            "succeeded_count",
            "failed_count",
            "progress",
            "summary",
            "created_at",
            "started_at",
            "finished_at",
        )

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        for axis in value.get("axes", []):
            if "name" not in axis:
                axis["name"] = axis["path"]
        return value


class SweepResultSerializer(strict.ModelSerializer):
    """One configuration's outcome."""

    class Meta:
        model = SweepResult
        fields = ("index", "parameters", "status", "result", "error", "attempt", "recorded_at")
        read_only_fields = fields


# --- tokens ----------------------------------------------------------------------------------


class ApiTokenSerializer(strict.ModelSerializer):
    """An API token (the key is only in the creation response)."""

    expires_in_days = strict.IntegerField(
        write_only=True, required=False, min_value=1, max_value=366
    )

    class Meta:
        model = ApiToken
        fields = (
            "id",
            "name",
            "key_hint",
            "created_at",
            "last_used_at",
            "expires_at",
            "expires_in_days",
        )
        read_only_fields = ("id", "key_hint", "created_at", "last_used_at", "expires_at")


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """The creation response: the token and, once only, its key."""

    key = strict.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(ApiTokenSerializer.Meta):
        fields = (*ApiTokenSerializer.Meta.fields, "key")
        read_only_fields = (*ApiTokenSerializer.Meta.read_only_fields, "key")


class TokenExchangeSerializer(strict.Serializer):
    """A username and password exchanged for a new API token (automation)."""

    username = strict.CharField(max_length=150)
    password = strict.CharField(max_length=4096, trim_whitespace=False, write_only=True)
    name = strict.CharField(
        max_length=100, required=False, default="password exchange", help_text="Token name."
    )
    expires_in_days = strict.IntegerField(required=False, min_value=1, max_value=366)


class PaginatedSweepResultList(strict.Serializer):
    """A page of a sweep's recorded configurations."""

    count = strict.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = SweepResultSerializer(many=True)


# --- capacity plans --------------------------------------------------------------------------


@extend_schema_field(
    _document_schema(
        "A plan document (issue 10): name, model, workload, targets, constraints, space "
        "(devices and policies to search), search options.",
        ["name", "model", "workload", "targets", "space"],
        {
            key: {"type": "object", "additionalProperties": True}
            for key in ("targets", "space", "constraints", "search")
        },
    )
)
class PlanDocumentField(serializers.JSONField):
    """A JSON object (the plan document); anything else is rejected."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object (a plan document).")
        return value


class PlanSerializer(strict.ModelSerializer):
    """A capacity plan: where the search is and how far (the report is in the detail)."""

    document = PlanDocumentField(write_only=True, help_text="The plan document to search.")
    progress = serializers.SerializerMethodField(help_text="Percent done (0–100).")

    class Meta:
        model = Plan
        fields = (
            "id",
            "name",
            "document",
            "status",
            "stage",
            "round",
            "survivors",
            "admitted",
            "confirmed",
            "progress",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = tuple(f for f in fields if f != "document")

    @extend_schema_field(strict.IntegerField(min_value=0, max_value=100))
    def get_progress(self, obj: Plan) -> int:
        from simulations.plans.selectors import plan_progress

        return plan_progress(obj)


class PlanDetailSerializer(PlanSerializer):
    """A plan with its document and, once succeeded, its recommendation and full report."""

    document = PlanDocumentField(read_only=True, help_text="The plan document as submitted.")
    recommendation = serializers.SerializerMethodField(
        help_text="The cheapest configuration meeting every target (null until succeeded, "
        "or when none does)."
    )
    report = serializers.JSONField(
        source="result", read_only=True, help_text="The plan's report (null until succeeded)."
    )

    class Meta(PlanSerializer.Meta):
        fields = (*PlanSerializer.Meta.fields, "recommendation", "report")
        read_only_fields = fields

    @extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
    def get_recommendation(self, obj: Plan) -> dict[str, Any] | None:
        return (obj.result or {}).get("recommendation")


class PlanResultSerializer(strict.ModelSerializer):
    """One configuration confirmed by the engine."""

    class Meta:
        model = PlanResult
        fields = ("key", "round", "feasible", "capex_usd", "evaluation", "attempt", "recorded_at")
        read_only_fields = fields


class PaginatedPlanResultList(strict.Serializer):
    """A page of a plan's confirmed configurations."""

    count = strict.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = PlanResultSerializer(many=True)


class PlanParetoPointSerializer(strict.Serializer):
    """One confirmed configuration as a point of the Pareto charts."""

    key = strict.CharField()
    capex_usd = strict.FloatField(help_text="Capital cost, US dollars.")
    feasible = strict.BooleanField()
    throughput_tok_s = strict.FloatField(allow_null=True, help_text="Tokens per second.")
    energy_j_per_token = strict.FloatField(allow_null=True, help_text="Joules per token.")
    on_front = strict.BooleanField(help_text="On a Pareto front of the finished plan.")


class PlanParetoSerializer(strict.Serializer):
    """The Pareto points of a plan (every confirmed configuration so far)."""

    plan = strict.IntegerField()
    final = strict.BooleanField(help_text="Whether the plan has finished.")
    points = PlanParetoPointSerializer(many=True)
