"""The LLM operator graph (simulations.core.graph) against GLITCHES Table I and by property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import SpecError
from simulations.core.graph import (
    FP16,
    OpKind,
    Precision,
    decode_frame,
    decode_graph,
    kv_cache_bytes,
    prefill_graph,
    weight_bytes,
)
from simulations.core.spec import ModelSpec

CAT = builtin_catalog()
LLAMA2_7B: ModelSpec = CAT.model("llama2-7b")
LLAMA31_8B: ModelSpec = CAT.model("llama3.1-8b")
GPT3: ModelSpec = CAT.model("gpt3-175b")
W4A8 = Precision(4, 8, 8)


def decode_mean(prec: Precision, attr: str) -> float:
    """Mean of ``attr`` over the 512 GLITCHES decode steps (1536 … 2047 cached tokens)."""
    return sum(getattr(decode_graph(LLAMA2_7B, 1, 1536 + i, prec), attr) for i in range(512)) / 512


def test_prefill_flops_match_glitches_table1() -> None:
    assert prefill_graph(LLAMA2_7B, [1536]).flops / 1e9 == pytest.approx(21137.01, rel=0.02)


def test_decode_flops_per_token_match_glitches_table1() -> None:
    assert decode_mean(FP16, "flops") / 1e9 == pytest.approx(14.16, rel=0.02)


def test_fp16_decode_traffic_per_token_matches_glitches_table1() -> None:
    assert decode_mean(FP16, "bytes") / 1e9 == pytest.approx(14.08, rel=0.05)


def test_w4a8_decode_weight_and_kv_traffic_is_near_glitches_u280() -> None:
    """Weights + KV only (activations stay on chip on FlightLLM): 3.96 GB within 10 %."""
    w = decode_mean(W4A8, "weight_bytes")
    kv = decode_mean(W4A8, "kv_read_bytes") + decode_mean(W4A8, "kv_write_bytes")
    assert (w + kv) / 1e9 == pytest.approx(3.96, rel=0.10)


def test_decode_average_equals_step_at_mean_context() -> None:
    """Per-token figures are linear in the context, so the 512-step mean is one step at the
    mean context (1791.5 cached tokens) — the reading of 'per token on average'."""
    lo, hi = decode_graph(LLAMA2_7B, 1, 1791), decode_graph(LLAMA2_7B, 1, 1792)
    assert decode_mean(FP16, "flops") == pytest.approx((lo.flops + hi.flops) / 2, rel=1e-12)


def test_kv_cache_size_is_exact_for_mha_and_gqa() -> None:
    assert kv_cache_bytes(LLAMA2_7B, 1000, 16) == 2 * 32 * 32 * 128 * 2 * 1000
    assert kv_cache_bytes(LLAMA31_8B, 1000, 8) == 2 * 32 * 8 * 128 * 1 * 1000


def test_decode_reads_the_kv_of_every_attended_token_once() -> None:
    g = decode_graph(LLAMA31_8B, 4, 4000)
    per_token = LLAMA31_8B.kv_bytes_per_token(16)
    assert g.kv_read_bytes == pytest.approx(per_token * (4000 + 4))
    assert g.kv_write_bytes == pytest.approx(per_token * 4)


def test_gqa_shrinks_kv_traffic_but_not_attention_flops() -> None:
    mha = LLAMA2_7B
    gqa = ModelSpec(**{**_fields(mha), "slug": "gqa", "n_kv_heads": 8})
    a, b = decode_graph(mha, 1, 2048), decode_graph(gqa, 1, 2048)
    score = lambda g: next(op for op in g.ops if op.kind is OpKind.ATTN_SCORE)  # noqa: E731
    assert score(a).flops == score(b).flops
    assert score(b).kv_read_bytes == pytest.approx(score(a).kv_read_bytes / 4)


def test_prefill_packs_prompts_and_keeps_attention_within_each() -> None:
    one = prefill_graph(LLAMA2_7B, [1024])
    two = prefill_graph(LLAMA2_7B, [512, 512])
    q = lambda g: next(op for op in g.ops if op.name == "q_proj")  # noqa: E731
    s = lambda g: next(op for op in g.ops if op.name == "attn_score")  # noqa: E731
    assert q(one).flops == q(two).flops
    assert s(two).flops == pytest.approx(s(one).flops / 2)
    assert two.attended == 2 * 512 * 512


def test_gemm_weights_are_read_once_per_pass_whatever_the_batch() -> None:
    def gemm_weights(batch: int) -> float:
        g = decode_graph(LLAMA2_7B, batch, 100 * batch)
        return sum(op.weight_bytes * op.repeat for op in g.ops if op.kind is OpKind.GEMM)

    assert gemm_weights(1) == gemm_weights(64)


def test_fused_attention_has_no_score_traffic_and_skips_the_masked_half() -> None:
    eager = prefill_graph(LLAMA2_7B, [2048])
    fused = prefill_graph(LLAMA2_7B, [2048], fused_attention=True)
    assert {op.kind for op in fused.ops}.isdisjoint({OpKind.SOFTMAX, OpKind.ATTN_SCORE})
    assert fused.attended == 2048 * 2049 // 2
    assert fused.act_bytes < eager.act_bytes
    assert fused.flops < eager.flops


def test_plain_ffn_has_up_and_down_only() -> None:
    names = [op.name for op in decode_graph(GPT3, 1, 10).layer_ops]
    assert "gate_proj" not in names and "up_proj" in names and "down_proj" in names


def test_lm_head_runs_on_the_last_position_of_each_prompt() -> None:
    lm = prefill_graph(LLAMA2_7B, [100, 200, 300]).ops[-1]
    assert lm.name == "lm_head" and lm.rows == 3


def test_weight_bytes_count_untied_embedding_and_lm_head() -> None:
    params = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 2 * 32000 * 4096
    norms = (2 * 32 + 1) * 4096 * 2
    assert weight_bytes(LLAMA2_7B, FP16) == params * 2 + norms
    tied = CAT.model("llama3.2-3b")
    untied = ModelSpec(**{**_fields(tied), "tied_embeddings": False})
    assert weight_bytes(untied, W4A8) - weight_bytes(tied, W4A8) == 128256 * 3072 * 0.5


def test_shape_dependent_work_is_cached() -> None:
    assert prefill_graph(LLAMA2_7B, [777]) is prefill_graph(LLAMA2_7B, (777,))
    assert decode_graph(LLAMA2_7B, 3, 999) is decode_graph(LLAMA2_7B, 3, 999)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: prefill_graph(LLAMA2_7B, []), "seq_lens"),
        (lambda: prefill_graph(LLAMA2_7B, [10, 0]), "seq_lens[1]"),
        (lambda: prefill_graph(LLAMA2_7B, 10), "seq_lens"),  # type: ignore[arg-type]
        (lambda: prefill_graph(LLAMA2_7B, [True]), "seq_lens[0]"),
        (lambda: decode_graph(LLAMA2_7B, 0, 10), "batch"),
        (lambda: decode_graph(LLAMA2_7B, 1, -1), "kv_tokens"),
        (lambda: Precision(5, 16, 16), "precision.weight_bits"),
        (lambda: kv_cache_bytes(LLAMA2_7B, 10, 7), "kv_bits"),
    ],
)
def test_bad_input_raises_spec_error_naming_the_field(call: object, field: str) -> None:
    with pytest.raises(SpecError) as exc:
        call()  # type: ignore[operator]
    assert exc.value.field == field


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8000), st.integers(1, 500))
def test_prefill_work_grows_with_prompt_length(n: int, extra: int) -> None:
    a, b = prefill_graph(LLAMA2_7B, [n]), prefill_graph(LLAMA2_7B, [n + extra])
    assert b.flops > a.flops and b.bytes > a.bytes


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.integers(0, 100_000), st.integers(1, 1000))
def test_decode_traffic_grows_with_cached_tokens(batch: int, kv: int, extra: int) -> None:
    a, b = decode_graph(LLAMA31_8B, batch, kv), decode_graph(LLAMA31_8B, batch, kv + extra)
    assert b.bytes > a.bytes and b.flops > a.flops
    assert b.weight_bytes == a.weight_bytes


def _fields(m: ModelSpec) -> dict[str, object]:
    return {
        k: getattr(m, k)
        for k in (
            "slug",
            "name",
            "n_layers",
            "hidden_size",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "ffn_size",
            "ffn_kind",
            "vocab_size",
            "tied_embeddings",
            "max_context",
        )
    }


_models = st.sampled_from(sorted(CAT.models.values(), key=lambda m: m.slug))
_precs = st.sampled_from([FP16, W4A8, Precision(4, 16, 16), Precision(8, 8, 8)])


@settings(max_examples=120, deadline=None)
@given(_models, _precs, st.booleans(), st.integers(1, 256), st.integers(0, 200_000))
def test_decode_frame_rebuilds_the_step_graph_and_its_totals_exactly(
    model: ModelSpec, prec: Precision, fused: bool, batch: int, kv: int
) -> None:
    frame = decode_frame(model, batch, prec, fused_attention=fused)
    g = decode_graph(model, batch, kv, prec, fused_attention=fused)
    assert frame.graph(kv) == g
    assert (*frame.head, *frame.attention(kv), *frame.tail) == g.ops
    # Bit for bit, not approximately: device models cost steps from these totals.
    assert tuple(frame.totals(frame.attention(kv))) == (
        g.flops,
        g.bytes,
        g.weight_bytes,
        g.kv_read_bytes,
        g.kv_write_bytes,
    )


def test_only_attention_changes_between_decode_steps_of_a_batch() -> None:
    a, b = decode_graph(LLAMA2_7B, 4, 100), decode_graph(LLAMA2_7B, 4, 5000)
    changed = {x.name for x, y in zip(a.ops, b.ops, strict=True) if x != y}
    assert changed == {"attn_score", "softmax", "attn_value"}
    assert decode_frame(LLAMA2_7B, 4).attention(100) == tuple(
        op for op in a.ops if op.name in changed
    )
