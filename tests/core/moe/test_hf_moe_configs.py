"""Hugging Face configs of mixture-of-experts models import.

The dicts are the published ``config.json`` files' shape keys (the URLs each catalog record
cites); keys that do not shape the model (rope scaling, token ids, …) are left out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simulations.core.errors import SpecError
from simulations.core.hf_config import model_spec_from_hf_config

from .catalog import moe_model

MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 32000,
}

DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8"},
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "v_head_dim": 128,
    "vocab_size": 129280,
}

QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
    "vocab_size": 151936,
}

GPT_OSS_120B = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "quantization_config": {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router"],
        "quant_method": "mxfp4",
    },
    "sliding_window": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 201088,
}


def _variant(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out.update(changes)
    return out


MIXTRAL_8X22B = _variant(
    MIXTRAL_8X7B,
    hidden_size=6144,
    intermediate_size=16384,
    max_position_embeddings=65536,
    num_attention_heads=48,
    num_hidden_layers=56,
)
QWEN3_235B = _variant(
    QWEN3_30B_A3B,
    hidden_size=4096,
    intermediate_size=12288,
    moe_intermediate_size=1536,
    num_attention_heads=64,
    num_hidden_layers=94,
    max_window_layers=94,
)
GPT_OSS_20B = _variant(
    GPT_OSS_120B,
    num_hidden_layers=24,
    num_local_experts=32,
    layer_types=["sliding_attention", "full_attention"] * 12,
)

CONFIGS = {
    "mixtral-8x7b": MIXTRAL_8X7B,
    "mixtral-8x22b": MIXTRAL_8X22B,
    "deepseek-v3": DEEPSEEK_V3,
    "qwen3-30b-a3b": QWEN3_30B_A3B,
    "qwen3-235b-a22b": QWEN3_235B,
    "gpt-oss-20b": GPT_OSS_20B,
    "gpt-oss-120b": GPT_OSS_120B,
}


@pytest.mark.parametrize("slug", sorted(CONFIGS))
def test_each_listed_moe_config_imports_as_the_catalog_model(slug: str) -> None:
    spec = model_spec_from_hf_config(CONFIGS[slug], slug=slug, name=slug)
    catalog = moe_model(slug)
    for f in ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "vocab_size"):
        assert getattr(spec, f) == getattr(catalog, f), f
    assert spec.moe == catalog.moe
    assert spec.mla == catalog.mla
    assert spec.sliding_window == catalog.sliding_window
    assert spec.sources["moe.n_experts"].endswith(
        ("num_local_experts", "num_experts", "n_routed_experts")
    )


@pytest.mark.parametrize(
    ("config", "key", "value"),
    [
        (MIXTRAL_8X7B, "num_local_experts", None),
        (MIXTRAL_8X7B, "num_experts_per_tok", 9),
        (MIXTRAL_8X7B, "num_experts_per_tok", "two"),
        (QWEN3_30B_A3B, "moe_intermediate_size", 0),
        (QWEN3_30B_A3B, "decoder_sparse_step", 2),
        (QWEN3_30B_A3B, "mlp_only_layers", [0, 1]),
        (DEEPSEEK_V3, "kv_lora_rank", None),
        (DEEPSEEK_V3, "first_k_dense_replace", 61),
        (DEEPSEEK_V3, "n_routed_experts", 1),
        (GPT_OSS_120B, "layer_types", ["full_attention"]),
        (GPT_OSS_120B, "quantization_config", "mxfp4"),
    ],
)
def test_a_malformed_moe_config_is_refused_naming_the_field(
    config: dict[str, Any], key: str, value: Any
) -> None:
    bad = _variant(config, **{key: value})
    with pytest.raises(SpecError, match=rf"config\.{key}"):
        model_spec_from_hf_config(bad, slug="x", name="x")
