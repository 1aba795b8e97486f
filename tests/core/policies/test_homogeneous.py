"""The homogeneous policy: registry entry, options, the result document, both modes."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.core.devices.base import host_round_trip_s
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import SpecError
from simulations.core.policies import get_policy
from simulations.core.policies.homogeneous import HomogeneousPolicy
from simulations.core.spec import ArrivalSpec, LengthDist, SloSpec, WorkloadSpec
from tests.core.engine.doubles import LLAMA7B, fpga_spec, gpu_spec, mixed_factory, placement, system

WORKLOAD = WorkloadSpec(
    requests=80,
    input_tokens=LengthDist("uniform", low=100, high=1500),
    output_tokens=LengthDist("uniform", low=20, high=300),
    arrival=ArrivalSpec("closed"),
    seed=11,
)


def test_it_is_registered_with_a_batch_one_default() -> None:
    cls = get_policy("homogeneous")
    assert cls is HomogeneousPolicy
    opts = {o["name"]: o for o in cls.describe()["options"]}
    assert opts["max_batch"]["default"] == 1
    assert opts["max_batch"]["minimum"] == 1
    assert {"block_size", "memory_utilization", "max_batched_tokens", "prefetch_ratio"} <= set(opts)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_batch": 0}, "options.max_batch"),
        ({"max_batch": 2.5}, "options.max_batch"),
        ({"memory_utilization": 1.5}, "options.memory_utilization"),
        ({"batch": 4}, "options.batch"),
    ],
)
def test_it_rejects_bad_options_naming_them(options: dict, field: str) -> None:
    with pytest.raises(SpecError) as err:
        HomogeneousPolicy.resolve_options(options)
    assert err.value.field == field


def test_run_returns_the_result_document() -> None:
    sys_ = system("4xGPU", "homogeneous", placement(gpu_spec(), 4), max_batch=16)
    r = HomogeneousPolicy(mixed_factory()).run(
        sys_, LLAMA7B, WORKLOAD, SloSpec(ttft_p90_ms=1e9), np.random.default_rng(0)
    )
    assert r["name"] == "4xGPU" and r["policy"] == "homogeneous"
    assert r["requests"] == 80
    assert r["generated_tokens"] == int(generate_requests(WORKLOAD).output_tokens.sum())
    assert r["devices"][0]["count"] == 4
    assert len(r["timeline"]) == 4
    assert r["slo_attainment"] == 1.0
    assert r["scheduler"]["options"]["max_batch"] == 16


def test_continuous_batching_raises_throughput_and_cuts_waiting() -> None:
    reqs = generate_requests(WORKLOAD, LLAMA7B)
    pol = HomogeneousPolicy(mixed_factory())
    one = pol.simulate(system("b1", "homogeneous", placement(gpu_spec(), 2)), LLAMA7B, reqs)
    cb = pol.simulate(
        system("cb", "homogeneous", placement(gpu_spec(), 2), max_batch=64), LLAMA7B, reqs
    )
    assert cb.t_end < one.t_end / 3
    assert np.mean(cb.first_token_s) < np.mean(one.first_token_s) / 3


def test_fpgas_pay_the_host_sampling_round_trip_and_use_the_prefetch_ratio() -> None:
    reqs = RequestSet.from_lists([0.0], [256], [101])
    fpga = placement(fpga_spec(), 1, bits=4, kv_bits=8)
    pol = HomogeneousPolicy(mixed_factory())
    m1 = pol.simulate(system("f", "homogeneous", fpga, prefetch_ratio=1), LLAMA7B, reqs)
    m4 = pol.simulate(system("f", "homogeneous", fpga, prefetch_ratio=4), LLAMA7B, reqs)
    assert m4.t_end < m1.t_end
    dm = mixed_factory()(fpga.device, fpga.runtime).with_prefetch(4)
    decode = sum(dm.decode_step(LLAMA7B, 1, 256 + k).seconds for k in range(100))
    prefill = dm.prefill(LLAMA7B, [256]).seconds
    rt = host_round_trip_s(fpga.device, LLAMA7B)
    assert rt > 0
    assert m4.t_end == pytest.approx(prefill + decode + 100 * rt, rel=1e-9)
