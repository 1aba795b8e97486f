"""REST API views (DRF viewsets) over the catalog, workloads, scenarios, runs, sweeps,
capacity plans, policies and API tokens.

Deny by default: every view needs a signed-in user (session or token). Private rows are
filtered out of the querysets, so another user's scenario, workload, run, sweep, plan or token
answers 404 (never 403). Session writes need the CSRF token (DRF's SessionAuthentication).
Work-queuing POSTs are throttled per user and bounded by per-user quotas.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import (
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    ValidationError,
)
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api import serializers as s
from api import services as api_services
from api.filters import IdFilter, StrictFilterSet, StrictQueryMixin
from api.models import ApiToken
from api.parsers import BoundedJSONParser, BoundedMultiPartParser
from api.permissions import CatalogEditorOrReadOnly, IsOwnerOrReadOnly
from api.renderers import CSVRenderer, columns_for, result_table, system_row
from api.throttles import (
    PlanSubmitThrottle,
    RunSubmitThrottle,
    SweepSubmitThrottle,
    TokenExchangeThrottle,
    TokenThrottle,
    UploadThrottle,
)
from simulations import selectors, services
from simulations.choices import ACTIVE_STATUSES, RunStatus, TraceParseStatus
from simulations.core.errors import UnknownPolicyError
from simulations.core.policies import get_policy, policy_names
from simulations.device_families import device_kind_choices
from simulations.measurements.selectors import runtimes_visible_to
from simulations.models import RunEvent, SimulationRun, Trace
from simulations.plans import selectors as plan_selectors
from simulations.plans import services as plan_services
from simulations.plans.models import Plan
from simulations.sweeps import selectors as sweep_selectors
from simulations.sweeps import services as sweep_services
from simulations.sweeps.models import ConfigurationStatus, SweepStatus

CATALOG_METHODS = ["get", "post", "put", "delete", "head", "options"]
#: Catalog slugs may contain dots (llama3.1-8b), which DRF's default lookup excludes.
SLUG_LOOKUP = r"[a-z0-9][a-z0-9._-]*"


def _lock_user(user: Any) -> None:
    """Serialise one user's quota checks (row lock on PostgreSQL; SQLite serialises writes)."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()


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
        model = s.Device
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

    serializer_class = s.DeviceSerializer
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
        responses={200: s.DeviceKindSerializer(many=True)},
    )
    @action(
        detail=False, methods=["get"], url_path="kinds", pagination_class=None, filter_backends=[]
    )
    def kinds(self, request: Request) -> Response:
        """Every device kind with its family's parameters (name, label, type, unit, bounds,
        help text, required): what a device's ``params`` may hold."""
        return Response(s.device_kinds_schema())


class RuntimeFilter(StrictFilterSet):
    """Runtime profiles by device kind."""

    device_kind = KindFilter(choices=device_kind_choices)

    class Meta:
        model = s.RuntimeProfile
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

    serializer_class = s.RuntimeProfileSerializer
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

    serializer_class = s.LLMModelSerializer
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
        request=s.HfImportSerializer,
        responses={201: s.LLMModelSerializer},
    )
    @action(detail=False, methods=["post"], url_path="import-hf")
    def import_hf(self, request: Request) -> Response:
        """Create or update the model ``slug`` from a ``config.json`` object."""
        data = s.HfImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        row = services.hf_model_import(
            config=data.validated_data["config"],
            slug=data.validated_data["slug"],
            name=data.validated_data["name"],
        )
        return Response(s.LLMModelSerializer(row).data, status=status.HTTP_201_CREATED)


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

    serializer_class = s.TraceSerializer
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
            "multipart/form-data": s.TraceUploadSerializer,
            "application/json": s.TraceTextUploadSerializer,
        },
        responses={201: s.TraceSerializer, 202: s.TraceSerializer},
    )
    def create(self, request: Request) -> Response:
        """Parse and store a trace (``TIMESTAMP,ContextTokens,GeneratedTokens``)."""
        form = request.content_type.startswith("multipart/")
        data = (s.TraceUploadSerializer if form else s.TraceTextUploadSerializer)(data=request.data)
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
            s.TraceSerializer(row).data,
            status=status.HTTP_202_ACCEPTED if queued else status.HTTP_201_CREATED,
        )


