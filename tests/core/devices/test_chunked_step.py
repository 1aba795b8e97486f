"""The cost of a chunked-prefill iteration (``DeviceModel.chunked_step``)."""

from __future__ import annotations

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.errors import SpecError

CAT = builtin_catalog()
MODEL = CAT.model("llama2-7b")


def _gpu(runtime: str) -> object:
    dev = CAT.device("a100-80gb")
    return build_device_model(dev, CAT.runtimes[runtime])


@pytest.mark.parametrize("runtime", ["vllm-fp16", "hf-eager-fp16"])
@pytest.mark.parametrize("tokens", [1, 17, 512, 2048])
def test_a_lone_chunk_from_an_empty_cache_costs_its_prefill(runtime: str, tokens: int) -> None:
    dm = _gpu(runtime)
    mixed = dm.chunked_step(MODEL, 0, 0, [(tokens, 0)])  # type: ignore[attr-defined]
    alone = dm.prefill(MODEL, [tokens])  # type: ignore[attr-defined]
    assert mixed.seconds == pytest.approx(alone.seconds, rel=1e-12)
    assert mixed.joules == pytest.approx(alone.joules, rel=1e-12)
    assert mixed.flops == pytest.approx(alone.flops, rel=1e-12)
    assert mixed.bytes == pytest.approx(alone.bytes, rel=1e-12)


@pytest.mark.parametrize("runtime", ["vllm-fp16", "hf-eager-fp16"])
def test_decodes_ride_along_a_prefill_chunk(runtime: str) -> None:
    dm = _gpu(runtime)
    decode = dm.decode_step(MODEL, 64, 64_000).seconds  # type: ignore[attr-defined]
    chunk = dm.chunked_step(MODEL, 0, 0, [(512, 1024)]).seconds  # type: ignore[attr-defined]
    both = dm.chunked_step(MODEL, 64, 64_000, [(512, 1024)]).seconds  # type: ignore[attr-defined]
    # one pass streams the weights once: cheaper than the two apart, dearer than either
    assert max(decode, chunk) < both < decode + chunk


def test_a_chunk_after_a_cached_prefix_costs_more_than_from_scratch() -> None:
    dm = _gpu("vllm-fp16")
    fresh = dm.chunked_step(MODEL, 0, 0, [(512, 0)]).seconds  # type: ignore[attr-defined]
    later = dm.chunked_step(MODEL, 0, 0, [(512, 3000)]).seconds  # type: ignore[attr-defined]
    assert later > fresh


def test_a_family_without_mixed_iterations_refuses_chunked_prefill() -> None:
    dev = CAT.device("u280")
    dm = build_device_model(dev, CAT.default_runtime(dev))
    with pytest.raises(SpecError) as err:
        dm.chunked_step(MODEL, 4, 1000, [(100, 0)])
    assert err.value.field == "options.chunked_prefill"
