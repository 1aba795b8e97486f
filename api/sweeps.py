"""Parameter sweeps: ``/api/sweeps/`` (submit, cancel, results as JSON or CSV)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from api import fields as strict
from api.common import query_choice, results_endpoint, results_response
from api.filters import StrictFilterSet, StrictQueryMixin
from api.renderers import columns_for, system_row
from api.scenarios import DocumentField
from api.throttles import (
    SweepSubmitThrottle,
)
from simulations.sweeps import selectors as sweep_selectors
from simulations.sweeps import services as sweep_services
from simulations.sweeps.expand import MAX_AXES, MAX_AXIS_VALUES, MAX_PATH_LENGTH
from simulations.sweeps.models import ConfigurationStatus, Sweep, SweepResult, SweepStatus

# --- serializers -----------------------------------------------------------------------------


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
    axes = AxisSerializer(many=True, min_length=1, max_length=MAX_AXES)  # type: ignore[call-arg]  # many=True: DRF's ListSerializer takes them
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


class PaginatedSweepResultList(strict.Serializer):
    """A page of a sweep's recorded configurations."""

    count = strict.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = SweepResultSerializer(many=True)


# --- views -----------------------------------------------------------------------------------


# --- sweeps ----------------------------------------------------------------------------------


class SweepFilter(StrictFilterSet):
    """Sweeps by status."""

    status = filters.ChoiceFilter(choices=SweepStatus.choices)

    class Meta:
        model = Sweep
        fields = ("status",)


def sweep_table(sweep: Any, results: QuerySet[Any]) -> dict[str, Any]:
    """A sweep's results as CSV: one row per (configuration, system)."""
    axis_names = [a["name"] for a in sweep.axes]
    rows: list[dict[str, Any]] = []
    for r in results.iterator(chunk_size=1000):
        base = {"index": r.index, "status": r.status, "error": r.error, **(r.parameters or {})}
        systems = (r.result or {}).get("systems") or [{}]
        for system in systems:
            rows.append({**base, **(system_row(system) if system else {})})
    columns = columns_for(rows, leading=("index", *axis_names, "status", "error"))
    if not rows:
        columns = ["index", *axis_names, "status", "error"]
    return {"columns": columns, "rows": rows}


@extend_schema_view(
    list=extend_schema(summary="List your sweeps", tags=["sweeps"]),
    retrieve=extend_schema(summary="A sweep: counters, progress, summary", tags=["sweeps"]),
)
class SweepViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Parameter sweeps: a scenario template plus axes, expanded (and capped) before
    anything is queued, then simulated in chunks across the workers."""

    serializer_class = SweepSerializer
    filterset_class = SweepFilter
    ordering_fields = ("created_at", "finished_at", "total")
    ordering = ("-created_at", "-id")

    def get_queryset(self) -> QuerySet[Any]:
        qs = sweep_selectors.sweeps_visible_to(self.request.user)
        if self.action == "list":
            return qs.defer("template")
        return qs

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), SweepSubmitThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Submit a sweep (validated and capped, then queued; 202)",
        tags=["sweeps"],
        responses={202: SweepSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Expand the axes over the template; 400 names the axis at fault if the sweep
        passes the configuration cap; 202 with the sweep once its chunks are queued."""
        data = self.get_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        sweep = sweep_services.sweep_create(
            owner=request.user,
            name=v["name"],
            template=v["template"],
            axes=[dict(a) for a in v["axes"]],
            chunk_size=v.get("chunk_size"),
        )
        body = SweepSerializer(sweep, context=self.get_serializer_context()).data
        location = request.build_absolute_uri(f"{request.path.rstrip('/')}/{sweep.pk}/")
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @extend_schema(
        summary="Cancel a queued or running sweep",
        tags=["sweeps"],
        request=None,
        responses={200: SweepSerializer},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the sweep; recorded configurations stay readable."""
        sweep = self.get_object()
        sweep_services.sweep_cancel(sweep=sweep, user=request.user)
        sweep.refresh_from_db()
        return Response(SweepSerializer(sweep, context=self.get_serializer_context()).data)

    @results_endpoint(
        summary="Recorded configurations (partial while running; CSV with ?format=csv)",
        tags=["sweeps"],
        filter_param=OpenApiParameter(
            "status",
            OpenApiTypes.STR,
            enum=ConfigurationStatus.values,
            description="Only configurations with this outcome.",
        ),
        serializer_class=SweepResultSerializer,
        page_serializer=PaginatedSweepResultList,
        csv_description="One row per configuration and system.",
    )
    def results(self, request: Request, pk: str | None = None) -> Response:
        """The configurations recorded so far, by index (paginated as JSON)."""
        sweep = self.get_object()
        qs = sweep_selectors.sweep_results(sweep)
        statuses = ConfigurationStatus.values
        wanted = query_choice(
            request, "status", statuses, f"Must be one of: {', '.join(statuses)}."
        )
        if wanted is not None:
            qs = qs.filter(status=wanted)
        return results_response(
            self, request, qs, table=partial(sweep_table, sweep), filename=f"sweep-{sweep.pk}.csv"
        )
