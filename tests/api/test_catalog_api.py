"""Catalog, workloads, imports and policies over the API: staff-only writes, field-level
errors, nothing stored on error, filtering, ordering, pagination."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from simulations.catalog.models import Device, LLMModel, RuntimeProfile
from simulations.core.policies import get_policy, policy_names
from simulations.scenarios.models import Scenario, Trace, Workload

pytestmark = pytest.mark.django_db

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
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}
TRACE_CSV = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n"
    "2023-11-16 18:15:51.2395390,879,34\n"
)


def test_devices_list_filters_orders_and_finds_slugs_with_dots(
    alice: APIClient, catalog: Any
) -> None:
    gpus = alice.get("/api/devices/?kind=gpu&page_size=100").json()
    assert gpus["count"] == Device.objects.filter(kind="gpu").count()
    assert {d["kind"] for d in gpus["results"]} == {"gpu"}
    by_price = alice.get("/api/devices/?kind=gpu&ordering=-price_usd").json()["results"]
    prices = [d["price_usd"] for d in by_price if d["price_usd"] is not None]
    assert prices == sorted(prices, reverse=True)
    assert alice.get("/api/devices/?kind=quantum").status_code == 400
    a100 = alice.get("/api/devices/a100-80gb/").json()
    assert a100["memory"][0]["capacity_gb"] == 80.0 and a100["sources"]
    assert alice.get("/api/models/llama3.1-8b/").json()["n_layers"] == 32
    assert alice.get("/api/runtimes/?device_kind=fpga").json()["count"] >= 1
    assert alice.get("/api/devices/no-such-device/").status_code == 404


def test_catalog_writes_are_for_staff_and_round_trip(
    alice: APIClient, carol: APIClient, catalog: Any
) -> None:
    record = carol.get("/api/devices/a100-80gb/").json()
    for key in ("id", "created_at", "updated_at"):
        record.pop(key)
    record.update(slug="a100-80gb-copy", name="A100 copy")
    assert alice.post("/api/devices/", record, format="json").status_code == 403
    created = carol.post("/api/devices/", record, format="json")
    assert created.status_code == 201, created.json()
    copy_row = carol.get("/api/devices/a100-80gb-copy/").json()
    original = carol.get("/api/devices/a100-80gb/").json()
    for key in ("memory", "fp16_tflops", "host_link", "peer_link", "tdp_w", "sources"):
        assert copy_row[key] == original[key]
    record["price_usd"] = 12345.0
    updated = carol.put("/api/devices/a100-80gb-copy/", record, format="json")
    assert updated.status_code == 200 and updated.json()["price_usd"] == 12345.0
    assert alice.delete("/api/devices/a100-80gb-copy/").status_code == 403
    assert carol.delete("/api/devices/a100-80gb-copy/").status_code == 204
    assert not Device.objects.filter(slug="a100-80gb-copy").exists()
    # A SoC with components cannot be deleted while they refer to it.
    assert carol.delete("/api/devices/snapdragon-8-gen-3/").status_code == 409


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tdp_w": -1}, "tdp_w"),
        ({"tdp_w": "NaN"}, "tdp_w"),
        ({"fp16_tflops": "Infinity"}, "fp16_tflops"),
        ({"fp16_tflops": 1e300}, "fp16_tflops"),
        ({"idle_w": 900.0}, "idle_w"),
        ({"memory": [{"kind": "hbm", "capacity_gb": 0, "bw_gbps": 1000}]}, "memory"),
        ({"memory": [{"kind": "hbm", "capacity_gb": 80, "bw_gbps": 1000}] * 9}, "memory"),
        ({"kind": "toaster"}, "kind"),
        ({"slug": "Bad Slug"}, "slug"),
        ({"slug": "a100-80gb"}, "slug"),
        ({"params": {"cores": 8}}, "params.cores"),
        ({"parent": "no-such-soc"}, "parent"),
        ({"sources": {"tdp_w": ""}}, "sources"),
    ],
)
def test_bad_device_input_names_the_field_and_stores_nothing(
    carol: APIClient, catalog: Any, change: dict, field: str
) -> None:
    record = carol.get("/api/devices/a100-80gb/").json()
    for key in ("id", "created_at", "updated_at"):
        record.pop(key)
    record.update(slug="new-gpu")
    record.update(change)
    before = Device.objects.count()
    response = carol.post("/api/devices/", record, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json(), response.json()
    assert Device.objects.count() == before


def test_runtime_and_model_writes_validate_as_core_specs(carol: APIClient, catalog: Any) -> None:
    runtime = carol.get("/api/runtimes/hf-eager-fp16/").json()
    for key in ("id", "created_at", "updated_at"):
        runtime.pop(key)
    runtime.update(slug="eager-copy", default_for_kind=False)
    assert carol.post("/api/runtimes/", runtime, format="json").status_code == 201
    bad = carol.post("/api/runtimes/", {**runtime, "slug": "x2", "compute_eff": 1.5}, format="json")
    assert bad.status_code == 400 and "compute_eff" in bad.json()
    assert not RuntimeProfile.objects.filter(slug="x2").exists()

    model = carol.get("/api/models/llama2-7b/").json()
    for key in ("id", "created_at", "updated_at"):
        model.pop(key)
    model.update(slug="llama2-7b-copy")
    assert carol.post("/api/models/", model, format="json").status_code == 201
    gqa = carol.post("/api/models/", {**model, "slug": "odd", "n_kv_heads": 5}, format="json")
    assert gqa.status_code == 400 and "n_kv_heads" in gqa.json()
    assert not LLMModel.objects.filter(slug="odd").exists()


def test_hugging_face_config_import(alice: APIClient, carol: APIClient, catalog: Any) -> None:
    body = {"slug": "my-llama", "name": "My Llama", "config": LLAMA_CONFIG}
    assert alice.post("/api/models/import-hf/", body, format="json").status_code == 403
    created = carol.post("/api/models/import-hf/", body, format="json")
    assert created.status_code == 201, created.json()
    model = created.json()
    assert (model["n_layers"], model["hidden_size"], model["ffn_size"]) == (32, 4096, 11008)
    assert LLMModel.objects.get(slug="my-llama").hf_config == LLAMA_CONFIG
    broken = {**body, "slug": "broken", "config": {**LLAMA_CONFIG, "num_hidden_layers": -3}}
    response = carol.post("/api/models/import-hf/", broken, format="json")
    assert response.status_code == 400 and "config" in response.json()
    for config in ("not an object", [1], None):
        bad = carol.post(
            "/api/models/import-hf/", {**body, "slug": "b2", "config": config}, format="json"
        )
        assert bad.status_code == 400
    assert not LLMModel.objects.filter(slug__in=["broken", "b2"]).exists()


def test_trace_upload_as_file_or_text(alice: APIClient, user: Any, catalog: Any) -> None:
    upload = SimpleUploadedFile("trace.csv", TRACE_CSV.encode(), content_type="text/csv")
    created = alice.post(
        "/api/traces/", {"slug": "t1", "name": "three requests", "file": upload}, format="multipart"
    )
    assert created.status_code == 201, created.json()
    assert created.json()["request_count"] == 3
    assert Trace.objects.get(slug="t1").owner == user
    as_text = alice.post(
        "/api/traces/", {"slug": "t2", "name": "again", "text": TRACE_CSV}, format="json"
    )
    assert as_text.status_code == 201
    bad = alice.post(
        "/api/traces/",
        {"slug": "t3", "name": "bad", "text": TRACE_CSV + "2023-11-16 18:15:52,-5,10\n"},
        format="json",
    )
    assert bad.status_code == 400 and "line 5" in str(bad.json()["text"])
    neither = alice.post("/api/traces/", {"slug": "t4", "name": "none"}, format="json")
    assert neither.status_code == 400
    duplicate = alice.post(
        "/api/traces/", {"slug": "t1", "name": "dup", "text": TRACE_CSV}, format="json"
    )
    assert duplicate.status_code == 400 and "slug" in duplicate.json()
    assert set(Trace.objects.values_list("slug", flat=True)) == {"t1", "t2"}


def test_workloads_validate_their_lengths_and_arrivals(alice: APIClient, catalog: Any) -> None:
    good = {
        "name": "uniform",
        "requests": 100,
        "input_tokens": {"dist": "uniform", "low": 128, "high": 2048},
        "output_tokens": 256,
        "arrival_kind": "poisson",
        "rate_per_s": 4.0,
    }
    assert alice.post("/api/workloads/", good, format="json").status_code == 201
    cases = [
        ({"name": "uniform"}, "name"),
        ({"input_tokens": {"dist": "uniform", "low": 300, "high": 2}}, "input_tokens"),
        ({"output_tokens": -1}, "output_tokens"),
        ({"requests": 0}, "requests"),
        ({"rate_per_s": "NaN"}, "rate_per_s"),
        ({"arrival_kind": "trace", "rate_per_s": None}, "trace"),
    ]
    for change, field in cases:
        response = alice.post("/api/workloads/", {**good, "name": "x", **change}, format="json")
        assert response.status_code == 400, change
        assert field in response.json(), (change, response.json())
    assert Workload.objects.count() == 1


def test_scenario_errors_are_keyed_by_json_path_and_nothing_is_stored(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    bad = copy.deepcopy(document)
    bad["systems"][0]["devices"][0]["count"] = 0
    bad["workload"]["requests"] = 10**9
    bad["systems"][1]["devices"][0]["device"] = "h200"
    response = alice.post("/api/scenarios/", {"document": bad}, format="json")
    assert response.status_code == 400
    errors = response.json()["document"]
    assert set(errors) >= {
        "systems[0].devices[0].count",
        "workload.requests",
        "systems[1].devices[0].device",
    }
    for value in ("text", [1, 2], None, 3):
        assert alice.post("/api/scenarios/", {"document": value}, format="json").status_code == 400
    assert not Scenario.objects.exists()


def test_oversized_bodies_are_refused_with_413(alice: APIClient, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    huge = {"document": {"name": "x" * 20_000}}
    response = alice.post("/api/scenarios/", huge, format="json")
    assert response.status_code == 413
    assert not Scenario.objects.exists()


def test_policies_endpoint_lists_the_registry_with_roles_options_and_defaults(
    alice: APIClient,
) -> None:
    listed = alice.get("/api/policies/").json()
    assert [p["name"] for p in listed] == policy_names()
    homogeneous = alice.get("/api/policies/homogeneous/").json()
    described = get_policy("homogeneous").describe()
    assert homogeneous["options"] == described["options"]
    assert homogeneous["defaults"]["max_batch"] == next(
        o["default"] for o in described["options"] if o["name"] == "max_batch"
    )
    glitches = alice.get("/api/policies/glitches/").json()
    assert {r["name"] for r in glitches["roles"]} >= {"prefill", "decode"}
    assert alice.get("/api/policies/no-such-policy/").status_code == 404


def test_a_large_trace_upload_is_accepted_queued_and_shows_its_parse_status(
    alice: APIClient, catalog: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from unittest import mock

    from simulations.scenarios import tasks

    settings.HETPLANNER_TRACE_ASYNC_BYTES = 64
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        queued = alice.post(
            "/api/traces/", {"slug": "big", "name": "big", "text": TRACE_CSV}, format="json"
        )
    assert queued.status_code == 202, queued.json()
    assert queued.json()["parse_status"] == "queued"
    assert queued.json()["request_count"] is None
    assert len(callbacks) == 1
    with mock.patch.object(tasks, "close_old_connections"):
        tasks.parse_trace.apply(args=[queued.json()["id"]])
    done = alice.get("/api/traces/big/").json()
    assert (done["parse_status"], done["parse_error"], done["request_count"]) == ("done", "", 3)
