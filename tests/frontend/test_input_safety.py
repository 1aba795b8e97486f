"""Bad bytes through the pages: a NUL character in a query string (400) or a
path (404), in a scenario, plan or Hugging Face config the pages submit (400 beside the
field, nothing stored), and JSON nested too deeply to parse (400 before parsing)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frontend import builder
from simulations.catalog.models import LLMModel
from simulations.plans.models import Plan
from simulations.scenarios.models import Scenario
from tests.core.planner.helpers import small_doc

from .conftest import glitches_document
from .test_builder import form_of
from .test_catalog_pages import LLAMA_3B_CONFIG

pytestmark = pytest.mark.django_db

NUL = "\u0000"


@pytest.fixture
def staff_client(client: Any, staff: Any) -> Any:
    """A test client signed in as the staff member carol."""
    client.force_login(staff)
    return client


def test_it_refuses_nul_in_a_page_query_string(alice_client: Any, seeded: Any) -> None:
    assert alice_client.get("/catalog/devices/?q=%00").status_code == 400
    assert alice_client.get("/catalog/devices/?q=a%00b&kind=gpu").status_code == 400
    assert alice_client.get("/runs/?status=%00").status_code == 400
    assert alice_client.get("/catalog/devices/?q=a100").status_code == 200


def test_it_answers_404_for_nul_in_a_page_path(alice_client: Any, seeded: Any) -> None:
    assert alice_client.get("/catalog/devices/a%00b/").status_code == 404
    assert alice_client.get("/catalog/models/a%00b/").status_code == 404
    assert alice_client.get("/traces/a%00b/").status_code == 404


def test_it_refuses_nul_in_a_scenario_name_from_the_builder(alice_client: Any, seeded: Any) -> None:
    state = builder.state_from_document(glitches_document())
    state.name = f"a{NUL}b"
    data = form_of(state)
    data["action"] = "save"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    assert "NUL" in response.content.decode()
    assert not Scenario.objects.exists()


def test_it_refuses_nul_in_a_plan_document_from_the_page(alice_client: Any, seeded: Any) -> None:
    doc = small_doc(description=f"x{NUL}")
    response = alice_client.post("/plans/", {"document": json.dumps(doc)})
    assert response.status_code == 400
    html = response.content.decode()
    assert "description" in html and "NUL" in html
    assert not Plan.objects.exists()


def test_it_refuses_a_deeply_nested_plan_document_from_the_page(
    alice_client: Any, seeded: Any
) -> None:
    text = '{"name": "x", "space": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = alice_client.post("/plans/", {"document": text})
    assert response.status_code == 400
    assert "nested deeper than 64" in response.content.decode()
    assert not Plan.objects.exists()


def test_it_refuses_a_deeply_nested_config_in_the_page_model_import(
    staff_client: Any, seeded: Any
) -> None:
    text = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = staff_client.post("/catalog/models/import/", {"slug": "deep", "config": text})
    assert response.status_code == 400
    assert "nested deeper than 64" in response.content.decode()
    assert not LLMModel.objects.filter(slug="deep").exists()


def test_it_refuses_nul_in_a_config_value_in_the_page_model_import(
    staff_client: Any, seeded: Any
) -> None:
    config = {**LLAMA_3B_CONFIG, "architectures": [f"Llama{NUL}"]}
    response = staff_client.post(
        "/catalog/models/import/", {"slug": "nul-llama", "config": json.dumps(config)}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "architectures[0]" in html and "NUL" in html
    assert not LLMModel.objects.filter(slug="nul-llama").exists()
