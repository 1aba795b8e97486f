"""Sliding-window layers (gpt-oss: 128 tokens on every other layer) attend to the window
only: exact pairs in prefill and chunks, an upper bound ``min(Σ, B·W)`` in decode steps."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.core.devices import build_device_model
from simulations.core.graph import decode_graph, prefill_graph, window_pairs

from .catalog import moe_catalog, moe_model

CAT = moe_catalog()
OSS = moe_model("gpt-oss-120b")


@pytest.mark.parametrize("window", [1, 5, 128])
@pytest.mark.parametrize(("length", "cached"), [(1, 0), (7, 0), (300, 0), (40, 100), (9, 500)])
def test_window_pairs_count_what_each_query_sees(length: int, cached: int, window: int) -> None:
    pairs = sum(min(cached + j, window) for j in range(1, length + 1))
    first_key = max(0, cached + 1 - window)  # the earliest position any query sees
    assert window_pairs(length, cached, window) == (pairs, cached + length - first_key)


def _ops(g: object) -> dict[str, object]:
    return {op.name: op for op in g.layer_ops}  # type: ignore[attr-defined]


def test_windowed_layers_of_a_long_decode_read_only_the_window() -> None:
    g = decode_graph(OSS, 4, 4 * 20_000, fused_attention=True)
    ops = _ops(g)
    full, win = ops["attention"], ops["attention_swa"]
    assert full.repeat == win.repeat == 18  # type: ignore[attr-defined]
    kv_dim = 8 * 64
    assert full.kv_read_bytes == 2 * kv_dim * (4 * 20_000 + 4) * 2  # type: ignore[attr-defined]
    assert win.kv_read_bytes == 2 * kv_dim * (4 * 128) * 2  # type: ignore[attr-defined]
    # a short context is below the window: the same work as full attention
    short = _ops(decode_graph(OSS, 4, 40, fused_attention=True))
    assert short["attention_swa"].flops == short["attention"].flops  # type: ignore[attr-defined]


def test_a_long_prompt_pays_the_window_on_windowed_layers_only() -> None:
    ops = _ops(prefill_graph(OSS, [4096], fused_attention=True))
    pairs = window_pairs(4096, 0, 128)[0]
    assert ops["attention_swa"].flops / ops["attention"].flops == pytest.approx(  # type: ignore[attr-defined]
        pairs / (4096 * 4097 // 2), rel=1e-12
    )


@pytest.mark.parametrize("tokens", [1, 100, 2000])
def test_a_lone_windowed_chunk_costs_its_prefill(tokens: int) -> None:
    dm = build_device_model(CAT.device("h100-sxm"), CAT.runtime("vllm-fp16"))
    mixed = dm.chunked_step(OSS, 0, 0, [(tokens, 0)])  # type: ignore[attr-defined]
    alone = dm.prefill(OSS, [tokens])
    assert mixed.seconds == pytest.approx(alone.seconds, rel=1e-9)
    assert mixed.flops == pytest.approx(alone.flops, rel=1e-9)


def test_windowed_array_steps_equal_the_scalar_steps() -> None:
    dm = build_device_model(CAT.device("h100-sxm"), CAT.runtime("vllm-fp16"))
    kv = np.array([0, 100, 511, 512, 513, 90_000])
    secs, joules = dm.decode_steps(OSS, 4, kv)  # type: ignore[attr-defined]
    for i, x in enumerate(kv):
        c = dm.decode_step(OSS, 4, int(x))
        assert secs[i] == c.seconds and joules[i] == c.joules
