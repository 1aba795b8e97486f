"""Speed of the GPU and FPGA device models: one full prefill and one decode step of a
32-layer model (LLaMA2-7B) per evaluation, target under 200 µs.

What is cached and what is measured: the model's shapes (per-layer GEMM dimensions,
parameter counts) and the runtime's resolved constants are computed once — that is the
warm-up. Every measured round then uses a prompt length or context length never seen
before, so the operator graph is rebuilt (about 20 operators with their FLOPs and bytes)
and every operator is costed again; the per-(shape) result caches never hit.
"""

from __future__ import annotations

import itertools
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.fpga import FpgaModel
from simulations.core.devices.gpu import GpuModel

CAT = builtin_catalog()
LLAMA2_7B = CAT.model("llama2-7b")
ROUNDS = 3000
TARGET_US = 200.0


def _gpu() -> DeviceModel:
    return GpuModel(CAT.device("a100-80gb"), CAT.runtime("hf-eager-fp16"))


def _fpga() -> DeviceModel:
    return FpgaModel(CAT.device("u280"), CAT.runtime("flightllm-w4a8"))


def _bench_prefill(benchmark: Any, dm: DeviceModel, name: str) -> None:
    dm.prefill(LLAMA2_7B, [1])  # warm-up: shape-only caches
    lengths = itertools.count(2)
    benchmark.extra_info.update(name=name, unit="us", target=TARGET_US)
    cost = benchmark.pedantic(
        lambda: dm.prefill(LLAMA2_7B, [next(lengths)]), rounds=ROUNDS, iterations=1
    )
    assert cost.seconds > 0


def _bench_decode(benchmark: Any, dm: DeviceModel, name: str) -> None:
    dm.decode_step(LLAMA2_7B, 1, 0)  # warm-up: shape-only caches
    contexts = itertools.count(1)
    benchmark.extra_info.update(name=name, unit="us", target=TARGET_US)
    cost = benchmark.pedantic(
        lambda: dm.decode_step(LLAMA2_7B, 1, next(contexts)), rounds=ROUNDS, iterations=1
    )
    assert cost.seconds > 0


def test_bench_gpu_prefill_new_prompt_length(benchmark: Any) -> None:
    _bench_prefill(benchmark, _gpu(), "GPU model: LLaMA2-7B prefill, new prompt length")


def test_bench_gpu_decode_step_new_context(benchmark: Any) -> None:
    _bench_decode(benchmark, _gpu(), "GPU model: LLaMA2-7B decode step, new context")


def test_bench_fpga_prefill_new_prompt_length(benchmark: Any) -> None:
    _bench_prefill(benchmark, _fpga(), "FPGA model: LLaMA2-7B prefill, new prompt length")


def test_bench_fpga_decode_step_new_context(benchmark: Any) -> None:
    _bench_decode(benchmark, _fpga(), "FPGA model: LLaMA2-7B decode step, new context")
