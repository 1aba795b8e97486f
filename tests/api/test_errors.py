"""Error pages: an API path that no route matches answers JSON, the site HTML."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path", ["/api/devices/bad%0Aslug/", "/api/no-such-collection/", "/api/devices/%13%01/"]
)
def test_an_api_path_no_route_matches_gets_a_json_404(alice: Any, path: str) -> None:
    response = alice.put(path, {"name": "x"}, format="json")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": "No such endpoint or object."}


def test_a_page_no_route_matches_gets_the_html_404(user: Any) -> None:
    client = Client()
    client.force_login(user)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
