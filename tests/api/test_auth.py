"""Deny by default, session + CSRF, and API tokens (create, use, revoke, expire)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from django.utils.crypto import get_random_string
from rest_framework.test import APIClient

from api.models import ApiToken, hash_key
from simulations.scenarios.models import Scenario

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


def api_paths() -> list[str]:
    """Every route under /api/ with sample values for its parameters."""
    out: list[str] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            regex = p.pattern.regex.pattern if hasattr(p.pattern, "regex") else str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + regex.lstrip("^").rstrip("$").replace("\\Z", ""))
            elif isinstance(p, URLPattern):
                out.append(prefix + regex.lstrip("^").rstrip("$").replace("\\Z", ""))

    api = next(p for p in get_resolver().url_patterns if getattr(p.pattern, "_route", "") == "api/")
    walk(api.url_patterns, "/api/")
    paths = set()
    for raw in out:
        path = re.sub(
            r"\(\?P<format>([^)]*)\)",
            lambda m: ".json/" if m.group(1).startswith("\\.") else "json",
            raw,
        )
        path = re.sub(r"\(\?P<pk>[^)]*\)", "1", path)
        path = re.sub(r"\(\?P<(slug|name)>[^)]*\)", "a100-80gb", path)
        path = path.replace("\\.", ".").replace("/?", "/")
        assert "(" not in path, path
        paths.add(path)
    return sorted(paths)


def test_the_route_list_covers_every_endpoint() -> None:
    paths = api_paths()
    for expected in (
        "/api/",
        "/api/schema/",
        "/api/docs/",
        "/api/devices/",
        "/api/devices/a100-80gb/",
        "/api/runtimes/",
        "/api/models/",
        "/api/models/import-hf/",
        "/api/traces/",
        "/api/workloads/1/",
        "/api/scenarios/1/",
        "/api/runs/1/cancel/",
        "/api/runs/1/result/",
        "/api/sweeps/1/results/",
        "/api/plans/",
        "/api/plans/1/",
        "/api/plans/1/cancel/",
        "/api/plans/1/results/",
        "/api/plans/1/pareto/",
        "/api/policies/a100-80gb/",
        "/api/auth/tokens/1/",
        "/api/auth/token/",
    ):
        assert expected in paths


#: The one route open to anonymous callers: the password → token exchange
#: (tests/api/test_token_exchange.py).
ANONYMOUS_ROUTES = {"/api/auth/token/"}


@pytest.mark.parametrize("path", [p for p in api_paths() if p not in ANONYMOUS_ROUTES])
def test_anonymous_callers_get_401_on_every_route_and_method(path: str) -> None:
    client = APIClient()
    for method in METHODS:
        response = getattr(client, method)(path, {}, format="json")
        assert response.status_code in (401, 403), (method, path, response.status_code)
        assert response.status_code == 401, (method, path)
        assert response["WWW-Authenticate"] == "Token"


def test_session_writes_without_the_csrf_token_are_refused(
    user: Any, catalog: Any, document: dict
) -> None:
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password="correct horse battery staple")
    response = client.post("/api/scenarios/", {"document": document}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not Scenario.objects.exists()
    # Reads need no token; with the token from the cookie the same write succeeds.
    assert client.get("/api/scenarios/").status_code == 200
    token = get_random_string(32)  # a CSRF secret, as Django puts in the cookie
    client.cookies["csrftoken"] = token
    ok = client.post(
        "/api/scenarios/", {"document": document}, format="json", HTTP_X_CSRFTOKEN=token
    )
    assert ok.status_code == 201, ok.json()
    for method in ("put", "patch", "delete"):
        refused = getattr(client, method)(
            f"/api/scenarios/{ok.json()['id']}/", {"shared": True}, format="json"
        )
        assert refused.status_code == 403


def test_a_token_is_shown_once_stored_hashed_and_authenticates(user: Any, alice: APIClient) -> None:
    created = alice.post("/api/auth/tokens/", {"name": "CI"}, format="json")
    assert created.status_code == 201
    key = created.json()["key"]
    assert key.startswith("hp_") and len(key) > 40
    row = ApiToken.objects.get()
    assert row.key_hash == hash_key(key) and key not in (row.key_hash, row.key_hint)
    listed = alice.get("/api/auth/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["CI"]
    assert "key" not in listed[0]

    automation = APIClient()
    automation.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert automation.get("/api/devices/").status_code == 200
    assert ApiToken.objects.get().last_used_at is not None
    # A token request needs no CSRF token (no session).
    assert automation.post("/api/auth/tokens/", {"name": "2nd"}, format="json").status_code == 201

    assert alice.delete(f"/api/auth/tokens/{row.pk}/").status_code == 204
    assert automation.get("/api/devices/").status_code == 401


def test_expired_and_unknown_tokens_are_refused(user: Any, alice: APIClient) -> None:
    key = alice.post(
        "/api/auth/tokens/", {"name": "short", "expires_in_days": 1}, format="json"
    ).json()["key"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/runs/").status_code == 200
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/runs/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Token hp_not-a-real-key")
    assert client.get("/api/runs/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Token")
    assert client.get("/api/runs/").status_code == 401


def test_token_creation_is_validated_and_capped(user: Any, alice: APIClient, settings: Any) -> None:
    settings.HETPLANNER_MAX_TOKENS_PER_USER = 2
    assert alice.post("/api/auth/tokens/", {"name": ""}, format="json").status_code == 400
    bad = alice.post("/api/auth/tokens/", {"name": "x", "expires_in_days": 0}, format="json")
    assert bad.status_code == 400 and "expires_in_days" in bad.json()
    for name in ("a", "b"):
        assert alice.post("/api/auth/tokens/", {"name": name}, format="json").status_code == 201
    third = alice.post("/api/auth/tokens/", {"name": "c"}, format="json")
    assert third.status_code == 400
    assert "At most 2 tokens" in third.json()["non_field_errors"][0]
    assert ApiToken.objects.count() == 2
