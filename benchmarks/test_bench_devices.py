"""Speed of the NPU and CPU device models (what the HeteroLLM partition solver and Neo's
load-aware scheduler call in their inner loops).

Targets: an NPU matmul of a shape never seen before under 20 µs (the solver sweeps row
partitions in steps of 256 and sequence partitions in steps of 32, HeteroLLM §4.3); one NPU
decode step of a 32-layer model at a new context length under 200 µs once the weights'
shapes are warm; CPU decode attention of a batch
under 20 µs for a new (batch, KV) pair.
"""

from __future__ import annotations

import itertools
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.cpu import CpuModel
from simulations.core.devices.npu import NpuModel

CAT = builtin_catalog()
LLAMA8 = CAT.model("llama3.1-8b")
SHAPES = [(256 * i, 4096, 32 * j) for i in range(1, 57) for j in range(1, 33)]


def _npu() -> NpuModel:
    return NpuModel(CAT.device("hexagon-npu"), CAT.runtime("w4a16-qnn-hexagon"))


def test_bench_npu_matmul_new_shape(benchmark: Any) -> None:
    def sweep(model: NpuModel) -> float:
        return sum(model.matmul(*s) for s in SHAPES)

    total = benchmark.pedantic(
        sweep, setup=lambda: ((_npu(),), {}), rounds=20, iterations=1, warmup_rounds=1
    )
    assert total > 0
    per_shape_us = benchmark.stats.stats.mean / len(SHAPES) * 1e6
    benchmark.extra_info.update(
        name="NPU matmul, uncached shape (HeteroLLM solver sweep)",
        unit="us",
        value=per_shape_us,
        target=20.0,
    )


def test_bench_npu_decode_step_new_context(benchmark: Any) -> None:
    model = _npu()
    model.decode_step(LLAMA8, 1, 256)  # warm the shape-only caches (weights' matmuls)
    kv = itertools.count(257)
    benchmark.extra_info.update(
        name="NPU decode step, Llama-3.1-8B (32 layers), new context length",
        unit="us",
        target=200.0,
    )
    cost = benchmark(lambda: model.decode_step(LLAMA8, 1, next(kv)))
    assert cost.seconds > 0


def test_bench_cpu_attention_new_batch(benchmark: Any) -> None:
    cpu = CpuModel(CAT.device("g5-4xlarge-cpu"), CAT.runtime("ispc-paged-attention-cpu"))
    kv = itertools.count(1000)
    benchmark.extra_info.update(
        name="CPU decode attention, new (batch, KV) pair (Neo scheduler)", unit="us", target=20.0
    )
    t = benchmark(lambda: cpu.attention_decode(LLAMA8, 32, next(kv)))
    assert t > 0
