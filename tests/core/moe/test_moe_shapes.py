"""Mixture-of-experts and MLA shapes: parameter counts, memory, KV cache."""

from __future__ import annotations

import dataclasses

import pytest

from simulations.core.errors import SpecError
from simulations.core.graph import (
    FP16,
    Precision,
    active_params,
    decode_graph,
    expert_params,
    gemm_params,
    kv_cache_bytes,
    prefill_graph,
    weight_bytes,
)
from simulations.core.spec import ModelSpec, MoeSpec

from .catalog import MOE_SLUGS, moe_model

#: Total parameters the model cards publish (embedding and LM head included), in billions:
#: Mixtral paper §2 (47B → 46.7B as Mistral's release notes state), Mistral's 8x22B release,
#: DeepSeek-V3 report §4.2 (without the MTP module), Qwen3 model cards, gpt-oss model card
#: Table 1. Not fitted: the counts come from the configs' shapes alone.
PUBLISHED_TOTAL_B = {
    "mixtral-8x7b": 46.7,
    "mixtral-8x22b": 141.0,
    "deepseek-v3": 671.0,
    "qwen3-30b-a3b": 30.5,
    "qwen3-235b-a22b": 235.0,
    "gpt-oss-20b": 20.91,
    "gpt-oss-120b": 116.83,
}


def _total_params(m: ModelSpec) -> float:
    emb = m.vocab_size * m.hidden_size
    return gemm_params(m) + emb + (2 * m.n_layers + 1) * m.hidden_size


@pytest.mark.parametrize("slug", MOE_SLUGS)
def test_every_catalog_moe_model_has_its_published_parameter_count(slug: str) -> None:
    m = moe_model(slug)
    assert _total_params(m) / 1e9 == pytest.approx(PUBLISHED_TOTAL_B[slug], rel=0.006)


@pytest.mark.parametrize("slug", MOE_SLUGS)
def test_every_catalog_moe_number_has_a_source(slug: str) -> None:
    m = moe_model(slug)
    for name in ("n_layers", "hidden_size", "n_heads", "ffn_size", "vocab_size"):
        assert m.sources.get(name)
    for name in ("moe.n_experts", "moe.experts_per_token", "moe.expert_ffn_size"):
        assert "config.json" in m.sources[name]


def test_gpt_oss_active_parameters_are_the_model_cards() -> None:
    # gpt-oss card Table 1 counts active parameters without the embedding, as active_params
    assert active_params(moe_model("gpt-oss-120b")) / 1e9 == pytest.approx(5.13, rel=0.01)
    assert active_params(moe_model("gpt-oss-20b")) / 1e9 == pytest.approx(3.61, rel=0.01)


def test_mixtral_active_parameters_with_the_embedding_are_13b() -> None:
    m = moe_model("mixtral-8x7b")
    emb = m.vocab_size * m.hidden_size
    assert (active_params(m) + emb) / 1e9 == pytest.approx(12.9, rel=0.01)


def test_memory_counts_every_expert() -> None:
    m = moe_model("mixtral-8x7b")
    assert m.moe is not None
    doubled = dataclasses.replace(m, moe=dataclasses.replace(m.moe, n_experts=16))
    extra = weight_bytes(doubled, FP16) - weight_bytes(m, FP16)
    # 8 more experts in each of the 32 layers (router rows 8 × hidden more as well)
    per_layer = 8 * expert_params(m) + 8 * m.hidden_size
    assert extra == pytest.approx(32 * per_layer * 2, rel=1e-12)
    # ... while a decode step of one token reads only top-2 of them
    assert decode_graph(doubled, 1, 0).weight_bytes < weight_bytes(doubled, FP16) / 4


def test_gpt_oss_experts_are_stored_at_mxfp4_and_the_rest_at_the_stack_precision() -> None:
    m = moe_model("gpt-oss-120b")
    routed = m.n_layers * 128 * expert_params(m)
    dense_w = weight_bytes(
        dataclasses.replace(m, moe=dataclasses.replace(m.moe, expert_weight_bits=None)), FP16
    )  # type: ignore[arg-type]
    assert dense_w - weight_bytes(m, FP16) == pytest.approx(routed * (2 - 4.25 / 8), rel=1e-9)
    # an INT4 stack keeps its own narrower width
    int4 = Precision(4, 16, 16)
    assert weight_bytes(m, int4) < weight_bytes(m, FP16)
    # the model card: gpt-oss-120b runs on a single 80 GB GPU
    assert weight_bytes(m, FP16) < 80e9


