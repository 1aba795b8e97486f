"""Tensor/pipeline parallelism options of a scenario over the API: a TP document is stored
as sent; a degree the model does not divide, or a missing link, is a 400 naming the option's
JSON path with nothing stored; the policy endpoint says which option names a catalog link."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.scenarios.models import Scenario

pytestmark = pytest.mark.django_db

TP_EXAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "llama3.1-70b-fp16-tp4-h100-vs-a100.json"
)


def tp_document() -> dict[str, Any]:
    """The Llama-3.1-70B TP4 example with a fixed-length workload (no trace to store)."""
    doc = json.loads(TP_EXAMPLE.read_text())
    doc["workload"] = {
        "requests": 20,
        "input_tokens": 256,
        "output_tokens": 32,
        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
        "seed": 0,
    }
    return doc


def test_a_tensor_parallel_scenario_is_accepted_as_sent(alice: APIClient, catalog: Any) -> None:
    doc = tp_document()
    created = alice.post("/api/scenarios/", {"document": doc}, format="json")
    assert created.status_code == 201, created.json()
    stored = Scenario.objects.get(pk=created.json()["id"]).document
    assert stored["systems"][1]["options"] == {
        "max_batch": 256,
        "tensor_parallel": 4,
        "link": "pcie4-x16",
    }


@pytest.mark.parametrize(
    ("options", "path", "words"),
    [
        ({"tensor_parallel": 3, "link": "nvlink4"}, "tensor_parallel", "divide"),
        ({"tensor_parallel": 4}, "link", "interconnect"),
        ({"tensor_parallel": 4, "link": "warp-drive"}, "link", "warp-drive"),
        (
            {"tensor_parallel": 2, "link": "nvlink4", "memory_utilization": 0.5},
            "tensor_parallel",
            "raise the degrees",
        ),
        ({"pipeline_parallel": 0}, "pipeline_parallel", "at least 1"),
    ],
)
def test_a_bad_parallel_option_is_a_400_naming_it_and_nothing_is_stored(
    alice: APIClient, catalog: Any, options: dict, path: str, words: str
) -> None:
    doc = tp_document()
    doc["systems"][0]["options"] = {"max_batch": 256, **options}
    refused = alice.post("/api/scenarios/", {"document": copy.deepcopy(doc)}, format="json")
    assert refused.status_code == 400
    errors = refused.json()["document"]
    key = f"systems[0].options.{path}"
    assert key in errors, errors
    assert words in " ".join(errors[key])
    assert not Scenario.objects.exists()


def test_the_policy_endpoint_marks_the_link_option_as_a_catalog_link(alice: APIClient) -> None:
    options = {o["name"]: o for o in alice.get("/api/policies/homogeneous/").json()["options"]}
    assert options["link"]["catalog"] == "links"
    assert "catalog" not in options["tensor_parallel"]
    assert options["tensor_parallel"]["type"] == "int"
    assert options["tensor_parallel"]["default"] == 1
