"""The catalog page at / (server-rendered, static CSS via whitenoise)."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_the_index_lists_the_seeded_catalog(client: Any, builtin_catalog_rows: Any) -> None:
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    for slug in builtin_catalog_rows.devices + builtin_catalog_rows.models:
        assert f"<code>{slug}</code>" in html
    for slug in builtin_catalog_rows.runtimes:
        assert f'id="runtime-{slug}"' in html
    assert 'href="/static/frontend/site.css"' in html
    # a URL on a CDN host; a bare "cdn" can occur inside a random CSRF token
    assert not re.search(r"(https?:)?//[^\s\"'<>]*cdn", html, re.I)


def test_the_index_shows_key_figures_with_their_sources(
    client: Any, fixture_catalog_rows: Any
) -> None:
    html = client.get("/").content.decode()
    row = html.split('id="device-t-a100-80gb"')[1].split("</tr>")[0]
    assert "NVIDIA" in row
    assert ">312.0<" in row
    assert "HBM 80 GB · 2039 GB/s" in row
    assert 'title="NVIDIA A100 datasheet r4 (via datasheets.json)"' in row


def test_an_empty_catalog_says_how_to_load_it(client: Any) -> None:
    assert "make setup" in client.get("/").content.decode()


def test_the_stylesheet_is_served_by_whitenoise(client: Any) -> None:
    response = client.get("/static/frontend/site.css")
    assert response.status_code == 200
    assert b"font-family" in b"".join(response.streaming_content)
