"""The API docs are reachable: a signed-out browser is sent to sign in (not a bare 401 page)
and every page links to them."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_a_signed_out_browser_is_sent_to_sign_in_then_back_to_the_docs() -> None:
    response = Client().get("/api/docs/", HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/api/docs/"


def test_a_signed_out_api_client_still_gets_401() -> None:
    response = APIClient().get("/api/docs/", format="json")
    assert response.status_code == 401


def test_pages_link_to_the_api_docs(user: Any) -> None:
    client = Client()
    client.force_login(user)
    assert 'href="/api/docs/"' in client.get("/tokens/").content.decode()
    assert 'href="/api/docs/"' in Client().get("/accounts/login/").content.decode()
