"""Tensor and pipeline parallel groups (``simulations.core.devices.parallel``): TP 1 is the
single device, all-reduce bytes and times follow the ring formula, more link bandwidth never
slows a pass, and pipeline bubbles follow (stages − 1) / (micro-batches + stages − 1)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.parallel import (
    ALLREDUCE_ONE_SHOT,
    ParallelGroup,
    allreduce_bytes,
    one_shot_allreduce_s,
    ring_allreduce_s,
    shard_model,
    stage_model,
)
from simulations.core.engine.curve import DecodeCurve
from simulations.core.errors import SpecError

CAT = builtin_catalog()
MODEL = CAT.model("llama3.1-70b")
NVLINK4 = CAT.link("nvlink4")


def h100():
    return build_device_model(CAT.device("h100-sxm"), CAT.runtime("vllm-fp16"))


def test_a_group_of_one_costs_exactly_the_single_device() -> None:
    dm = build_device_model(CAT.device("a100-80gb"), CAT.runtime("vllm-fp16"))
    model = CAT.model("llama2-7b")
    group = ParallelGroup(dm, 1, 1, link=None)
    assert group.prefill(model, [512, 300]) == dm.prefill(model, [512, 300])
    assert group.decode_step(model, 17, 9000) == dm.decode_step(model, 17, 9000)
    assert group.weights_bytes(model) == dm.weights_bytes(model)
    assert group.kv_bytes_per_token(model) == dm.kv_bytes_per_token(model)
    assert group.memory_capacity_bytes == dm.memory_capacity_bytes
    assert group.collective_decode_s(model, 17) == 0.0
    assert group.parallel_info() is None


def test_allreduce_bytes_are_tokens_times_hidden_times_two() -> None:
    assert allreduce_bytes(MODEL, 1) == 8192 * 2
    assert allreduce_bytes(MODEL, 37) == 37 * 8192 * 2


def test_ring_allreduce_is_latency_steps_plus_the_ring_share_of_the_bytes() -> None:
    nbytes = 37 * 8192 * 2
    expected = 6 * 0.47e-6 + 6 / 4 * nbytes / 450e9
    assert ring_allreduce_s(NVLINK4, 4, nbytes) == pytest.approx(expected, rel=1e-15)
    assert ring_allreduce_s(NVLINK4, 1, nbytes) == 0.0
    assert one_shot_allreduce_s(NVLINK4, 4, nbytes) == pytest.approx(
        0.47e-6 + 3 * nbytes / 450e9, rel=1e-15
    )


def test_a_tp_step_adds_two_allreduces_per_layer_to_one_shards_step() -> None:
    dm = h100()
    group = ParallelGroup(dm, 4, link=NVLINK4)
    shard = dm.decode_step(shard_model(MODEL, 4), 8, 4000)
    comm = 80 * 2 * ring_allreduce_s(NVLINK4, 4, allreduce_bytes(MODEL, 8))
    step = group.decode_step(MODEL, 8, 4000)
    assert step.seconds == pytest.approx(shard.seconds + comm, rel=1e-12)
    assert group.collective_decode_s(MODEL, 8) == pytest.approx(comm, rel=1e-12)
    assert step.flops == 4 * shard.flops


def test_the_stack_chooses_the_allreduce_algorithm() -> None:
    dm = h100()
    rt = replace(dm.runtime, params={**dm.runtime.params, "allreduce_algorithm": 1})
    one_shot = build_device_model(dm.device, rt)
    group = ParallelGroup(one_shot, 8, link=NVLINK4)
    assert group.algorithm == ALLREDUCE_ONE_SHOT
    expected = 80 * 2 * one_shot_allreduce_s(NVLINK4, 8, allreduce_bytes(MODEL, 3))
    assert group.collective_decode_s(MODEL, 3) == pytest.approx(expected, rel=1e-12)
    bad = replace(dm.runtime, params={**dm.runtime.params, "allreduce_algorithm": 7})
    with pytest.raises(SpecError) as err:
        ParallelGroup(build_device_model(dm.device, bad), 2, link=NVLINK4)
    assert err.value.field == "vllm-fp16.params.allreduce_algorithm"


@pytest.mark.parametrize(("tp", "pp", "m"), [(2, 1, 1), (8, 1, 1), (4, 2, 4), (2, 4, 2)])
def test_more_link_bandwidth_never_slows_a_step(tp: int, pp: int, m: int) -> None:
    dm = h100()
    links = [
        replace(NVLINK4, bw_gbps=bw, latency_us=lat)
        for bw, lat in ((12.5, 2.7), (31.5, 1.0), (63.0, 1.0), (300.0, 0.47), (900.0, 0.47))
    ]
    for batch, kv in ((1, 100), (8, 8000), (64, 20000)):
        times = [
            ParallelGroup(dm, tp, pp, micro_batches=m, link=link)
            .decode_step(MODEL, batch, kv)
            .seconds
            for link in links
        ]
        assert times == sorted(times, reverse=True), (batch, times)
    for lens in ([100], [2000, 500, 800]):
        times = [
            ParallelGroup(dm, tp, pp, micro_batches=m, link=link).prefill(MODEL, lens).seconds
            for link in links
        ]
        assert times == sorted(times, reverse=True), (lens, times)


@pytest.mark.parametrize(("pp", "m"), [(2, 1), (2, 4), (4, 4), (4, 8), (8, 2)])
def test_pipeline_bubbles_follow_stages_minus_one_over_micro_batches_plus_stages_minus_one(
    pp: int, m: int
) -> None:
    dm = h100()
    group = ParallelGroup(dm, 1, pp, micro_batches=m, link=NVLINK4)
    assert group.bubble_fraction() == (pp - 1) / (m + pp - 1)
    batch, kv = 8 * m, 1000 * m
    stage = dm.decode_step(stage_model(MODEL, 1, pp), batch // m, kv // m)
    t_stage = stage.seconds + group.stage_comm_s(MODEL, batch // m)
    step = group.decode_step(MODEL, batch, kv)
    assert step.seconds == pytest.approx((m + pp - 1) * t_stage, rel=1e-12)
    busy = m * t_stage
    assert (step.seconds - busy) / step.seconds == pytest.approx(group.bubble_fraction())


def test_a_group_holds_the_weights_once_and_each_device_its_share() -> None:
    dm = h100()
    group = ParallelGroup(dm, 4, 2, link=NVLINK4)
    assert group.weights_bytes(MODEL) == 4 * dm.weights_bytes(shard_model(MODEL, 4))
    assert group.memory_capacity_bytes == 8 * dm.memory_capacity_bytes
    # A device of one stage holds a quarter of half the layers (plus embedding and head).
    assert group.device_weights_bytes(MODEL) < group.weights_bytes(MODEL) / 8 * 1.1
    assert group.kv_bytes_per_token(MODEL) == pytest.approx(dm.kv_bytes_per_token(MODEL))


def test_a_degree_that_does_not_divide_the_layers_names_n_layers() -> None:
    with pytest.raises(SpecError) as err:
        stage_model(MODEL, 1, 3)
    assert err.value.field == "llama3.1-70b.n_layers"


def test_a_parallel_group_without_a_link_is_refused_naming_the_link() -> None:
    with pytest.raises(SpecError) as err:
        ParallelGroup(h100(), 2)
    assert err.value.field == "options.link"


def test_a_tensor_parallel_group_keeps_its_shards_convex_decode_cost() -> None:
    """A TP group's step is its shard's plus batch-only collectives, so it is as convex in
    the cached tokens as the shard: its decode curve learns pieces at their ends and sums
    every run as the step-by-step reference does. Pipelines and data-parallel attention
    (ceil of the tokens per group) do not claim it."""
    group = ParallelGroup(h100(), 4, link=NVLINK4)
    assert group.decode_convex_in_kv
    assert not ParallelGroup(h100(), 2, 2, micro_batches=2, link=NVLINK4).decode_convex_in_kv

    def step(batch: int, kv: int) -> tuple[float, float]:
        c = group.decode_step(MODEL, batch, kv)
        return c.seconds, c.joules

    convex = DecodeCurve(step, steps_fn=lambda b, kv: group.decode_steps(MODEL, b, kv), convex=True)
    convex.kv_limit = 200_000
    reference = DecodeCurve(step, exact=True)
    rng = np.random.default_rng(11)
    for _ in range(150):
        batch = int(rng.integers(1, 64))
        k0 = int(rng.integers(0, 150_000 // batch)) * batch
        n = int(rng.integers(1, 200))
        assert convex.run_cost(batch, k0, n) == pytest.approx(
            reference.run_cost(batch, k0, n), rel=1e-12
        )
