"""The shipped examples post as they are: a document naming a trace file the repository
ships (``traces/AzureLLMInferenceTrace_conv.csv``) uses the built-in trace of that file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

EXAMPLE = Path(settings.BASE_DIR) / "examples" / "glitches-azure-conv-poisson.json"


def test_a_shipped_example_naming_a_trace_file_is_accepted(alice: APIClient, catalog: Any) -> None:
    document = json.loads(EXAMPLE.read_text())
    assert "traces/AzureLLMInferenceTrace_conv.csv" in json.dumps(document)
    response = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert response.status_code == 201, response.json()
    stored = json.dumps(response.json()["document"])
    assert "azure-conv-2023" in stored and "traces/" not in stored


def test_an_unknown_trace_file_is_still_refused_naming_the_field(
    alice: APIClient, catalog: Any
) -> None:
    document = json.loads(EXAMPLE.read_text())
    text = json.dumps(document).replace("AzureLLMInferenceTrace_conv.csv", "nope.csv")
    response = alice.post("/api/scenarios/", {"document": json.loads(text)}, format="json")
    assert response.status_code == 400
    assert "unknown trace" in json.dumps(response.json())
