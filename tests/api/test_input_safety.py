"""Bad bytes in API bodies: a NUL character anywhere a JSON body carries text, a
document nested deeper than the depth limit, and numbers JSON cannot represent are refused
with 400 naming the field by its JSON path, before anything is stored (PostgreSQL cannot
store ``\\u0000`` in text or jsonb columns, so these were 500s there)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.catalog.models import LLMModel
from simulations.plans.models import Plan
from simulations.scenarios.models import Scenario, Workload
from simulations.sweeps.models import Sweep
from tests.core.planner.helpers import small_doc

pytestmark = pytest.mark.django_db

NUL = "\u0000"

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "float16",
}


def raw_post(client: APIClient, url: str, text: str) -> Any:
    """POST ``text`` as the JSON body, byte for byte (no re-encoding by the client)."""
    return client.post(url, data=text.encode(), content_type="application/json")


def messages_at(response: Any, path: str) -> str:
    """Every message of a 400 body that mentions ``path`` (as a key or in the text)."""
    body = response.json()
    flat = json.dumps(body)
    assert path in flat, f"{path!r} not named in {flat[:500]}"
    return flat


# --- NUL characters --------------------------------------------------------------------------


def test_it_refuses_nul_in_scenario_name(alice: APIClient, catalog: Any, document: dict) -> None:
    document["name"] = f"a{NUL}b"
    response = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert response.status_code == 400
    assert "NUL" in messages_at(response, "document.name")
    assert not Scenario.objects.exists()


def test_it_refuses_nul_in_scenario_description(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    document["description"] = f"x{NUL}"
    response = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert response.status_code == 400
    messages_at(response, "document.description")
    assert not Scenario.objects.exists()


def test_it_refuses_nul_in_a_nested_scenario_value(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    document["systems"][1]["name"] = f"H{NUL}"
    response = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert response.status_code == 400
    messages_at(response, "document.systems[1].name")
    assert not Scenario.objects.exists()


def test_it_refuses_nul_in_a_json_object_key(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    document["systems"][0]["options"] = {f"max{NUL}batch": 8}
    response = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert response.status_code == 400
    assert "NUL" in json.dumps(response.json())
    assert not Scenario.objects.exists()


def test_it_refuses_nul_in_a_workload_trace_name(alice: APIClient, catalog: Any) -> None:
    body = {
        "name": "w",
        "requests": 10,
        "input_tokens": {"dist": "trace", "trace": f"t{NUL}"},
        "output_tokens": 16,
        "arrival_kind": "closed",
    }
    response = alice.post("/api/workloads/", body, format="json")
    assert response.status_code == 400
    messages_at(response, "input_tokens.trace")
    assert not Workload.objects.exists()


def test_it_refuses_nul_in_a_sweep_template(alice: APIClient, catalog: Any, document: dict) -> None:
    template = copy.deepcopy(document)
    template["description"] = f"d{NUL}"
    body = {
        "name": "sweep",
        "template": template,
        "axes": [{"path": "systems[0].devices[0].count", "values": [1, 2]}],
    }
    response = alice.post("/api/sweeps/", body, format="json")
    assert response.status_code == 400
    messages_at(response, "template.description")
    assert not Sweep.objects.exists()


def test_it_refuses_nul_in_a_sweep_axis_value(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    body = {
        "name": "sweep",
        "template": document,
        "axes": [{"path": "systems[0].policy", "values": ["homogeneous", f"x{NUL}"]}],
    }
    response = alice.post("/api/sweeps/", body, format="json")
    assert response.status_code == 400
    messages_at(response, "axes[0].values[1]")
    assert not Sweep.objects.exists()


def test_it_refuses_nul_in_a_plan_document(alice: APIClient, catalog: Any) -> None:
    response = alice.post("/api/plans/", {"document": small_doc(name=f"p{NUL}")}, format="json")
    assert response.status_code == 400
    messages_at(response, "document.name")
    assert not Plan.objects.exists()


def test_it_refuses_nul_in_a_hugging_face_config_value(carol: APIClient, catalog: Any) -> None:
    config = {**LLAMA_CONFIG, "architectures": [f"Llama{NUL}"]}
    body = {"slug": "nul-llama", "name": "n", "config": config}
    response = carol.post("/api/models/import-hf/", body, format="json")
    assert response.status_code == 400
    messages_at(response, "config.architectures[0]")
    assert not LLMModel.objects.filter(slug="nul-llama").exists()


def test_it_refuses_nul_in_an_api_query_string(alice: APIClient, catalog: Any) -> None:
    response = alice.get("/api/scenarios/?name=a%00b")
    assert response.status_code == 400
    assert "name" in response.json()


def test_it_answers_404_for_nul_in_an_api_path(alice: APIClient, catalog: Any) -> None:
    assert alice.get("/api/devices/a%00b/").status_code == 404
    assert alice.get("/api/traces/a%00b/").status_code == 404


# --- nesting depth ---------------------------------------------------------------------------


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_it_refuses_a_deeply_nested_scenario_before_parsing(alice: APIClient, catalog: Any) -> None:
    text = '{"document": {"name": "x", "systems": ' + deep(100_000) + "}}"
    assert len(text) > 199_000
    response = raw_post(alice, "/api/scenarios/", text)
    assert response.status_code == 400
    assert "nested" in response.json()["detail"]
    assert "64" in response.json()["detail"]
    assert not Scenario.objects.exists()


def test_it_accepts_nesting_up_to_the_limit(alice: APIClient, catalog: Any, document: dict) -> None:
    text = json.dumps({"document": document, "shared": False})
    assert raw_post(alice, "/api/scenarios/", text).status_code == 201


def test_it_refuses_a_deeply_nested_hugging_face_config(carol: APIClient, catalog: Any) -> None:
    text = '{"slug": "deep", "name": "d", "config": {"a": ' + deep(100_000) + "}}"
    response = raw_post(carol, "/api/models/import-hf/", text)
    assert response.status_code == 400
    assert "nested" in response.json()["detail"]
    assert not LLMModel.objects.filter(slug="deep").exists()


def test_brackets_inside_strings_do_not_count_as_nesting(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    document["description"] = "[" * 1000 + '\\"{' * 100
    response = alice.post("/api/scenarios/", {"document": document}, format="json")
    assert response.status_code == 201, response.json()


# --- numbers JSON cannot represent -----------------------------------------------------------


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_it_refuses_a_non_finite_number_naming_its_json_path(
    alice: APIClient, catalog: Any, document: dict, literal: str
) -> None:
    document["workload"]["arrival"]["rate_per_s"] = 12345.5
    text = json.dumps({"document": document}).replace("12345.5", literal)
    response = raw_post(alice, "/api/scenarios/", text)
    assert response.status_code == 400
    messages_at(response, "document.workload.arrival.rate_per_s")
    assert not Scenario.objects.exists()


# --- Hugging Face configs --------------------------------------------------------------------


def test_it_refuses_an_unknown_torch_dtype(carol: APIClient, catalog: Any) -> None:
    config = {**LLAMA_CONFIG, "torch_dtype": "float7"}
    response = carol.post(
        "/api/models/import-hf/", {"slug": "f7", "name": "f7", "config": config}, format="json"
    )
    assert response.status_code == 400
    assert "torch_dtype" in messages_at(response, "config")
    assert not LLMModel.objects.filter(slug="f7").exists()


def test_it_accepts_the_torch_dtypes_hugging_face_writes(carol: APIClient, catalog: Any) -> None:
    for i, dtype in enumerate(("float16", "bfloat16", "float32", "auto")):
        config = {**LLAMA_CONFIG, "torch_dtype": dtype}
        body = {"slug": f"ok-{i}", "name": "ok", "config": config}
        response = carol.post("/api/models/import-hf/", body, format="json")
        assert response.status_code == 201, response.json()


# --- trace uploads ---------------------------------------------------------------------------


def test_it_refuses_nul_in_an_uploaded_trace_name_or_file(alice: APIClient, catalog: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from simulations.scenarios.models import Trace

    csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
    named = alice.post(
        "/api/traces/",
        {"slug": "t1", "name": f"a{NUL}", "file": SimpleUploadedFile("t.csv", csv.encode())},
        format="multipart",
    )
    assert named.status_code == 400 and "name" in named.json()
    broken = alice.post(
        "/api/traces/",
        {"slug": "t2", "name": "n", "file": SimpleUploadedFile("t.csv", (csv + NUL).encode())},
        format="multipart",
    )
    assert broken.status_code == 400 and "file" in broken.json()
    as_text = alice.post(
        "/api/traces/", {"slug": "t3", "name": "n", "text": csv + NUL}, format="json"
    )
    assert as_text.status_code == 400 and "text" in as_text.json()
    assert not Trace.objects.exists()
