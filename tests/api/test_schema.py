"""The OpenAPI schema: drf-spectacular validates it without warnings, Swagger UI is served
from our own static files, and schemathesis finds no server error, no schema violation and
no accepted invalid input (about 25 generated requests per operation and mode, signed in
with an API token)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from rest_framework.test import APIClient
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = pytest.mark.django_db

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


def test_spectacular_validates_the_schema_without_warnings(tmp_path: Any) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in (
        "/api/runs/{id}/result/",
        "/api/sweeps/",
        "/api/plans/",
        "/api/plans/{id}/cancel/",
        "/api/plans/{id}/results/",
        "/api/plans/{id}/pareto/",
        "/api/auth/tokens/",
        "/api/policies/",
    ):
        assert f"  {path}:" in text


def test_swagger_ui_is_served_without_a_cdn(alice: APIClient) -> None:
    page = alice.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html and "/api/schema/" in html
    assert "cdn.jsdelivr.net" not in html and "unpkg.com" not in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html


@pytest.fixture
def token_headers(user: Any) -> dict[str, str]:
    from api.models import ApiToken, hash_key, new_key

    key = new_key()
    ApiToken.objects.create(
        user=user, name="schemathesis", key_hash=hash_key(key), key_hint=key[:10]
    )
    return {"Authorization": f"Token {key}"}


@pytest.fixture
def in_process_wsgi() -> Any:
    """Serve requests through Django's WSGI handler inside the test's transaction.

    Like Django's test client, stop the request signals from closing the connection.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(
    in_process_wsgi: Any,
    catalog: Any,
    token_headers: dict[str, str],
    user: Any,
    document: dict,
    settings: Any,
) -> Any:
    """The live schema, fetched with a token, generating valid and invalid requests.

    Throttles and quotas are lifted so the generated requests exercise validation rather
    than the 429 paths (tested in test_runs.py); one scenario exists so run submissions
    can reference something real.
    """
    from simulations.scenarios import services

    settings.HETPLANNER_API_THROTTLE_RATES = {
        k: "100000/min" for k in settings.HETPLANNER_API_THROTTLE_RATES
    }
    settings.HETPLANNER_MAX_ACTIVE_RUNS_PER_USER = 100_000
    settings.HETPLANNER_MAX_ACTIVE_SWEEPS_PER_USER = 100_000
    settings.HETPLANNER_MAX_ACTIVE_PLANS_PER_USER = 100_000
    services.scenario_create(owner=user, document=document, shared=True)
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", in_process_wsgi, headers=token_headers
    )
    schema.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        max_examples=25,
        deterministic=True,
        with_security_parameters=False,
    )
    return schema


def test_the_api_conforms_to_its_schema(api_schema: Any, token_headers: dict[str, str]) -> None:
    """Every operation, valid and invalid generated requests: collect every failure."""
    failures: dict[str, str] = {}
    operations = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=25,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate],
            )
            def exercise(case: Any) -> None:
                response = case.call(headers=token_headers)
                case.validate_response(response, checks=CHECKS, headers=token_headers)

            try:
                exercise()
            except Unsatisfiable:
                # Nothing to make invalid (an operation without parameters or body).
                assert mode is GenerationMode.NEGATIVE, operation.label
            except (Exception, BaseExceptionGroup) as exc:  # every failure is reported below
                failures[f"{operation.label} [{mode.value}]"] = str(exc)[:3000]
    assert operations >= 40
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
