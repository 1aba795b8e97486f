"""Scenarios: ``/api/scenarios/`` (the scenario document, validated by the core rules)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import permissions, serializers, viewsets

from api import fields as strict
from api.common import OwnedFilter
from api.filters import StrictQueryMixin
from api.permissions import IsOwnerOrReadOnly
from simulations.core import scenario as scenario_rules
from simulations.core.json_fields import MAX_NAME_LENGTH
from simulations.scenarios import selectors
from simulations.scenarios.models import Scenario

# --- serializers -----------------------------------------------------------------------------


# --- scenarios and runs ----------------------------------------------------------------------


def document_schema(description: str, required: list[str], extra: dict[str, Any]) -> Any:
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
    document_schema(
        "A scenario document (docs/architecture.md): name, model, workload, systems, slo, and "
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

    owner: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
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
        from simulations.scenarios.services import scenario_create

        return scenario_create(
            owner=self.context["request"].user,
            document=validated_data["document"],
            shared=validated_data.get("shared", False),
            new_systems=True,
        )

    def update(self, instance: Scenario, validated_data: dict[str, Any]) -> Scenario:
        from simulations.scenarios.services import scenario_update

        return scenario_update(
            scenario=instance,
            document=validated_data.get("document"),
            shared=validated_data.get("shared"),
        )


# --- views -----------------------------------------------------------------------------------


class ScenarioFilter(OwnedFilter):
    """Scenarios by ownership and sharing; ``name`` matches part of the name."""

    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Scenario
        fields = ("shared", "name")


@extend_schema_view(
    list=extend_schema(summary="List your scenarios and shared ones", tags=["scenarios"]),
    retrieve=extend_schema(summary="A scenario", tags=["scenarios"]),
    create=extend_schema(summary="Validate and store a scenario document", tags=["scenarios"]),
    update=extend_schema(summary="Replace a scenario (owner)", tags=["scenarios"]),
    partial_update=extend_schema(summary="Change a scenario (owner)", tags=["scenarios"]),
    destroy=extend_schema(summary="Delete a scenario without runs (owner)", tags=["scenarios"]),
)
class ScenarioViewSet(StrictQueryMixin, viewsets.ModelViewSet):
    """Scenario documents: owned, optionally shared read-only."""

    serializer_class = ScenarioSerializer
    permission_classes = [permissions.IsAuthenticated, IsOwnerOrReadOnly]
    filterset_class = ScenarioFilter
    ordering_fields = ("name", "created_at", "updated_at")
    ordering = ("-created_at", "-id")

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.scenarios_visible_to(self.request.user)
