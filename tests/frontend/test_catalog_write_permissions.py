"""Who may write to the shared catalog from the pages: the same rule as the API
(``simulations.permissions.can_edit_catalog``) — staff write, planners only read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.catalog.models import LLMModel
from simulations.permissions import can_edit_catalog

from .test_catalog_pages import LLAMA_3B_CONFIG

pytestmark = pytest.mark.django_db

#: Every catalog page that writes: (path, form data that would succeed for staff, slug made).
WRITE_PAGES = [
    (
        "/catalog/models/import/",
        {"slug": "shared-llama-3b", "name": "Llama 3B", "config": json.dumps(LLAMA_3B_CONFIG)},
        "shared-llama-3b",
    ),
]


@pytest.mark.parametrize(("path", "data", "slug"), WRITE_PAGES)
def test_a_planner_cannot_write_to_the_catalog_through_a_page(
    client: Any, user: Any, seeded: Any, path: str, data: dict[str, Any], slug: str
) -> None:
    client.force_login(user)
    response = client.post(path, data)
    assert response.status_code == 403
    assert not LLMModel.objects.filter(slug=slug).exists()


@pytest.mark.parametrize(("path", "data", "slug"), WRITE_PAGES)
def test_staff_write_to_the_catalog_through_a_page(
    client: Any, staff: Any, seeded: Any, path: str, data: dict[str, Any], slug: str
) -> None:
    client.force_login(staff)
    response = client.post(path, data)
    assert response.status_code == 302
    assert LLMModel.objects.filter(slug=slug).exists()


def test_a_planner_is_not_offered_the_import_form(client: Any, user: Any, seeded: Any) -> None:
    client.force_login(user)
    html = client.get("/catalog/models/").content.decode()
    assert 'id="hf-import-form"' not in html


def test_the_page_and_the_api_answer_a_catalog_write_alike(
    client: Any, user: Any, staff: Any, seeded: Any
) -> None:
    """One rule: for each persona the page and the API both accept or both refuse."""
    for persona in (user, staff):
        allowed = can_edit_catalog(persona)
        assert allowed is persona.is_staff
        slug = f"imported-by-{persona.username}"
        client.force_login(persona)
        page = client.post(
            "/catalog/models/import/",
            {"slug": slug, "config": json.dumps(LLAMA_3B_CONFIG)},
        )
        api = APIClient()
        api.force_authenticate(persona)
        via_api = api.post(
            "/api/models/import-hf/",
            {"slug": f"{slug}-api", "name": slug, "config": LLAMA_3B_CONFIG},
            format="json",
        )
        assert (page.status_code == 302) is allowed
        assert (via_api.status_code == 201) is allowed
        assert {page.status_code, via_api.status_code} <= ({302, 201} if allowed else {403})


def test_an_inactive_staff_account_cannot_edit_the_catalog(staff: Any) -> None:
    staff.is_active = False
    assert not can_edit_catalog(staff)
