"""Dashboard routes."""

from django.urls import path

from frontend.views import (
    calibration,
    catalog,
    dashboard,
    plans,
    runs,
    scenarios,
    sweeps,
    tokens,
    validation,
    workloads,
)

app_name = "frontend"

urlpatterns = [
    path("", dashboard.index, name="index"),
    path("examples/<str:key>/run/", dashboard.run_example, name="run_example"),
    # catalog
    path("catalog/", catalog.overview, name="catalog"),
    path("catalog/devices/", catalog.device_list, name="device_list"),
    path("catalog/devices/<str:slug>/", catalog.device_detail, name="device_detail"),
    path("catalog/models/", catalog.model_list, name="model_list"),
    path("catalog/models/import/", catalog.model_import, name="model_import"),
    path("catalog/models/<str:slug>/", catalog.model_detail, name="model_detail"),
    # workloads and traces
    path("workloads/", workloads.workload_list, name="workload_list"),
    path("workloads/new/", workloads.workload_new, name="workload_new"),
    path("workloads/<int:pk>/", workloads.workload_detail, name="workload_detail"),
    path("traces/upload/", workloads.trace_upload, name="trace_upload"),
    path("traces/<str:slug>/", workloads.trace_detail, name="trace_detail"),
    path("traces/<str:slug>/delete/", workloads.trace_delete, name="trace_delete"),
    # scenarios
    path("scenarios/", scenarios.scenario_list, name="scenario_list"),
    path("scenarios/new/", scenarios.scenario_new, name="scenario_new"),
    path("scenarios/<int:pk>/", scenarios.scenario_detail, name="scenario_detail"),
    path("scenarios/<int:pk>/edit/", scenarios.scenario_edit, name="scenario_edit"),
    path("scenarios/<int:pk>/run/", scenarios.scenario_run, name="scenario_run"),
    path("scenarios/<int:pk>/share/", scenarios.scenario_share, name="scenario_share"),
    path("scenarios/<int:pk>/document.json", scenarios.scenario_document, name="scenario_document"),
    path(
        "scenarios/<int:pk>/load-sweep/", scenarios.scenario_load_sweep, name="scenario_load_sweep"
    ),
    # runs
    path("runs/", runs.run_list, name="run_list"),
    path("runs/compare/", runs.run_compare, name="run_compare"),
    path("runs/compare/charts.json", runs.run_compare_charts, name="run_compare_charts"),
    path("runs/<int:pk>/", runs.run_detail, name="run_detail"),
    path("runs/<int:pk>/status.json", runs.run_status, name="run_status"),
    path("runs/<int:pk>/cancel/", runs.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/result.json", runs.run_result_json, name="run_result_json"),
    path("runs/<int:pk>/result.csv", runs.run_result_csv, name="run_result_csv"),
    path("runs/<int:pk>/scenario.json", runs.run_scenario_json, name="run_scenario_json"),
    path("runs/<int:pk>/charts.json", runs.run_charts, name="run_charts"),
    path("runs/<int:pk>/figures/<slug:name>.json", runs.run_figure, name="run_figure"),
    # sweeps
    path("sweeps/", sweeps.sweep_list, name="sweep_list"),
    path("sweeps/<int:pk>/", sweeps.sweep_detail, name="sweep_detail"),
    path("sweeps/<int:pk>/status.json", sweeps.sweep_status, name="sweep_status"),
    path("sweeps/<int:pk>/cancel/", sweeps.sweep_cancel, name="sweep_cancel"),
    # capacity plans
    path("plans/", plans.plan_list, name="plan_list"),
    path("plans/<int:pk>/", plans.plan_detail, name="plan_detail"),
    path("plans/<int:pk>/status.json", plans.plan_status, name="plan_status"),
    path("plans/<int:pk>/cancel/", plans.plan_cancel, name="plan_cancel"),
    path("plans/<int:pk>/scenario/", plans.plan_scenario, name="plan_scenario"),
    # measurement sets and calibration
    path("calibrate/", calibration.calibrate, name="calibrate"),
    path("measurements/import/", calibration.measurement_import, name="measurement_import"),
    path("measurements/<str:slug>/", calibration.measurement_detail, name="measurement_detail"),
    path("calibrations/<int:pk>/", calibration.calibration_detail, name="calibration_detail"),
    path("calibrations/<int:pk>/save/", calibration.calibration_save, name="calibration_save"),
    # validation and tokens
    path("validation/", validation.validation_page, name="validation"),
    path(
        "validation/<slug:paper>/recompute/",
        validation.validation_recompute,
        name="validation_recompute",
    ),
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="token_revoke"),
]
