"""Expected distinct experts a pass touches, checked by sampling; the decode step's cost
rising with batch until every expert is read."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from simulations.core.devices import build_device_model
from simulations.core.graph import (
    decode_graph,
    expected_distinct_experts,
    expert_inclusion,
    expert_params,
)

from .catalog import moe_catalog, moe_model


def _uniform_topk_distinct(rng: np.random.Generator, e: int, k: int, t: int) -> int:
    picks = np.argsort(rng.random((t, e)), axis=1)[:, :k]  # k distinct experts per token
    return int(np.unique(picks).size)


def _systematic_topk(rng: np.random.Generator, q: np.ndarray, t: int) -> np.ndarray:
    """Madow's systematic sampling: exactly k distinct experts per token with inclusion
    probabilities ``q`` (Σq = k, each ≤ 1), the marginals the formula assumes."""
    k = round(q.sum())
    cum = np.concatenate(([0.0], np.cumsum(q)))
    u = rng.random((t, 1)) + np.arange(k)[None, :]
    return np.searchsorted(cum, u, side="right") - 1


@pytest.mark.parametrize(("e", "k", "t"), [(8, 2, 1), (8, 2, 3), (128, 8, 16), (256, 8, 64)])
def test_the_uniform_expectation_matches_sampled_routing(e: int, k: int, t: int) -> None:
    rng = np.random.default_rng(21)
    samples = np.array([_uniform_topk_distinct(rng, e, k, t) for _ in range(4000)])
    expected = expected_distinct_experts(t, e, k)
    assert expected == pytest.approx(e * (1 - (1 - k / e) ** t), rel=1e-12)
    stderr = samples.std(ddof=1) / np.sqrt(samples.size) + 1e-9
    assert abs(samples.mean() - expected) < 4 * stderr + 1e-9


@pytest.mark.parametrize("s", [0.5, 1.0, 1.5])
def test_the_zipf_expectation_matches_sampled_routing(s: float) -> None:
    e, k, t = 64, 6, 24
    q = np.array(expert_inclusion(e, k, s))
    assert q.sum() == pytest.approx(k) and q.max() <= 1.0
    assert all(a >= b for a, b in itertools.pairwise(q))  # most popular first
    rng = np.random.default_rng(7)
    counts = []
    freq = np.zeros(e)
    for _ in range(3000):
        picks = _systematic_topk(rng, q, t)
        assert all(len(set(row)) == k for row in picks[:3])
        freq += np.bincount(picks.ravel(), minlength=e)
        counts.append(np.unique(picks).size)
    assert freq / (3000 * t) == pytest.approx(q, abs=0.01)
    samples = np.array(counts)
    expected = expected_distinct_experts(t, e, k, s)
    assert abs(samples.mean() - expected) < 4 * samples.std(ddof=1) / np.sqrt(samples.size)
    # skew concentrates the routing on fewer experts
    assert expected < expected_distinct_experts(t, e, k)


def test_batch_one_reads_top_k_experts_per_layer_and_a_large_batch_nearly_all() -> None:
    m = moe_model("qwen3-30b-a3b")
    per_expert = expert_params(m) * 2  # FP16
    layers = m.moe_layers

    def experts_read(batch: int) -> float:
        ops = {op.name: op for op in decode_graph(m, batch, 0).ops}
        routed = ops["expert_gate_up"].weight_bytes + ops["expert_down"].weight_bytes
        return routed * ops["expert_down"].repeat / layers / per_expert

    assert experts_read(1) == pytest.approx(8.0, rel=1e-12)
    assert experts_read(512) > 0.999 * 128
    assert experts_read(8) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 8), rel=1e-12)


def test_decode_step_time_rises_with_batch_and_saturates_once_every_expert_is_read() -> None:
    cat = moe_catalog()
    m = moe_model("mixtral-8x7b")
    dm = build_device_model(cat.device("h200-sxm"), cat.runtime("vllm-fp16"))
    t = {b: dm.decode_step(m, b, 0).seconds for b in (1, 2, 4, 8, 16, 32, 64)}
    steps = list(t.values())
    assert all(a < b for a, b in itertools.pairwise(steps))
    first = (t[2] - t[1]) / 1  # one more sequence: a new expert per layer most of the time
    late = (t[64] - t[32]) / 32  # every expert already read: only compute and activations
    assert late < first / 10
    # reading every expert at batch 1 (as a dense model of the total size would) costs
    # far more than the top-2 the step reads
    assert m.moe is not None
    all_read = dataclasses.replace(m, moe=dataclasses.replace(m.moe, experts_per_token=8))
    assert t[1] < 0.6 * dm.decode_step(all_read, 1, 0).seconds


@pytest.mark.parametrize("runtime", ["vllm-fp16", "hf-eager-fp16"])
@pytest.mark.parametrize("tokens", [1, 7, 300])
def test_a_lone_moe_chunk_costs_its_prefill(runtime: str, tokens: int) -> None:
    # the routed experts' GEMMs are not affine in the tokens: costed exactly per count
    cat = moe_catalog()
    m = moe_model("qwen3-30b-a3b")
    dm = build_device_model(cat.device("h100-sxm"), cat.runtime(runtime))
    mixed = dm.chunked_step(m, 0, 0, [(tokens, 0)])  # type: ignore[attr-defined]
    alone = dm.prefill(m, [tokens])
    assert mixed.seconds == pytest.approx(alone.seconds, rel=1e-9)
    assert mixed.bytes == pytest.approx(alone.bytes, rel=1e-9)
    assert mixed.flops == pytest.approx(alone.flops, rel=1e-9)


def test_vectorised_moe_decode_steps_equal_the_scalar_steps() -> None:
    cat = moe_catalog()
    m = moe_model("mixtral-8x7b")
    dm = build_device_model(cat.device("h200-sxm"), cat.runtime("vllm-fp8"))
    kv = np.array([0, 100, 5000, 40000])
    secs, joules = dm.decode_steps(m, 16, kv)  # type: ignore[attr-defined]
    for i, x in enumerate(kv):
        c = dm.decode_step(m, 16, int(x))
        assert secs[i] == c.seconds and joules[i] == c.joules
