"""The OpenAPI schema says what the server accepts: ``ordering``
values, positive numbers, request property types and unknown properties. The live
schemathesis run (test_schemathesis_live.py) checks the whole API; these pin the cases
it found."""

from __future__ import annotations

import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from api.models import ApiToken
from simulations.scenarios.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(alice: APIClient) -> dict[str, Any]:
    return alice.get("/api/schema/?format=json").json()


def parameter(schema: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    params = schema["paths"][path]["get"]["parameters"]
    return next(p["schema"] for p in params if p["name"] == name)


def test_the_ordering_pattern_accepts_exactly_what_the_server_accepts(
    alice: APIClient, catalog: Any, schema: dict[str, Any]
) -> None:
    pattern = parameter(schema, "/api/devices/", "ordering")["pattern"]
    for value, ok in [
        ("", False),
        (",", False),
        ("name,", False),
        (" name", False),
        ("owner", False),
        ("name", True),
        ("-price_usd,slug", True),
        ("kind,-name,slug", True),
    ]:
        assert bool(re.search(pattern, value)) is ok, value
        status = alice.get("/api/devices/", {"ordering": value}).status_code
        assert status == (200 if ok else 400), (value, status)


def test_free_text_filters_say_they_refuse_empty_values(
    alice: APIClient, schema: dict[str, Any]
) -> None:
    assert parameter(schema, "/api/scenarios/", "name")["minLength"] == 1
    assert alice.get("/api/scenarios/?name=").status_code == 400


def test_a_run_filter_on_an_unknown_scenario_is_empty_not_an_error(
    alice: APIClient, schema: dict[str, Any]
) -> None:
    assert parameter(schema, "/api/runs/", "scenario")["type"] == "integer"
    response = alice.get("/api/runs/?scenario=987654")
    assert response.status_code == 200 and response.json()["count"] == 0


def test_rates_and_time_scales_must_be_above_zero_in_schema_and_server(
    alice: APIClient, schema: dict[str, Any]
) -> None:
    props = schema["components"]["schemas"]["WorkloadRequest"]["properties"]
    for name in ("rate_per_s", "time_scale"):
        assert props[name]["minimum"] == 0 and props[name]["exclusiveMinimum"] is True
    body = {"name": "w", "requests": 10, "input_tokens": 16, "output_tokens": 16}
    response = alice.post(
        "/api/workloads/",
        {**body, "arrival_kind": "poisson", "rate_per_s": 0, "time_scale": 0},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()) >= {"rate_per_s", "time_scale"}
    assert not Workload.objects.exists()


def test_unknown_body_properties_are_refused_as_the_schema_says(
    alice: APIClient, schema: dict[str, Any]
) -> None:
    assert schema["components"]["schemas"]["ApiTokenRequest"]["additionalProperties"] is False
    response = alice.post("/api/auth/tokens/", {"name": "ci", "scope": "all"}, format="json")
    assert response.status_code == 400 and "scope" in response.json()
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": 0},
        {"name": True},
        {"name": "ci", "expires_in_days": "5"},
        {"name": "ci", "expires_in_days": True},
    ],
)
def test_values_of_the_wrong_json_type_are_refused_not_coerced(
    alice: APIClient, body: dict[str, Any]
) -> None:
    assert alice.post("/api/auth/tokens/", body, format="json").status_code == 400
    assert not ApiToken.objects.exists()


def test_a_sweep_needs_at_least_one_axis_in_schema_and_server(
    alice: APIClient, schema: dict[str, Any], document: dict
) -> None:
    axes = schema["components"]["schemas"]["SweepRequest"]["properties"]["axes"]
    assert axes["minItems"] == 1
    body = {"name": "s", "template": document, "axes": []}
    assert alice.post("/api/sweeps/", body, format="json").status_code == 400


def test_a_trace_sent_as_json_is_text_only(alice: APIClient, schema: dict[str, Any]) -> None:
    content = schema["paths"]["/api/traces/"]["post"]["requestBody"]["content"]
    json_schema = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    props = schema["components"]["schemas"][json_schema]
    assert "file" not in props["properties"] and "text" in props["required"]
