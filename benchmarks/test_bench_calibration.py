"""Calibration speed target: fitting vllm-fp16 to the A100 kernel set — the fit
and its leave-one-group-out refits — in under 2 s."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.core.calibration.fit import fit_profile
from simulations.core.calibration.gpu_vllm import OPERATORS
from simulations.core.calibration.measurements import load_measurements
from simulations.core.catalog import builtin_catalog


def test_bench_fit_a100_vllm_kernels(benchmark: Any) -> None:
    benchmark.extra_info.update(
        name="calibrate: vllm-fp16 on the A100 kernel set, with hold-out", unit="s", target=2.0
    )
    cat = builtin_catalog()
    stack = cat.runtime("vllm-fp16")

    def run() -> Any:
        return fit_profile(stack, load_measurements(OPERATORS), cat)

    report = benchmark.pedantic(run, rounds=3, iterations=1)
    assert report.mape is not None and report.mape <= 0.08
    assert len(report.holdout) == 6


@pytest.mark.django_db
def test_bench_calibration_request(benchmark: Any) -> None:
    """``POST /api/calibrations/`` on the A100 set (the fit, its hold-out, the report
    stored): the request the Calibrate page and the API make synchronously, because this
    stays near the core fit's time (``simulations/measurements/services.py``)."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from simulations.catalog.services import catalog_seed
    from simulations.measurements.services import measurement_set_import

    benchmark.extra_info.update(
        name="calibrate request: POST /api/calibrations/ on the A100 kernel set",
        unit="s",
        target=2.5,
    )
    catalog_seed()
    user = get_user_model().objects.create_user("bench")
    measurement_set_import(
        slug="a100-ops",
        name="A100 operators",
        text=OPERATORS.read_text(encoding="utf-8"),
        stack="vllm-fp16",
        owner=user,
    )
    client = APIClient()
    client.force_authenticate(user)

    def run() -> Any:
        return client.post("/api/calibrations/", {"measurement_set": "a100-ops"}, format="json")

    response = benchmark.pedantic(run, rounds=3, iterations=1)
    assert response.status_code == 201, response.json()
    assert response.json()["mape"] <= 0.08
