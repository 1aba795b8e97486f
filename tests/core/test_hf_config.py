"""Hugging Face config.json → ModelSpec fields (pure core, no database)."""

from __future__ import annotations

import pytest

from simulations.core.errors import SpecError
from simulations.core.hf_config import model_fields_from_hf_config, model_spec_from_hf_config
from simulations.core.spec import FfnKind

LLAMA2_7B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "vocab_size": 32000,
}

LLAMA31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}

LLAMA32_3B = {
    "model_type": "llama",
    "head_dim": 128,
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "num_attention_heads": 24,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "tie_word_embeddings": True,
    "vocab_size": 128256,
}

INTERNLM2_STYLE = {
    "architectures": ["InternLM2ForCausalLM"],
    "model_type": "internlm2",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "max_position_embeddings": 32768,
    "num_attention_heads": 16,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "vocab_size": 92544,
}

GPT2 = {
    "model_type": "gpt2",
    "n_embd": 768,
    "n_head": 12,
    "n_inner": None,
    "n_layer": 12,
    "n_positions": 1024,
    "vocab_size": 50257,
}


def test_it_reads_llama2_7b_as_mha_with_a_gated_ffn() -> None:
    fields = model_fields_from_hf_config(LLAMA2_7B)
    assert fields["n_layers"] == 32
    assert fields["hidden_size"] == 4096
    assert fields["n_heads"] == fields["n_kv_heads"] == 32
    assert fields["head_dim"] == 128
    assert fields["ffn_size"] == 11008
    assert fields["ffn_kind"] is FfnKind.GATED
    assert fields["vocab_size"] == 32000
    assert fields["max_context"] == 4096
    assert fields["tied_embeddings"] is False


def test_it_reads_llama31_gqa_heads_and_long_context() -> None:
    spec = model_spec_from_hf_config(LLAMA31_8B, slug="llama3.1-8b", name="Llama-3.1 8B")
    assert spec.n_kv_heads == 8
    assert spec.gqa_group == 4
    assert spec.vocab_size == 128256
    assert spec.max_context == 131072
    # 2 × 32 layers × 8 KV heads × 128 × 2 bytes
    assert spec.kv_bytes_per_token(16) == 131072


def test_it_takes_an_explicit_head_dim_and_tied_embeddings() -> None:
    fields = model_fields_from_hf_config(LLAMA32_3B)
    assert fields["head_dim"] == 128
    assert fields["tied_embeddings"] is True
    assert fields["n_layers"] == 28


def test_it_reads_internlm2_configs_like_llama() -> None:
    fields = model_fields_from_hf_config(INTERNLM2_STYLE)
    assert fields["ffn_kind"] is FfnKind.GATED
    assert (fields["n_heads"], fields["n_kv_heads"], fields["head_dim"]) == (16, 8, 128)


def test_it_reads_gpt2_with_a_plain_4x_ffn_and_tied_head() -> None:
    fields = model_fields_from_hf_config(GPT2)
    assert fields["ffn_kind"] is FfnKind.PLAIN
    assert fields["ffn_size"] == 4 * 768
    assert fields["tied_embeddings"] is True
    assert fields["head_dim"] == 64
    assert fields["max_context"] == 1024


def test_mha_without_num_key_value_heads_uses_all_heads() -> None:
    config = {k: v for k, v in LLAMA2_7B.items() if k != "num_key_value_heads"}
    assert model_fields_from_hf_config(config)["n_kv_heads"] == 32


def test_every_number_names_the_config_key_it_came_from() -> None:
    fields = model_fields_from_hf_config(LLAMA31_8B, origin="meta-llama/Llama-3.1-8B config.json")
    sources = fields["sources"]
    assert sources["n_kv_heads"] == "meta-llama/Llama-3.1-8B config.json: num_key_value_heads"
    for name in ("n_layers", "hidden_size", "n_heads", "ffn_size", "vocab_size", "max_context"):
        assert sources[name].strip()


def test_it_rejects_an_unsupported_model_type() -> None:
    with pytest.raises(SpecError) as err:
        model_fields_from_hf_config({**LLAMA2_7B, "model_type": "t5"})
    assert err.value.field == "config.model_type"


@pytest.mark.parametrize(
    ("key", "value"),
    [("num_hidden_layers", None), ("hidden_size", "4096"), ("vocab_size", 0), ("n_layer", True)],
)
def test_it_names_the_bad_key(key: str, value: object) -> None:
    base = GPT2 if key == "n_layer" else LLAMA2_7B
    config = {**base, key: value}
    with pytest.raises(SpecError) as err:
        model_fields_from_hf_config(config)
    assert err.value.field == f"config.{key}"


def test_kv_heads_that_do_not_divide_heads_fail_spec_validation() -> None:
    with pytest.raises(SpecError, match="n_kv_heads"):
        model_spec_from_hf_config({**LLAMA2_7B, "num_key_value_heads": 5}, slug="x", name="x")


@pytest.mark.parametrize(("key", "value"), [("torch_dtype", "float7"), ("dtype", 16)])
def test_it_rejects_an_unknown_torch_dtype_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(SpecError) as err:
        model_fields_from_hf_config({**LLAMA2_7B, key: value})
    assert err.value.field == f"config.{key}"


@pytest.mark.parametrize("value", ["float16", "bfloat16", "torch.float32", "auto", None])
def test_it_accepts_the_dtypes_transformers_writes(value: object) -> None:
    assert model_fields_from_hf_config({**LLAMA2_7B, "torch_dtype": value})["n_layers"] == 32