def test_mla_kv_cache_is_layers_times_latent_plus_rope_dims_per_token() -> None:
    m = moe_model("deepseek-v3")
    assert m.kv_bytes_per_token(16) == 61 * (512 + 64) * 2
    assert m.kv_bytes_per_token(8) == 61 * (512 + 64) * 1
    assert kv_cache_bytes(m, 1000, 8) == 61 * 576 * 1000
    # the absorbed decode step reads each cached token's latent once per layer ...
    g = decode_graph(m, 4, 4000, Precision(8, 8, 8, fp8=True), fused_attention=True)
    assert g.kv_read_bytes == 61 * 576 * (4000 + 4)
    # ... and writes the new tokens' latents
    assert g.kv_write_bytes == 61 * 576 * 4


def test_mla_prefill_up_projects_the_latent_and_decode_absorbs_it() -> None:
    m = moe_model("deepseek-v3")
    pre = {op.name for op in prefill_graph(m, [512], fused_attention=True).layer_ops}
    dec = {op.name for op in decode_graph(m, 8, 4096, fused_attention=True).layer_ops}
    assert "kv_b_proj" in pre and "q_absorb" not in pre
    assert {"q_absorb", "v_absorb"} <= dec and "kv_b_proj" not in dec
    # absorbed per-head projections hold kv_b_proj's parameters: 128 heads × 512 × (128+128)
    ops = {op.name: op for op in decode_graph(m, 1, 0, fused_attention=True).layer_ops}
    assert ops["q_absorb"].weight_bytes + ops["v_absorb"].weight_bytes == 128 * 512 * 256 * 2


def test_dense_first_layers_keep_the_dense_ffn() -> None:
    m = moe_model("deepseek-v3")
    ops = {op.name: op for op in decode_graph(m, 1, 0).layer_ops}
    assert ops["down_proj"].repeat == 3 and ops["down_proj"].in_features == 18432
    assert ops["expert_down"].repeat == 58
    assert ops["shared_down_proj"].in_features == 2048


def test_a_malformed_moe_block_is_refused_naming_its_field() -> None:
    m = moe_model("mixtral-8x7b")
    with pytest.raises(SpecError, match=r"moe\.experts_per_token"):
        dataclasses.replace(m, moe={"n_experts": 8, "experts_per_token": 9, "expert_ffn_size": 8})
    with pytest.raises(SpecError, match=r"moe\.first_dense_layers"):
        dataclasses.replace(
            m,
            moe=MoeSpec(n_experts=8, experts_per_token=2, expert_ffn_size=8, first_dense_layers=32),
        )
    with pytest.raises(SpecError, match=r"moe\.routing"):
        dataclasses.replace(
            m, moe={"n_experts": 8, "experts_per_token": 2, "expert_ffn_size": 8, "routing": 1}
        )
    with pytest.raises(SpecError, match=r"expert_parallel"):
        MoeSpec(n_experts=8, experts_per_token=2, expert_ffn_size=8, expert_parallel=3)


def test_families_with_dense_only_shapes_refuse_moe_and_mla_models() -> None:
    from simulations.core.devices.h2m2.shapes import LayerShapes

    with pytest.raises(SpecError, match="H2M2"):
        LayerShapes.of(moe_model("qwen3-30b-a3b"))
    with pytest.raises(SpecError, match="H2M2"):
        LayerShapes.of(moe_model("deepseek-v3"))


@pytest.mark.parametrize("slug", [*MOE_SLUGS, "llama2-7b"])
def test_the_architecture_document_gives_the_spec_back(slug: str) -> None:
    m = moe_model(slug)
    doc = m.architecture()
    plain = {
        f.name: getattr(m, f.name)
        for f in dataclasses.fields(m)
        if f.name not in ("moe", "mla", "sliding_window")
    }
    assert ModelSpec(**plain, **doc) == m
    assert (doc == {}) == (m.moe is None and m.mla is None and m.sliding_window is None)
