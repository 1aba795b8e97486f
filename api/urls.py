"""API routes under /api/: the catalog (with its cloud offers), workloads, scenarios, runs,
sweeps, capacity plans, policies, measurement sets and calibrations, API tokens, the OpenAPI schema
(/api/schema/) and Swagger UI (/api/docs/)."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from api import (
    catalog,
    measurements,
    plans,
    policies,
    prices,
    runs,
    scenarios,
    schema,  # noqa: F401  (registers the token authentication's extension)
    sweeps,
    tokens,
    views,
    workloads,
)

router = DefaultRouter()
router.register("devices", catalog.DeviceViewSet, basename="device")
router.register("runtimes", catalog.RuntimeProfileViewSet, basename="runtime")
router.register("models", catalog.LLMModelViewSet, basename="llmmodel")
router.register("cloud-offers", prices.CloudOfferViewSet, basename="cloudoffer")
router.register("traces", workloads.TraceViewSet, basename="trace")
router.register("workloads", workloads.WorkloadViewSet, basename="workload")
router.register("scenarios", scenarios.ScenarioViewSet, basename="scenario")
router.register("runs", runs.RunViewSet, basename="run")
router.register("sweeps", sweeps.SweepViewSet, basename="sweep")
router.register("plans", plans.PlanViewSet, basename="plan")
router.register("policies", policies.PolicyViewSet, basename="policy")
router.register("measurements", measurements.MeasurementSetViewSet, basename="measurementset")
router.register("calibrations", measurements.CalibrationViewSet, basename="calibration")
router.register("auth/tokens", tokens.ApiTokenViewSet, basename="apitoken")

app_name = "api"

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", views.ApiDocsView.as_view(url_name="api:schema"), name="docs"),
    path("auth/token/", tokens.TokenExchangeView.as_view(), name="token-exchange"),
    path("", include(router.urls)),
    # Anything else under /api/ (e.g. an id that is not a number): JSON 404, not HTML.
    # [\s\S]: a path may hold a newline (%0A) that "." would not match
    re_path(r"^[\s\S]*$", views.NotFoundView.as_view(), name="not-found"),
]
