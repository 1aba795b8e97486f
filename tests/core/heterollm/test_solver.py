"""HeteroLLM's partition solver (§4.3): optimality against single backends, alignment,
coverage of the Matmul, decode row-cutting, and the shared-memory co-run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.errors import SpecError
from simulations.core.graph import OpKind, prefill_graph
from simulations.core.memory import SharedMemoryBus
from simulations.core.policies.heterollm import Gemm, HeteroSoc, PartitionSolver, corun_s
from simulations.core.policies.heterollm.solver import ROW_ALIGN, SEQ_ALIGN, row_options
from simulations.core.spec import ModelSpec

# (k, n) of the Matmuls of Llama-3-8B and InternLM2-1.8B (QO, KV, gate/up, down, LM head).
SHAPES = [
    (4096, 4096),
    (4096, 1024),
    (4096, 14336),
    (14336, 4096),
    (2048, 2048),
    (2048, 1024),
    (8192, 2048),
    (4096, 128256),
]


def _gemms(model: ModelSpec, tokens: int) -> list[Gemm]:
    g = prefill_graph(model, [tokens])
    return [
        Gemm(op.name, op.rows, op.in_features, op.out_features)
        for op in g.ops
        if op.kind is OpKind.GEMM
    ]


@settings(max_examples=40, deadline=None)
@given(
    tokens=st.integers(min_value=1, max_value=1300),
    shape=st.sampled_from(SHAPES),
    handover_us=st.sampled_from([0.0, 75.0, 950.0]),
)
def test_solver_is_never_slower_than_the_best_single_backend(
    soc: HeteroSoc, tokens: int, shape: tuple[int, int], handover_us: float
) -> None:
    solver = PartitionSolver(soc, handover_us * 1e-6)
    g = Gemm("mm", tokens, *shape)
    best = solver.solve(g)
    singles = [solver.solve(g, "gpu")] + [
        solver.solve(g, "npu", static) for static in ("padding", "pipe")
    ]
    assert best.objective_s <= min(p.objective_s for p in singles) * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(tokens=st.integers(min_value=1, max_value=2100), shape=st.sampled_from(SHAPES))
def test_partitions_respect_the_alignment_and_cover_the_matmul(
    soc: HeteroSoc, tokens: int, shape: tuple[int, int]
) -> None:
    solver = PartitionSolver(soc, 75e-6)
    p = solver.solve(Gemm("mm", tokens, *shape))
    n = shape[1]
    if not p.uses_npu:
        assert p.strategy == "gpu" and p.gpu_tail_tokens == tokens
        return
    assert p.npu_rows == n or p.npu_rows % ROW_ALIGN == 0
    # prepared static graphs only (one position: the decode graph, reused by the LM head)
    assert all(s in soc.npu.static_shapes or s == 1 for s in p.npu_graphs)
    assert all(solver.prepared(s) for s in p.npu_graphs)
    covered = min(p.npu_tokens, tokens)
    assert covered == tokens or covered % SEQ_ALIGN == 0
    assert p.npu_rows + p.gpu_rows == n
    assert p.gpu_tail_tokens + covered == tokens


def test_row_options_are_aligned_and_end_with_all_rows() -> None:
    rows = row_options(14336)
    assert rows[-1] == 14336
    assert np.all(rows[:-1] % ROW_ALIGN == 0)
    assert row_options(100).tolist() == [100]


def test_decode_partitions_cut_rows_of_the_prepared_decode_graph(soc: HeteroSoc) -> None:
    solver = PartitionSolver(soc, 0.0)
    for k, n in SHAPES:
        p = solver.solve(Gemm("mm", 1, k, n), "rows", decode=True)
        assert p.gpu_tail_tokens in (0, 1)
        if p.uses_npu:
            assert p.npu_graphs == (1,)
            assert p.strategy in ("row-cutting", "npu")


def test_wide_matmuls_are_row_cut_in_decode(soc: HeteroSoc) -> None:
    # FFN gate/up and the LM head stream the most weight bytes: sharing them over both
    # processors beats the GPU alone on the shared memory (§4.1.2).
    solver = PartitionSolver(soc, 0.0)
    for k, n in ((4096, 14336), (4096, 128256)):
        p = solver.solve(Gemm("mm", 1, k, n), "rows", decode=True)
        assert p.strategy == "row-cutting"
        assert p.compute_s < solver.solve(Gemm("mm", 1, k, n), "gpu").compute_s


def test_a_misaligned_prompt_is_cut_by_sequence_length(soc: HeteroSoc) -> None:
    # 525 = 512 + 13: the NPU keeps its prepared 512 graph, the GPU takes the margin (§4.1.1)
    p = PartitionSolver(soc, 75e-6).solve(Gemm("q_proj", 525, 4096, 4096))
    assert p.uses_gpu and p.uses_npu
    assert p.npu_tokens <= 525 < p.npu_tokens + p.gpu_tail_tokens + 1
    assert p.strategy in ("seq-cutting", "multi-seq-cutting", "hybrid-cutting")


def test_every_matmul_of_a_model_gets_a_partition(soc: HeteroSoc, llama8b: ModelSpec) -> None:
    solver = PartitionSolver(soc, 75e-6)
    parts = [solver.solve(g) for g in _gemms(llama8b, 300)]
    assert len(parts) == 8
    assert all(np.isfinite(p.objective_s) and p.objective_s > 0 for p in parts)


def test_it_rejects_a_negative_handover(soc: HeteroSoc) -> None:
    with pytest.raises(SpecError) as err:
        PartitionSolver(soc, -1.0)
    assert err.value.field == "handover_s"


def test_it_rejects_an_empty_matmul(soc: HeteroSoc) -> None:
    with pytest.raises(SpecError) as err:
        PartitionSolver(soc, 0.0).solve(Gemm("mm", 0, 4096, 4096))
    assert err.value.field == "gemm.tokens"


@settings(max_examples=30, deadline=None)
@given(
    bytes_g=st.floats(min_value=1e5, max_value=1e9),
    bytes_n=st.floats(min_value=1e5, max_value=1e9),
    rate_g=st.floats(min_value=1.0, max_value=68.0),
    rate_n=st.floats(min_value=1.0, max_value=68.0),
)
def test_corun_agrees_with_the_shared_memory_bus(
    bytes_g: float, bytes_n: float, rate_g: float, rate_n: float
) -> None:
    bus = SharedMemoryBus(68.0)
    ref = bus.stream({"gpu": (bytes_g, rate_g), "npu": (bytes_n, rate_n)}).seconds
    got = float(corun_s(bytes_g / (rate_g * 1e9), bytes_g, bytes_n / (rate_n * 1e9), bytes_n, 68.0))
    assert got == pytest.approx(ref, rel=1e-9)
    assert (bytes_g + bytes_n) / got <= 68e9 * (1 + 1e-12)


def test_corun_of_compute_bound_kernels_is_their_maximum() -> None:
    # tiny demands: no contention, the solver's max(T_gpu, T_npu) of §4.3
    got = float(corun_s(2e-3, 1e3, 3e-3, 1e3, 68.0))
    assert got == pytest.approx(3e-3, rel=1e-5)
    assert float(corun_s(0.0, 0.0, 3e-3, 1e6, 68.0)) == 3e-3


def test_decode_solver_charges_the_refill_to_partitions_whose_npu_share_ends_last(
    soc: HeteroSoc,
) -> None:
    """§3.1/§4.2: an NPU share that ends last leaves the GPU queue empty; with that cost
    the solver prefers a partition that ends on the GPU when one is nearly as fast."""
    for shape in ((4096, 14336), (14336, 4096), (4096, 4096)):
        g = Gemm("mm", 1, *shape)
        free = PartitionSolver(soc, 0.0).solve(g, "rows", decode=True)
        costly = PartitionSolver(soc, 0.0, npu_last_s=1.0).solve(g, "rows", decode=True)
        npu_last = costly.uses_npu and costly.t_npu_s > costly.t_gpu_s
        assert not npu_last
        assert costly.objective_s == pytest.approx(costly.compute_s)
        assert costly.objective_s >= free.objective_s
    with pytest.raises(SpecError) as err:
        PartitionSolver(soc, 0.0, npu_last_s=-1.0)
    assert err.value.field == "npu_last_s"
