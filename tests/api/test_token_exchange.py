"""Password → token exchange for automation (``POST /api/auth/token/``): a good username and
password give a new API token once; bad ones a 401, a malformed body a 400 naming the field,
and repeated attempts are throttled."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from api.models import ApiToken, hash_key

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
URL = "/api/auth/token/"


def test_a_username_and_password_give_a_working_token(user: Any) -> None:
    response = APIClient().post(
        URL, {"username": "alice", "password": PASSWORD, "name": "ci"}, format="json"
    )
    assert response.status_code == 201, response.json()
    key = response.json()["key"]
    token = ApiToken.objects.get(user=user)
    assert token.name == "ci" and token.key_hash == hash_key(key)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/scenarios/").status_code == 200


def test_bad_credentials_are_a_401_and_store_nothing(user: Any) -> None:
    response = APIClient().post(URL, {"username": "alice", "password": "wrong"}, format="json")
    assert response.status_code == 401
    assert "username or password" in response.json()["detail"]
    response = APIClient().post(URL, {"username": "nobody", "password": PASSWORD}, format="json")
    assert response.status_code == 401
    assert not ApiToken.objects.exists()


def test_a_missing_field_is_a_400_naming_it(user: Any) -> None:
    response = APIClient().post(URL, {"username": "alice"}, format="json")
    assert response.status_code == 400
    assert "password" in response.json()
    assert not ApiToken.objects.exists()


def test_repeated_attempts_are_throttled(user: Any, settings: Any) -> None:
    settings.HETPLANNER_API_THROTTLE_RATES = {
        **settings.HETPLANNER_API_THROTTLE_RATES,
        "token_exchange": "3/min",
    }
    client = APIClient()
    codes = [
        client.post(URL, {"username": "alice", "password": "wrong"}, format="json").status_code
        for _ in range(4)
    ]
    assert codes == [401, 401, 401, 429]


def test_the_exchange_is_in_the_schema(alice: APIClient) -> None:
    schema = alice.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/auth/token/"]["post"]
    assert {"201", "400", "401", "429"} <= set(operation["responses"])
