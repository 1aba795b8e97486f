"""A runtime profile's calibration block over the API (read-only provenance)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_a_runtime_says_what_it_was_calibrated_on(alice: APIClient, catalog: Any) -> None:
    eager = alice.get("/api/runtimes/hf-eager-fp16/").json()
    assert eager["calibration"]["devices"] == ["a100-80gb", "v100s"]
    assert (
        eager["calibration"]["method"] == "simulations.core.policies.glitches.calibration.gpu_fp16"
    )
    h2m2 = alice.get("/api/runtimes/h2m2-int8/").json()
    assert h2m2["calibration"]["devices"] == []
