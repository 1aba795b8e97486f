"""HeteroLLM speed target: solving the partition of every Matmul of Llama-8B (32 layers ×
7 Matmuls + the LM head) at one sequence length in under 50 ms, from cold caches (fresh
GPU and NPU cost models and a fresh solver per round)."""

from __future__ import annotations

from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.gpu import GpuModel
from simulations.core.devices.npu import NpuModel
from simulations.core.graph import OpKind, prefill_graph
from simulations.core.memory import SharedMemoryBus, UnifiedMemorySync
from simulations.core.policies.heterollm import Gemm, HeteroSoc, Partition, PartitionSolver

CAT = builtin_catalog()
MODEL = CAT.model("llama3.1-8b")
SEQ = 1024
GEMMS = [
    (op.repeat, Gemm(op.name, op.rows, op.in_features, op.out_features))
    for op in prefill_graph(MODEL, [SEQ]).ops
    if op.kind is OpKind.GEMM
]


def _cold_soc() -> HeteroSoc:
    npu_rt = CAT.runtime("w4a16-qnn-hexagon")
    npu_dev = CAT.device("hexagon-npu")
    return HeteroSoc(
        gpu=GpuModel(CAT.device("adreno-750"), CAT.runtime("w4a16-opencl-adreno")),
        npu=NpuModel(npu_dev, npu_rt),
        bus=SharedMemoryBus.of(npu_dev),
        sync=UnifiedMemorySync.from_runtime(npu_rt),
        name="snapdragon-8-gen-3",
    )


def _solve_all() -> list[Partition]:
    solver = PartitionSolver(_cold_soc(), 75e-6)
    return [solver.solve(g) for repeat, g in GEMMS for _ in range(repeat)]


def test_bench_heterollm_partition_solver_llama8b(benchmark: Any) -> None:
    benchmark.extra_info.update(
        name=f"heterollm partition solver, every Matmul of Llama-8B at {SEQ} tokens",
        unit="ms",
        target=50.0,
    )
    parts = benchmark.pedantic(_solve_all, rounds=10, iterations=1)
    assert len(parts) == 32 * 7 + 1
    assert any(p.uses_gpu and p.uses_npu for p in parts)
