"""Simulation runs: ``/api/runs/`` (submit, cancel, events, results as JSON or CSV).

A run POST is throttled per user and bounded by the per-user quota of active runs.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from api import fields as strict
from api.common import csv_attachment
from api.filters import IdFilter, StrictFilterSet, StrictQueryMixin
from api.renderers import CSVRenderer, result_table
from api.throttles import (
    RunSubmitThrottle,
)
from simulations.choices import (
    RunStatus,
)
from simulations.runs import selectors as run_selectors
from simulations.runs import services
from simulations.runs.models import RunEvent, SimulationRun
from simulations.scenarios import selectors as scenario_selectors

# --- serializers -----------------------------------------------------------------------------


class RunEventSerializer(strict.ModelSerializer):
    """One lifecycle event of a run."""

    class Meta:
        model = RunEvent
        fields = ("kind", "attempt", "message", "at")
        read_only_fields = fields


class VisibleScenarioField(serializers.PrimaryKeyRelatedField):
    """A scenario the requesting user may read (own or shared); others look nonexistent."""

    def get_queryset(self) -> Any:
        return scenario_selectors.scenarios_visible_to(self.context["request"].user)


class RunSerializer(strict.ModelSerializer):
    """A run: lifecycle state, progress, timestamps (the result has its own endpoint)."""

    scenario = VisibleScenarioField()
    scenario_name = strict.CharField(source="scenario.name", read_only=True)

    class Meta:
        model = SimulationRun
        fields: tuple[str, ...] = (
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
    """The result document (docs/architecture.md) of a succeeded run."""

    run = strict.IntegerField()
    result = serializers.DictField(help_text="The result document.")


# --- views -----------------------------------------------------------------------------------


# --- runs ------------------------------------------------------------------------------------


class RunFilter(StrictFilterSet):
    """Runs by status and scenario (an id with no visible run simply matches nothing)."""

    status = filters.ChoiceFilter(choices=RunStatus.choices)
    scenario = IdFilter(field_name="scenario_id", label="Scenario id")

    class Meta:
        model = SimulationRun
        fields = ("status", "scenario")


@extend_schema_view(
    list=extend_schema(summary="List your runs", tags=["runs"]),
    retrieve=extend_schema(
        summary="A run: status, progress, events", tags=["runs"], responses=RunDetailSerializer
    ),
)
class RunViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Simulation runs: submit a scenario (202), watch status and progress, cancel, read
    the result as JSON or CSV. Runs are private to their submitter."""

    serializer_class = RunSerializer
    filterset_class = RunFilter
    ordering_fields = ("created_at", "finished_at", "status")
    ordering = ("-created_at", "-id")

    def get_queryset(self) -> QuerySet[Any]:
        qs = run_selectors.runs_visible_to(self.request.user)
        if self.action == "list":
            return qs.defer("document", "result", "scenario__document")
        if self.action == "retrieve":
            return qs.defer("result").prefetch_related(
                Prefetch("events", queryset=RunEvent.objects.order_by("id"))
            )
        return qs

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.action == "retrieve":
            return RunDetailSerializer
        return super().get_serializer_class()

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), RunSubmitThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Submit a run of a scenario (queued; 202)",
        tags=["runs"],
        request=RunSerializer,
        responses={202: RunSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Queue a run of ``scenario`` (yours or shared); 202 with the run."""
        data = self.get_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_submit(scenario=data.validated_data["scenario"], owner=request.user)
        body = RunSerializer(run, context=self.get_serializer_context()).data
        location = request.build_absolute_uri(f"{request.path.rstrip('/')}/{run.pk}/")
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @extend_schema(
        summary="Cancel a queued or running run",
        tags=["runs"],
        request=None,
        responses={200: RunSerializer},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the run (a no-op on a final run); returns the run."""
        run = self.get_object()
        services.run_cancel(run=run, user=request.user)
        run = self.get_queryset().get(pk=run.pk)
        return Response(RunSerializer(run, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="The result document (JSON, or CSV with ?format=csv)",
        tags=["runs"],
        parameters=[
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=["json", "csv"], description="Output format."
            )
        ],
        responses={
            (200, "application/json"): RunResultSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="One row per system."),
            409: OpenApiResponse(description="The run has no result (not succeeded)."),
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, CSVRenderer])
    def result(self, request: Request, pk: str | None = None) -> Response:
        """The stored result document of a succeeded run."""
        run = self.get_object()
        if run.status != RunStatus.SUCCEEDED or run.result is None:
            return Response(
                {"detail": f"The run is {run.status}; only a succeeded run has a result."},
                status=status.HTTP_409_CONFLICT,
            )
        if request.accepted_renderer.format == "csv":
            return csv_attachment(result_table(run.result), f"run-{run.pk}-result.csv")
        return Response({"run": run.pk, "result": run.result})
