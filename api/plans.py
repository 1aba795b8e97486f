"""Capacity plans: ``/api/plans/`` (submit, cancel, results, the Pareto front)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from api import fields as strict
from api.common import query_choice, results_endpoint, results_response
from api.filters import StrictFilterSet, StrictQueryMixin
from api.renderers import columns_for
from api.scenarios import document_schema
from api.throttles import (
    PlanSubmitThrottle,
)
from simulations.choices import (
    RunStatus,
)
from simulations.plans import selectors as plan_selectors
from simulations.plans import services as plan_services
from simulations.plans.models import Plan, PlanResult

# --- serializers -----------------------------------------------------------------------------


# --- capacity plans --------------------------------------------------------------------------


@extend_schema_field(
    document_schema(
        "A plan document: name, model, workload, targets, constraints, space "
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
        fields: tuple[str, ...] = (
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


# --- views -----------------------------------------------------------------------------------


# --- capacity plans --------------------------------------------------------------------------


class PlanFilter(StrictFilterSet):
    """Plans by status."""

    status = filters.ChoiceFilter(choices=RunStatus.choices)

    class Meta:
        model = Plan
        fields = ("status",)


def _flat(prefix: str, value: Any, row: dict[str, Any]) -> None:
    """Scalars of ``value`` into ``row``, nested objects as ``prefix_sub``; lists left out."""
    if value is None or isinstance(value, bool | int | float | str):
        row[prefix] = value
    elif isinstance(value, dict):
        for sub, inner in value.items():
            _flat(f"{prefix}_{sub}", inner, row)


def plan_table(results: QuerySet[Any]) -> dict[str, Any]:
    """A plan's confirmed configurations as CSV: one row per configuration."""
    leading = ("key", "round", "feasible", "capex_usd", "error")
    rows: list[dict[str, Any]] = []
    for r in results.iterator(chunk_size=1000):
        ev = r.evaluation or {}
        row: dict[str, Any] = {
            "key": r.key,
            "round": r.round,
            "feasible": r.feasible,
            "capex_usd": r.capex_usd,
            "error": ev.get("error", ""),
            "misses": "; ".join(str(m) for m in ev.get("misses") or []),
        }
        for name, value in (ev.get("metrics") or {}).items():
            _flat(name, value, row)
        rows.append(row)
    columns = columns_for(rows, leading=leading) if rows else list(leading)
    return {"columns": columns, "rows": rows}


@extend_schema_view(
    list=extend_schema(summary="List your capacity plans", tags=["plans"]),
    retrieve=extend_schema(
        summary="A plan: status, progress, recommendation and report once done",
        tags=["plans"],
        responses=PlanDetailSerializer,
    ),
)
class PlanViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Capacity plans: submit a plan document (validated, then queued; 202),
    watch the search, cancel it, read the confirmed configurations (JSON or CSV, partial
    while it runs), the Pareto points and, once done, the recommendation and report.
    Plans are private to their submitter."""

    serializer_class = PlanSerializer
    filterset_class = PlanFilter
    ordering_fields = ("created_at", "finished_at", "status", "name")
    ordering = ("-created_at", "-id")

    def get_queryset(self) -> QuerySet[Any]:
        qs = plan_selectors.plans_visible_to(self.request.user)
        if self.action in ("list", "create", "cancel"):
            return qs.defer("document", "result")
        return qs

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.action == "retrieve":
            return PlanDetailSerializer
        return super().get_serializer_class()

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), PlanSubmitThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Submit a plan document (validated, then queued; 202)",
        tags=["plans"],
        request=PlanSerializer,
        responses={202: PlanSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Validate ``document`` against the catalog (400 keyed by JSON path, nothing
        stored) and queue its search; 202 with the plan."""
        data = self.get_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        plan = plan_services.plan_create(spec=data.validated_data["document"], owner=request.user)
        body = PlanSerializer(plan, context=self.get_serializer_context()).data
        location = request.build_absolute_uri(f"{request.path.rstrip('/')}/{plan.pk}/")
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @extend_schema(
        summary="Cancel a queued or running plan",
        tags=["plans"],
        request=None,
        responses={200: PlanSerializer},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the plan (a no-op on a final plan); confirmed results stay readable."""
        plan = self.get_object()
        plan_services.plan_cancel(plan=plan, user=request.user)
        plan = self.get_queryset().get(pk=plan.pk)
        return Response(PlanSerializer(plan, context=self.get_serializer_context()).data)

    @results_endpoint(
        summary="Confirmed configurations, cheapest first (partial while running; CSV with "
        "?format=csv)",
        tags=["plans"],
        filter_param=OpenApiParameter(
            "feasible",
            OpenApiTypes.STR,
            enum=["true", "false"],
            description="Only configurations that do (true) or do not (false) meet every target.",
        ),
        serializer_class=PlanResultSerializer,
        page_serializer=PaginatedPlanResultList,
        csv_description="One row per confirmed configuration.",
    )
    def results(self, request: Request, pk: str | None = None) -> Response:
        """The configurations the engine confirmed so far (paginated as JSON)."""
        plan = self.get_object()
        qs = plan_selectors.plan_results(plan)
        wanted = query_choice(request, "feasible", ("true", "false"), "Must be true or false.")
        if wanted is not None:
            qs = qs.filter(feasible=wanted == "true")
        return results_response(self, request, qs, table=plan_table, filename=f"plan-{plan.pk}.csv")

    @extend_schema(
        summary="The Pareto points: every confirmed configuration, fronts marked",
        tags=["plans"],
        responses={200: PlanParetoSerializer},
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def pareto(self, request: Request, pk: str | None = None) -> Response:
        """Capex, throughput and energy per token of each confirmed configuration, and
        whether it is on a Pareto front of the finished plan (partial while running)."""
        plan = self.get_object()
        body = {
            "plan": plan.pk,
            "final": plan.is_final,
            "points": plan_selectors.plan_pareto_points(plan),
        }
        return Response(PlanParetoSerializer(body).data)
