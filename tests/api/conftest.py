"""Fixtures of the REST API tests: clients per persona, the built-in catalog, documents."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient


@pytest.fixture(autouse=True)
def _fresh_throttles() -> Any:
    """Throttle counters live in the (per-process) cache: start every test from zero."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def catalog(builtin_catalog_rows: Any) -> Any:
    """The built-in catalog in the database."""
    return builtin_catalog_rows


@pytest.fixture
def client_for() -> Callable[[Any], APIClient]:
    """An API client signed in as ``user`` (forced authentication: no CSRF, no token)."""

    def make(user: Any) -> APIClient:
        client = APIClient()
        client.force_authenticate(user)
        return client

    return make


@pytest.fixture
def alice(user: Any, client_for: Callable[[Any], APIClient]) -> APIClient:
    """Signed in as the planner ``alice``."""
    return client_for(user)


@pytest.fixture
def bob(other_user: Any, client_for: Callable[[Any], APIClient]) -> APIClient:
    """Signed in as the second planner ``bob``."""
    return client_for(other_user)


@pytest.fixture
def carol(staff: Any, client_for: Callable[[Any], APIClient]) -> APIClient:
    """Signed in as the staff member ``carol``."""
    return client_for(staff)


SCENARIO = {
    "name": "A100 vs H100, small",
    "model": "llama3.2-3b",
    "workload": {
        "requests": 20,
        "input_tokens": 256,
        "output_tokens": 32,
        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
        "seed": 1,
    },
    "systems": [
        {
            "name": "1xA100",
            "policy": "homogeneous",
            "devices": [{"device": "a100-80gb", "count": 1}],
            "options": {"max_batch": 8},
        },
        {
            "name": "1xH100",
            "policy": "homogeneous",
            "devices": [{"device": "h100-sxm", "count": 1}],
        },
    ],
    "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 100},
}


@pytest.fixture
def document() -> dict[str, Any]:
    """A valid scenario document against the built-in catalog (a fresh copy)."""
    return copy.deepcopy(SCENARIO)
