"""Mixture-of-experts configs through the Hugging Face import endpoint: the
blocks are stored and read back; a malformed MoE config is a 400 naming the field and
nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from rest_framework.test import APIClient

from simulations.adapters import model_spec
from tests.core.moe.test_hf_moe_configs import DEEPSEEK_V3, GPT_OSS_120B, MIXTRAL_8X7B

pytestmark = pytest.mark.django_db


def _model(slug: str) -> Any:
    return apps.get_model("simulations", "LLMModel").objects.filter(slug=slug).first()


@pytest.mark.parametrize(
    ("slug", "config"),
    [("my-mixtral", MIXTRAL_8X7B), ("my-dsv3", DEEPSEEK_V3), ("my-gpt-oss", GPT_OSS_120B)],
)
def test_moe_configs_import_with_their_blocks(
    carol: APIClient, catalog: Any, slug: str, config: dict[str, Any]
) -> None:
    created = carol.post(
        "/api/models/import-hf/", {"slug": slug, "name": slug, "config": config}, format="json"
    )
    assert created.status_code == 201, created.json()
    spec = model_spec(_model(slug))
    assert spec.moe is not None
    assert spec.moe.n_experts == config.get("num_local_experts", config.get("n_routed_experts"))
    if slug == "my-dsv3":
        assert spec.mla is not None and spec.kv_bytes_per_token(16) == 61 * 576 * 2
    if slug == "my-gpt-oss":
        assert spec.moe.expert_weight_bits == 4.25 and spec.sliding_window is not None


@pytest.mark.parametrize(
    ("key", "value"),
    [("num_experts_per_tok", 9), ("num_local_experts", None), ("num_local_experts", "eight")],
)
def test_a_malformed_moe_config_is_a_400_naming_the_field(
    carol: APIClient, catalog: Any, key: str, value: Any
) -> None:
    config = {**MIXTRAL_8X7B, key: value}
    response = carol.post(
        "/api/models/import-hf/", {"slug": "bad-moe", "name": "x", "config": config}, format="json"
    )
    assert response.status_code == 400
    assert f"config.{key}" in " ".join(response.json()["config"])
    assert _model("bad-moe") is None


def test_the_seeded_catalog_holds_the_moe_models(catalog: Any) -> None:
    spec = model_spec(_model("qwen3-235b-a22b"))
    assert spec.moe is not None and spec.moe.n_experts == 128
    assert model_spec(_model("deepseek-v3")).mla is not None


def test_a_moe_model_reads_back_over_the_api_and_copies_whole(
    carol: APIClient, catalog: Any
) -> None:
    record = carol.get("/api/models/deepseek-v3/").json()
    assert record["moe"]["n_experts"] == 256 and record["mla"]["kv_lora_rank"] == 512
    assert carol.get("/api/models/llama2-7b/").json()["moe"] is None
    for key in ("id", "created_at", "updated_at"):
        record.pop(key)
    record.update(slug="dsv3-copy")
    created = carol.post("/api/models/", record, format="json")
    assert created.status_code == 201, created.json()
    copy, original = model_spec(_model("dsv3-copy")), model_spec(_model("deepseek-v3"))
    assert (copy.moe, copy.mla, copy.n_layers) == (original.moe, original.mla, 61)
    bad = carol.post(
        "/api/models/",
        {**record, "slug": "bad-copy", "moe": {**record["moe"], "experts_per_token": 999}},
        format="json",
    )
    assert bad.status_code == 400 and "experts_per_token" in str(bad.json())
    assert _model("bad-copy") is None