# --- workloads and scenarios -----------------------------------------------------------------


class OwnedFilter(StrictFilterSet):
    """``mine=true`` keeps the caller's own rows; ``shared`` filters on the sharing flag."""

    mine = filters.BooleanFilter(method="filter_mine", label="Only my own rows")

    def filter_mine(self, queryset: QuerySet[Any], name: str, value: bool) -> QuerySet[Any]:
        user = self.request.user
        return queryset.filter(owner=user) if value else queryset.exclude(owner=user)


class WorkloadFilter(OwnedFilter):
    """Workloads by ownership, sharing and arrival kind."""

    class Meta:
        model = s.Workload
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

    serializer_class = s.WorkloadSerializer
    permission_classes = [permissions.IsAuthenticated, IsOwnerOrReadOnly]
    filterset_class = WorkloadFilter
    ordering_fields = ("name", "created_at", "requests")
    ordering = ("name", "id")

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.workloads_visible_to(self.request.user)


class ScenarioFilter(OwnedFilter):
    """Scenarios by ownership and sharing; ``name`` matches part of the name."""

    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = s.Scenario
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

    serializer_class = s.ScenarioSerializer
    permission_classes = [permissions.IsAuthenticated, IsOwnerOrReadOnly]
    filterset_class = ScenarioFilter
    ordering_fields = ("name", "created_at", "updated_at")
    ordering = ("-created_at", "-id")

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.scenarios_visible_to(self.request.user)


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
        summary="A run: status, progress, events", tags=["runs"], responses=s.RunDetailSerializer
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

    serializer_class = s.RunSerializer
    filterset_class = RunFilter
    ordering_fields = ("created_at", "finished_at", "status")
    ordering = ("-created_at", "-id")

    def get_queryset(self) -> QuerySet[Any]:
        qs = selectors.runs_visible_to(self.request.user)
        if self.action == "list":
            return qs.defer("document", "result", "scenario__document")
        if self.action == "retrieve":
            return qs.defer("result").prefetch_related(
                Prefetch("events", queryset=RunEvent.objects.order_by("id"))
            )
        return qs

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.action == "retrieve":
            return s.RunDetailSerializer
        return super().get_serializer_class()

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), RunSubmitThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Submit a run of a scenario (queued; 202)",
        tags=["runs"],
        request=s.RunSerializer,
        responses={202: s.RunSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Queue a run of ``scenario`` (yours or shared); 202 with the run."""
        data = self.get_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = request.user
        limit = int(settings.HETPLANNER_MAX_ACTIVE_RUNS_PER_USER)
        with transaction.atomic():
            _lock_user(user)
            active = SimulationRun.objects.filter(owner=user, status__in=ACTIVE_STATUSES).count()
            if active >= limit:
                raise sweep_services.QuotaExceededError(
                    f"active runs per user: you have {active} queued or running; at most {limit}"
                )
            run = services.simulation_run_create(
                scenario=data.validated_data["scenario"], owner=user
            )
        body = s.RunSerializer(run, context=self.get_serializer_context()).data
        location = request.build_absolute_uri(f"{request.path.rstrip('/')}/{run.pk}/")
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @extend_schema(
        summary="Cancel a queued or running run",
        tags=["runs"],
        request=None,
        responses={200: s.RunSerializer},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the run (a no-op on a final run); returns the run."""
        run = self.get_object()
        services.run_cancel(run=run, user=request.user)
        run = self.get_queryset().get(pk=run.pk)
        return Response(s.RunSerializer(run, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="The result document (JSON, or CSV with ?format=csv)",
        tags=["runs"],
        parameters=[
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=["json", "csv"], description="Output format."
            )
        ],
        responses={
            (200, "application/json"): s.RunResultSerializer,
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
            response = Response(result_table(run.result))
            response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-result.csv"'
            return response
        return Response({"run": run.pk, "result": run.result})


# --- policies --------------------------------------------------------------------------------


def _policy_entry(name: str) -> dict[str, Any]:
    cls = get_policy(name)
    entry = cls.describe()
    entry["defaults"] = {o.name: o.default for o in cls.options}
    return entry


@extend_schema_view(
    list=extend_schema(summary="Registered scheduling policies", tags=["policies"]),
    retrieve=extend_schema(summary="A policy: roles, options, defaults", tags=["policies"]),
)
class PolicyViewSet(StrictQueryMixin, viewsets.ViewSet):
    """The policy registry of the simulation core: names, device roles, option schemas and
    defaults (what the scenario builder renders)."""

    serializer_class = s.PolicySerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9._+-]+"

    def list(self, request: Request) -> Response:
        """Every registered policy, by name (not paginated: the registry is small)."""
        return Response(
            s.PolicySerializer([_policy_entry(n) for n in policy_names()], many=True).data
        )

    def retrieve(self, request: Request, name: str | None = None) -> Response:
        """One policy."""
        try:
            entry = _policy_entry(str(name))
        except UnknownPolicyError:
            raise NotFound(f"No policy named {name!r}.") from None
        return Response(s.PolicySerializer(entry).data)


# --- sweeps ----------------------------------------------------------------------------------


class SweepFilter(StrictFilterSet):
    """Sweeps by status."""

    status = filters.ChoiceFilter(choices=SweepStatus.choices)

    class Meta:
        model = s.Sweep
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

    serializer_class = s.SweepSerializer
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
        responses={202: s.SweepSerializer},
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
        body = s.SweepSerializer(sweep, context=self.get_serializer_context()).data
        location = request.build_absolute_uri(f"{request.path.rstrip('/')}/{sweep.pk}/")
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @extend_schema(
        summary="Cancel a queued or running sweep",
        tags=["sweeps"],
        request=None,
        responses={200: s.SweepSerializer},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the sweep; recorded configurations stay readable."""
        sweep = self.get_object()
        sweep_services.sweep_cancel(sweep=sweep, user=request.user)
        sweep.refresh_from_db()
        return Response(s.SweepSerializer(sweep, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="Recorded configurations (partial while running; CSV with ?format=csv)",
        tags=["sweeps"],
        parameters=[
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=["json", "csv"], description="Output format."
            ),
            OpenApiParameter(
                "status",
                OpenApiTypes.STR,
                enum=ConfigurationStatus.values,
                description="Only configurations with this outcome.",
            ),
            OpenApiParameter("page", OpenApiTypes.INT, description="Page number (JSON)."),
            OpenApiParameter(
                "page_size", OpenApiTypes.INT, description="Items per page (JSON, at most 100)."
            ),
        ],
        responses={
            (200, "application/json"): s.PaginatedSweepResultList,
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="One row per configuration and system."
            ),
        },
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, CSVRenderer],
        serializer_class=s.SweepResultSerializer,
        filter_backends=[],
    )
    def results(self, request: Request, pk: str | None = None) -> Response:
        """The configurations recorded so far, by index (paginated as JSON)."""
        sweep = self.get_object()
        qs = sweep_selectors.sweep_results(sweep)
        wanted = request.query_params.get("status")
        if wanted is not None:
            if wanted not in ConfigurationStatus.values:
                raise ValidationError(
                    {"status": [f"Must be one of: {', '.join(ConfigurationStatus.values)}."]}
                )
            qs = qs.filter(status=wanted)
        if request.accepted_renderer.format == "csv":
            response = Response(sweep_table(sweep, qs))
            response["Content-Disposition"] = f'attachment; filename="sweep-{sweep.pk}.csv"'
            return response
        page = self.paginate_queryset(qs)
        data = s.SweepResultSerializer(page, many=True).data
        return self.get_paginated_response(data)


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
        responses=s.PlanDetailSerializer,
    ),
)
class PlanViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Capacity plans (issue 10): submit a plan document (validated, then queued; 202),
    watch the search, cancel it, read the confirmed configurations (JSON or CSV, partial
    while it runs), the Pareto points and, once done, the recommendation and report.
    Plans are private to their submitter."""

    serializer_class = s.PlanSerializer
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
            return s.PlanDetailSerializer
        return super().get_serializer_class()

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), PlanSubmitThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Submit a plan document (validated, then queued; 202)",
        tags=["plans"],
        request=s.PlanSerializer,
        responses={202: s.PlanSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Validate ``document`` against the catalog (400 keyed by JSON path, nothing
        stored) and queue its search; 202 with the plan."""
        data = self.get_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        plan = plan_services.plan_create(spec=data.validated_data["document"], owner=request.user)
        body = s.PlanSerializer(plan, context=self.get_serializer_context()).data
        location = request.build_absolute_uri(f"{request.path.rstrip('/')}/{plan.pk}/")
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @extend_schema(
        summary="Cancel a queued or running plan",
        tags=["plans"],
        request=None,
        responses={200: s.PlanSerializer},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the plan (a no-op on a final plan); confirmed results stay readable."""
        plan = self.get_object()
        plan_services.plan_cancel(plan=plan, user=request.user)
        plan = self.get_queryset().get(pk=plan.pk)
        return Response(s.PlanSerializer(plan, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="Confirmed configurations, cheapest first (partial while running; CSV with "
        "?format=csv)",
        tags=["plans"],
        parameters=[
            OpenApiParameter(
                "format", OpenApiTypes.STR, enum=["json", "csv"], description="Output format."
            ),
            OpenApiParameter(
                "feasible",
                OpenApiTypes.STR,
                enum=["true", "false"],
                description="Only configurations that do (true) or do not (false) meet "
                "every target.",
            ),
            OpenApiParameter("page", OpenApiTypes.INT, description="Page number (JSON)."),
            OpenApiParameter(
                "page_size", OpenApiTypes.INT, description="Items per page (JSON, at most 100)."
            ),
        ],
        responses={
            (200, "application/json"): s.PaginatedPlanResultList,
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="One row per confirmed configuration."
            ),
        },
    )
    @action(
        detail=True,
        methods=["get"],
        renderer_classes=[JSONRenderer, CSVRenderer],
        serializer_class=s.PlanResultSerializer,
        filter_backends=[],
    )
    def results(self, request: Request, pk: str | None = None) -> Response:
        """The configurations the engine confirmed so far (paginated as JSON)."""
        plan = self.get_object()
        qs = plan_selectors.plan_results(plan)
        wanted = request.query_params.get("feasible")
        if wanted is not None:
            if wanted not in ("true", "false"):
                raise ValidationError({"feasible": ["Must be true or false."]})
            qs = qs.filter(feasible=wanted == "true")
        if request.accepted_renderer.format == "csv":
            response = Response(plan_table(qs))
            response["Content-Disposition"] = f'attachment; filename="plan-{plan.pk}.csv"'
            return response
        page = self.paginate_queryset(qs)
        data = s.PlanResultSerializer(page, many=True).data
        return self.get_paginated_response(data)

    @extend_schema(
        summary="The Pareto points: every confirmed configuration, fronts marked",
        tags=["plans"],
        responses={200: s.PlanParetoSerializer},
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
        return Response(s.PlanParetoSerializer(body).data)


# --- tokens ----------------------------------------------------------------------------------


@extend_schema_view(
    list=extend_schema(summary="Your API tokens (without keys)", tags=["auth"]),
    retrieve=extend_schema(summary="One of your API tokens", tags=["auth"]),
    destroy=extend_schema(summary="Revoke an API token", tags=["auth"]),
)
class ApiTokenViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """API tokens for automation (``Authorization: Token <key>``): create (the key is shown
    once), list, revoke."""

    serializer_class = s.ApiTokenSerializer
    ordering_fields = ("created_at", "name", "last_used_at")
    ordering = ("-created_at", "-id")
    filterset_fields: tuple[str, ...] = ()

    queryset = ApiToken.objects.none()

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.request.user)

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            return [*super().get_throttles(), TokenThrottle()]
        return super().get_throttles()

    @extend_schema(
        summary="Create an API token (the key is in this response only)",
        tags=["auth"],
        responses={201: s.ApiTokenCreatedSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Create a token named ``name``, optionally expiring after ``expires_in_days``."""
        data = self.get_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        return _token_response(
            request.user, data.validated_data["name"], data.validated_data.get("expires_in_days")
        )


def _token_response(user: Any, name: str, expires_in_days: int | None) -> Response:
    try:
        token, key = api_services.api_token_create(
            user=user, name=name, expires_in_days=expires_in_days
        )
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from exc
    token.key = key  # type: ignore[attr-defined]
    return Response(s.ApiTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)


class TokenExchangeView(APIView):
    """Exchange a username and password for a new API token, for automation that cannot use
    the browser (``POST /api/auth/token/``). Open to anonymous callers; throttled by client
    address whatever the outcome; bad credentials are a 401 that does not say which was
    wrong."""

    authentication_classes: list[Any] = []  # credentials are in the body; no session/CSRF
    permission_classes = [permissions.AllowAny]
    throttle_classes = [TokenExchangeThrottle]
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        summary="Exchange a username and password for an API token (the key is in this "
        "response only)",
        tags=["auth"],
        auth=[],
        request=s.TokenExchangeSerializer,
        responses={
            201: s.ApiTokenCreatedSerializer,
            400: OpenApiResponse(description="A field is missing or invalid (named)."),
            401: OpenApiResponse(description="Wrong username or password, or inactive user."),
            429: OpenApiResponse(description="Too many attempts; retry after Retry-After s."),
        },
    )
    def post(self, request: Request) -> Response:
        """Check the credentials and create a token named ``name`` (default "password
        exchange"), optionally expiring after ``expires_in_days``."""
        data = s.TokenExchangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(
            request._request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
        )
        if user is None or not user.is_active:
            response = Response(
                {"detail": "Wrong username or password."}, status=status.HTTP_401_UNAUTHORIZED
            )
            response["WWW-Authenticate"] = "Token"
            return response
        return _token_response(
            user, data.validated_data["name"], data.validated_data.get("expires_in_days")
        )


class ApiDocsView(SpectacularSwaggerView):
    """Swagger UI of the API. A signed-out browser (asking for HTML) is sent to sign in and
    back here, rather than shown a bare 401 page; other callers still get the 401."""

    def handle_exception(self, exc: Exception) -> Any:
        if isinstance(exc, NotAuthenticated) and "text/html" in self.request.headers.get(
            "Accept", ""
        ):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)


class NotFoundView(StrictQueryMixin, APIView):
    """Any other path under /api/: a JSON 404 for signed-in callers (401 for the rest)."""

    schema = None  # not an operation of the API

    def _not_found(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise NotFound("No such endpoint or object.")

    get = post = put = patch = delete = _not_found


__all__ = [
    "ApiTokenViewSet",
    "DeviceViewSet",
    "LLMModelViewSet",
    "PlanViewSet",
    "PolicyViewSet",
    "RunViewSet",
    "RuntimeProfileViewSet",
    "ScenarioViewSet",
    "SweepViewSet",
    "TraceViewSet",
    "WorkloadViewSet",
]
