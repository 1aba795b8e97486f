"""Catalog pages: device filters, every spec with its source, rooflines, model sizes, and the
Hugging Face config import."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simulations.catalog.models import LLMModel

from .test_run_pages import figures

pytestmark = pytest.mark.django_db

LLAMA_3B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_attention_heads": 24,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
}


def test_devices_filter_by_kind_and_vendor(client: Any, seeded: Any) -> None:
    html = client.get("/catalog/devices/?kind=fpga").content.decode()
    assert 'id="device-u280"' in html and 'id="device-vhk158"' in html
    assert 'id="device-a100-80gb"' not in html
    html = client.get("/catalog/devices/?vendor=NVIDIA").content.decode()
    assert 'id="device-a100-80gb"' in html and 'id="device-u280"' not in html


def test_a_device_page_lists_every_figure_with_its_source(client: Any, seeded: Any) -> None:
    from simulations.catalog.models import Device

    device = Device.objects.get(slug="a100-80gb")
    html = client.get("/catalog/devices/a100-80gb/").content.decode()
    for field in ("fp16_tflops", "tdp_w", "idle_w", "price_usd", "host_link_bw_gbps"):
        row = html.split(f'id="spec-{field}"', 1)[1].split("</tr>", 1)[0]
        source = device.sources.get(field) or device.sources.get(
            field.replace("host_link_", "host_link.")
        )
        assert source, field
        assert source.split("(")[0][:40].replace("'", "&#x27;").replace('"', "&quot;") in row
    tier = html.split('id="tier-0"', 1)[1].split("</tr>", 1)[0]
    assert device.sources["memory[0].bw_gbps"][:30].replace("'", "&#x27;") in tier


def test_a_device_page_lists_its_cloud_prices_with_date_and_source(
    client: Any, seeded: Any
) -> None:
    html = client.get("/catalog/devices/h100-sxm/").content.decode()
    row = html.split('id="offer-hyperscaler-h100-2026-05"', 1)[1].split("</tr>", 1)[0]
    assert "3.50–5<" in row and "2026-05" in row and "mercatus-ai.com" in row
    assert "hyperscaler-h100-2026-05@high" in row  # a range is named by one of its ends
    single = html.split('id="offer-lambda-8xh100-2026q1"', 1)[1].split("</tr>", 1)[0]
    assert ">3<" in single and "@low" not in single
    none = client.get("/catalog/devices/u280/").content.decode()
    assert "No published cloud price" in none


def test_a_device_page_lists_its_familys_params_with_label_unit_and_source(
    client: Any, seeded: Any
) -> None:
    html = client.get("/catalog/devices/hexagon-npu/").content.decode()
    rows = {
        name: html.split(f'id="spec-params-{name}"', 1)[1].split("</tr>", 1)[0]
        for name in ("array_rows", "array_cols", "static_shapes")
    }
    assert "Array rows" in rows["array_rows"]
    assert "systolic array rows" in rows["array_rows"]  # the family's help text
    assert "tokens" in rows["static_shapes"]  # its unit
    html = client.get("/catalog/devices/u280/").content.decode()
    clock = html.split('id="spec-params-clock_mhz"', 1)[1].split("</tr>", 1)[0]
    assert "Clock (MHz)" in clock and "GLITCHES §V.A" in clock


def test_a_device_page_draws_its_roofline_per_runtime(client: Any, seeded: Any) -> None:
    figs = figures(client.get("/catalog/devices/a100-80gb/").content.decode())
    names = [t["name"] for t in figs["roofline"]["data"]]
    assert "a100-80gb (hf-eager-fp16) datasheet roof" in names
    roof = next(t for t in figs["roofline"]["data"] if t["name"].endswith("datasheet roof"))
    assert max(roof["y"]) == pytest.approx(312.0)  # A100 FP16 dense peak, TOP/s


def test_a_model_page_gives_parameter_count_and_kv_bytes(client: Any, seeded: Any) -> None:
    html = client.get("/catalog/models/llama2-7b/").content.decode()
    # LLaMA-2 7B: 6,738,415,616 parameters; 2 × 32 layers × 32 KV heads × 128 × 2 bytes
    assert "6738415616 exactly" in html
    assert ">5.243e+05<" in html or ">524,288<" in html


@pytest.fixture
def staff_client(client: Any, staff: Any) -> Any:
    """A test client signed in as the staff member carol (catalog writes are staff-only)."""
    client.force_login(staff)
    return client


def test_a_hugging_face_config_becomes_a_model(staff_client: Any, seeded: Any) -> None:
    response = staff_client.post(
        "/catalog/models/import/",
        {"slug": "my-llama-3b", "name": "My Llama 3B", "config": json.dumps(LLAMA_3B_CONFIG)},
    )
    assert response.status_code == 302
    model = LLMModel.objects.get(slug="my-llama-3b")
    assert (model.n_layers, model.n_kv_heads, model.tied_embeddings) == (28, 8, True)
    html = staff_client.get("/catalog/models/my-llama-3b/").content.decode()
    assert "GQA ×3" in html


def test_a_broken_config_is_refused_beside_the_field(staff_client: Any, seeded: Any) -> None:
    bad = dict(LLAMA_3B_CONFIG, num_key_value_heads=7)
    response = staff_client.post(
        "/catalog/models/import/", {"slug": "bad-llama", "config": json.dumps(bad)}
    )
    assert response.status_code == 400
    assert not LLMModel.objects.filter(slug="bad-llama").exists()
    assert "errorlist" in response.content.decode()
    response = staff_client.post("/catalog/models/import/", {"slug": "bad-llama", "config": "{"})
    assert response.status_code == 400
    assert "not valid JSON" in response.content.decode()


def test_only_staff_may_replace_a_catalog_model(alice_client: Any, staff: Any, seeded: Any) -> None:
    response = alice_client.post(
        "/catalog/models/import/", {"slug": "llama2-7b", "config": json.dumps(LLAMA_3B_CONFIG)}
    )
    assert response.status_code == 403
    assert LLMModel.objects.get(slug="llama2-7b").n_layers == 32
    alice_client.force_login(staff)
    response = alice_client.post(
        "/catalog/models/import/", {"slug": "llama2-7b", "config": json.dumps(LLAMA_3B_CONFIG)}
    )
    assert response.status_code == 302
    assert LLMModel.objects.get(slug="llama2-7b").n_layers == 28
