"""Traces and workloads: ``/api/traces/`` (uploads parsed on the workers) and
``/api/workloads/``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.exceptions import (
    PermissionDenied,
    ValidationError,
)
from rest_framework.request import Request
from rest_framework.response import Response

from api import fields as strict
from api.common import SLUG, SLUG_LOOKUP, OwnedFilter
from api.filters import StrictQueryMixin
from api.parsers import BoundedJSONParser, BoundedMultiPartParser
from api.permissions import IsOwnerOrReadOnly
from api.throttles import (
    UploadThrottle,
)
from simulations.choices import (
    ArrivalKind,
    TraceParseStatus,
    TraceVisibility,
)
from simulations.core import scenario as scenario_rules
from simulations.core.errors import ScenarioValidationError
from simulations.scenarios import selectors, services
from simulations.scenarios.models import Trace, Workload
from simulations.scenarios.services import MAX_TRACE_BYTES

# --- serializers -----------------------------------------------------------------------------


# --- traces and workloads --------------------------------------------------------------------


class TraceSerializer(strict.ModelSerializer):
    """An uploaded trace's summary (the parsed columns are not listed)."""

    owner: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )

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
    source = strict.CharField(max_length=2000, required=False, allow_blank=True)  # type: ignore[assignment]  # a field named like a Field attribute
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

    owner: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    trace: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
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
        visible = selectors.traces_visible_to(request.user if request else None)
        field.queryset = visible.defer("data")  # type: ignore[arg-type]  # the stubs type it a manager

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
        from simulations.scenarios.services import workload_create

        try:
            return workload_create(owner=self.context["request"].user, **validated_data)
        except ScenarioValidationError as exc:
            raise self._workload_errors(exc) from exc

    def update(self, instance: Workload, validated_data: dict[str, Any]) -> Workload:
        from simulations.scenarios.services import workload_validate

        for key, value in validated_data.items():
            setattr(instance, key, value)
        instance.full_clean()
        try:
            workload_validate(instance)
        except ScenarioValidationError as exc:
            raise self._workload_errors(exc) from exc
        instance.save()
        return instance


# --- views -----------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="List traces", tags=["workloads"]),
    retrieve=extend_schema(summary="A trace's summary", tags=["workloads"]),
    destroy=extend_schema(
        summary="Delete a trace (its owner or staff; 409 naming its users while in use)",
        tags=["workloads"],
        responses={204: None, 409: OpenApiResponse(description="The trace is in use.")},
    ),
)
class TraceViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Request traces (Azure LLM inference format): every signed-in user uploads and reads
    their own, shared and public traces; scenarios refer to them by slug. A trace in use
    cannot be deleted (409 naming the referrers)."""

    serializer_class = TraceSerializer
    lookup_field = "slug"
    lookup_value_regex = SLUG_LOOKUP
    ordering_fields = ("slug", "name", "request_count", "created_at")
    ordering = ("slug",)
    parser_classes = [BoundedJSONParser, BoundedMultiPartParser]

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.traces_visible_to(self.request.user).defer("data").select_related("owner")

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), UploadThrottle()]
        return super().get_throttles()

    def perform_destroy(self, instance: Trace) -> None:
        try:
            services.trace_delete(trace=instance, user=self.request.user)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied("Only its owner or staff delete it.") from exc

    @extend_schema(
        summary="Upload an Azure-format trace (CSV file or text)",
        tags=["workloads"],
        request={
            "multipart/form-data": TraceUploadSerializer,
            "application/json": TraceTextUploadSerializer,
        },
        responses={201: TraceSerializer, 202: TraceSerializer},
    )
    def create(self, request: Request) -> Response:
        """Parse and store a trace (``TIMESTAMP,ContextTokens,GeneratedTokens``)."""
        form = request.content_type.startswith("multipart/")
        data = (TraceUploadSerializer if form else TraceTextUploadSerializer)(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        text = v["file"].read() if "file" in v else v["text"]
        try:
            row = services.trace_import(
                slug=v["slug"],
                name=v["name"],
                text=text,
                source=v.get("source", ""),
                owner=request.user,
                visibility=v["visibility"],
            )
        except DjangoValidationError as exc:
            errors = getattr(exc, "message_dict", {"text": exc.messages})
            if "file" in v and "text" in errors:
                errors = {**errors, "file": errors.pop("text")}
            raise ValidationError(errors) from exc
        # a large upload is parsed by a worker: 202, and the row says queued → done/failed
        queued = row.parse_status != TraceParseStatus.DONE
        return Response(
            TraceSerializer(row).data,
            status=status.HTTP_202_ACCEPTED if queued else status.HTTP_201_CREATED,
        )


class WorkloadFilter(OwnedFilter):
    """Workloads by ownership, sharing and arrival kind."""

    class Meta:
        model = Workload
        fields = ("shared", "arrival_kind")


@extend_schema_view(
    list=extend_schema(summary="List your workloads and shared ones", tags=["workloads"]),
    retrieve=extend_schema(summary="A workload", tags=["workloads"]),
    create=extend_schema(summary="Create a workload", tags=["workloads"]),
    update=extend_schema(summary="Replace a workload (owner)", tags=["workloads"]),
    partial_update=extend_schema(summary="Change a workload (owner)", tags=["workloads"]),
    destroy=extend_schema(summary="Delete a workload (owner)", tags=["workloads"]),
)
class WorkloadViewSet(StrictQueryMixin, viewsets.ModelViewSet):
    """Workloads: owned, optionally shared read-only."""

    serializer_class = WorkloadSerializer
    permission_classes = [permissions.IsAuthenticated, IsOwnerOrReadOnly]
    filterset_class = WorkloadFilter
    ordering_fields = ("name", "created_at", "requests")
    ordering = ("name", "id")

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.workloads_visible_to(self.request.user)
