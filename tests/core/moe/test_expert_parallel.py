"""Expert parallelism: all-to-all bytes, the layouts with tensor parallelism, the busiest
device under skewed routing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulations.core.devices import build_device_model
from simulations.core.devices.parallel import (
    ParallelGroup,
    all_to_all_bytes,
    all_to_all_destinations,
    allreduce_bytes,
    allreduce_s,
    shard_model,
)
from simulations.core.errors import SpecError
from simulations.core.graph import expert_load

from .catalog import moe_catalog, moe_model

CAT = moe_catalog()


def _gpu(device: str = "h100-sxm", runtime: str = "vllm-fp8") -> object:
    return build_device_model(CAT.device(device), CAT.runtime(runtime))


def test_all_to_all_bytes_are_one_copy_per_destination_device() -> None:
    m = moe_model("mixtral-8x7b")
    # top-2 of 8 experts over 2 devices of 4: P(no expert on the other device) = C(4,2)/C(8,2)
    dest = 1 - math.comb(4, 2) / math.comb(8, 2)
    assert all_to_all_destinations(8, 2, 2) == pytest.approx(dest, rel=1e-15)
    assert all_to_all_bytes(m, 64, 2) == pytest.approx(64 * dest * 4096 * 2, rel=1e-15)
    assert all_to_all_bytes(m, 64, 1) == 0.0


def test_all_to_all_destinations_match_sampled_routing() -> None:
    rng = np.random.default_rng(3)
    e, k, ep = 256, 8, 8
    picks = np.argsort(rng.random((20000, e)), axis=1)[:, :k] // (e // ep)
    # device 0's tokens: how many other devices each one reaches
    other = np.array([len(set(row.tolist()) - {0}) for row in picks])
    assert other.mean() == pytest.approx(all_to_all_destinations(e, k, ep), abs=0.03)


def test_data_parallel_attention_step_adds_two_all_to_alls_per_moe_layer() -> None:
    m = moe_model("mixtral-8x7b")
    inner = _gpu()
    link = CAT.link("nvlink4")
    group = ParallelGroup(inner, 1, ep=2, link=link)  # type: ignore[arg-type]
    shard = shard_model(m, 1, 2)
    assert shard.moe is not None and shard.moe.held_experts == 4 and shard.moe.token_groups == 2
    step = group.decode_step(m, 64, 64 * 500)
    alone = inner.decode_step(shard, 32, 32 * 500)  # type: ignore[attr-defined]
    a2a = link.latency_us * 1e-6 + all_to_all_bytes(m, 32, 2) / (link.bw_gbps * 1e9)
    assert step.seconds == pytest.approx(alone.seconds + 32 * 2 * a2a, rel=1e-12)
    assert group.collective_decode_s(m, 64) == pytest.approx(32 * 2 * a2a, rel=1e-12)
    assert group.group_size == 2


def test_expert_parallel_over_the_tensor_parallel_group_keeps_tps_collectives() -> None:
    m = moe_model("mixtral-8x7b")
    inner = _gpu()
    link = CAT.link("nvlink4")
    tp = ParallelGroup(inner, 2, link=link)  # type: ignore[arg-type]
    ep = ParallelGroup(inner, 2, ep=2, link=link)  # type: ignore[arg-type]
    ar = 32 * 2 * allreduce_s(link, 2, allreduce_bytes(m, 16), tp.algorithm)
    assert ep.collective_decode_s(m, 16) == pytest.approx(ar, rel=1e-12)
    assert tp.collective_decode_s(m, 16) == pytest.approx(ar, rel=1e-12)
    # the same weights in total, whole experts instead of slices of every expert
    assert ep.weights_bytes(m) == pytest.approx(tp.weights_bytes(m), rel=1e-12)
    sh = shard_model(m, 2, 2)
    assert sh.moe is not None and sh.moe.expert_ffn_size == 14336 and sh.moe.held_experts == 4
    assert shard_model(m, 2).moe.expert_ffn_size == 7168  # type: ignore[union-attr]
    # at batch 1 the two top-2 experts may sit on one device: whole experts are read there
    assert ep.decode_step(m, 1, 100).seconds > 0


def test_skewed_routing_makes_the_busiest_device_set_the_step() -> None:
    m = moe_model("qwen3-30b-a3b")
    uniform = shard_model(m, 1, 2)
    skewed = shard_model(m.with_routing_zipf(1.0), 1, 2)
    assert skewed.moe is not None and uniform.moe is not None
    busy, even = expert_load(skewed.moe, 256), expert_load(uniform.moe, 256)
    # uniform: each device computes half of the 2 × 256 × 8 routed copies
    assert even.routed == pytest.approx(256 * 2 * 8 / 2, rel=1e-12)
    assert busy.routed > 1.3 * even.routed
    inner = _gpu("h100-sxm", "vllm-fp16")
    link = CAT.link("nvlink4")
    g_even = ParallelGroup(inner, 1, ep=2, link=link)  # type: ignore[arg-type]
    t_even = g_even.decode_step(m, 512, 512 * 200).seconds
    t_skew = g_even.decode_step(m.with_routing_zipf(1.0), 512, 512 * 200).seconds
    assert t_skew > t_even


@pytest.mark.parametrize(("tp", "ep"), [(2, 4), (4, 2)])
def test_unmodelled_layouts_are_refused_naming_the_option(tp: int, ep: int) -> None:
    with pytest.raises(SpecError, match=r"options\.expert_parallel"):
        shard_model(moe_model("mixtral-8x7b"), tp, ep)


def test_expert_parallel_on_a_dense_model_is_refused() -> None:
    with pytest.raises(SpecError, match=r"options\.expert_parallel"):
        shard_model(CAT.model("llama2-7b"), 1, 2)


@pytest.mark.parametrize(("tp", "ep"), [(2, 2), (1, 2)])
def test_expert_parallel_groups_answer_array_steps_as_the_scalar_steps(tp: int, ep: int) -> None:
    m = moe_model("mixtral-8x7b")
    group = ParallelGroup(_gpu(), tp, ep=ep, link=CAT.link("nvlink4"))  # type: ignore[arg-type]
    kv = np.array([0, 33, 4000, 70001])
    secs, joules = group.decode_steps(m, 24, kv)
    for i, x in enumerate(kv):
        c = group.decode_step(m, 24, int(x))
        assert secs[i] == c.seconds and joules[i] == c.joules
