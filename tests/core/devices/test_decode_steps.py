"""``decode_steps`` (many decode steps of one batch size at once, what the engine's decode
curve learns from) equals ``decode_step`` element by element, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.devices.parallel import ParallelGroup
from simulations.core.errors import CapacityError

CAT = builtin_catalog()


@pytest.mark.parametrize(
    ("device", "runtime"),
    [
        ("a100-80gb", "vllm-fp16"),
        ("a100-80gb", "hf-eager-fp16"),
        ("h100-sxm", "vllm-fp16"),
        ("v100s", "hf-eager-fp16"),
        ("u280", None),
    ],
)
@pytest.mark.parametrize("batch", [1, 7, 64, 256])
def test_decode_steps_equal_the_scalar_steps_bit_for_bit(
    device: str, runtime: str | None, batch: int
) -> None:
    dev = CAT.device(device)
    rt = CAT.runtimes[runtime] if runtime else CAT.default_runtime(dev)
    model = CAT.model("llama2-7b")
    vec = build_device_model(dev, rt)
    one = type(vec)(dev, rt)
    ks = np.array([0, 1, 15, 16, 17, 999, 2048, 3001, 4096], dtype=np.int64)
    secs, joules = vec.decode_steps(model, batch, ks)
    for k, s, j in zip(ks.tolist(), secs.tolist(), joules.tolist(), strict=True):
        cost = one.decode_step(model, batch, k)
        assert (s, j) == (cost.seconds, cost.joules)


def test_decode_steps_refuse_what_the_scalar_step_refuses() -> None:
    dev = CAT.device("v100s")
    dm = build_device_model(dev, CAT.default_runtime(dev))
    model = CAT.model("llama2-7b")
    with pytest.raises(CapacityError):
        dm.decode_steps(model, 4, np.array([10, 10**7], dtype=np.int64))


@pytest.mark.parametrize(("tp", "pp"), [(2, 1), (4, 1), (8, 1), (2, 2)])
@pytest.mark.parametrize("batch", [1, 33, 256])
def test_a_parallel_groups_decode_steps_equal_its_scalar_steps_bit_for_bit(
    tp: int, pp: int, batch: int
) -> None:
    dev, rt = CAT.device("h100-sxm"), CAT.runtimes["vllm-fp16"]
    model = CAT.model("llama3.1-70b")
    link = CAT.link("nvlink4")
    vec = ParallelGroup(build_device_model(dev, rt), tp, pp, link=link)
    one = ParallelGroup(build_device_model(dev, rt), tp, pp, link=link)
    ks = np.array([0, 1, 17, 999, 4096, 20_000], dtype=np.int64)
    secs, joules = vec.decode_steps(model, batch, ks)
    for k, s, j in zip(ks.tolist(), secs.tolist(), joules.tolist(), strict=True):
        cost = one.decode_step(model, batch, k)
        assert (s, j) == (cost.seconds, cost.joules)
    # beyond the shard's memory both paths refuse alike
    with pytest.raises(CapacityError) as scalar:
        one.decode_step(model, batch, 10**9)
    with pytest.raises(CapacityError) as vector:
        vec.decode_steps(model, batch, np.array([0, 10**9], dtype=np.int64))
    assert str(vector.value) == str(scalar.value)
