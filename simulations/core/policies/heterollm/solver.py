"""HeteroLLM's tensor partition solver (§4.3) and its partition strategies (§4.1).

For one Matmul ``[tokens, k] × [k, n]`` (run on the NPU in the permuted order
``[n, k] × [k, tokens]``, §4) the solver enumerates every partition between the GPU and
the NPU and keeps the one minimising the paper's objective

``min(max(T_gpu(p1), T_npu(p2)) + T_sync + T_copy, T_gpu(all), T_npu(all) + T_sync + T_copy)``

A partition gives the NPU ``npu_rows`` of the ``n`` weight rows (aligned to 256, the NPU's
stage granularity, §4.3) over a *token plan*: prepared static graphs run one after another
(§4.1.1) covering ``npu_tokens`` sequence positions (a multiple of 32, §4.3, or one prepared
shape holding the whole prompt, i.e. padding). The GPU takes what is left: the tail
positions beyond the NPU's tokens over all rows (sequence-length cutting) and the other
``n − npu_rows`` rows over the NPU's real positions (row-cutting). Named strategies:

============================  ==========================================================
``gpu``                        everything on the GPU
``npu``                        everything on the NPU, one graph of exactly the prompt
``npu-padding``                everything on the NPU, prompt padded to a prepared graph
``npu-pipe``                   everything on the NPU, several prepared graphs in a row
                               (multi-sequence-length cutting without GPU, §5.2.2 "Pipe")
``online-prepare``             everything on the NPU, a graph built for this prompt
``row-cutting``                rows split, the NPU's graphs hold the prompt exactly
``seq-cutting``                NPU: one prepared graph; GPU: the margin (§4.1.1)
``multi-seq-cutting``          NPU: several prepared graphs; GPU: the margin (§4.1.1)
``hybrid-cutting``             rows split *and* padding or a margin (§4.1.1)
============================  ==========================================================

In decode the token count is fixed (the batch), the NPU graph is generated for it in
advance and only row-cutting applies (§4.1.2).

``max(T_gpu, T_npu)`` is evaluated as the makespan of both kernels on the shared memory
(:func:`.soc.corun_s`), which is the plain maximum for compute-bound prefill kernels and
accounts for bandwidth contention in decode. ``T_sync + T_copy`` (``handover_s``) is what
the caller's synchronisation mechanism charges for sending a kernel's input to the NPU and
its output back (:mod:`.plan`); in decode with fast synchronisation it is zero, and
``npu_last_s`` (the refill of the GPU queue, §3.1) is charged only to partitions whose NPU
share ends last (§4.2: the next GPU kernel is queued behind the GPU's share only while that
share is still running).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from simulations.core.errors import SpecError
from simulations.core.spec import check_count

from .soc import HeteroSoc, corun_s

#: Weight-row alignment of a partition (HeteroLLM §4.3).
ROW_ALIGN = 256
#: Sequence-position alignment of a partition (HeteroLLM §4.3).
SEQ_ALIGN = 32
#: Positions of the decode graph the NPU prepares in advance (one token per step, §4.1.2).
DECODE_TOKENS = 1

#: How a kernel may be placed: every partition (``tensor``), rows only (``rows``, decode),
#: or whole-kernel choices only (``layer``: GPU or NPU, §4 layer-level), or forced.
Scope = Literal["tensor", "rows", "layer", "gpu", "npu"]
#: How the NPU runs a whole-kernel sequence length it has no graph for (§5.2.2).
StaticGraphs = Literal["padding", "pipe", "online-prepare"]


@dataclass(frozen=True, slots=True)
class Gemm:
    """A Matmul ``[tokens, k] × [k, n]`` of the model (activations × weights)."""

    name: str
    tokens: int
    k: int
    n: int


@dataclass(frozen=True, slots=True)
class Partition:
    """The solver's choice for one Matmul and its predicted times.

    ``npu_graphs`` are the prepared shapes the NPU runs in a row (their sum is
    ``npu_tokens``, padding included), ``npu_rows`` the weight rows it computes;
    ``gpu_tail_tokens`` positions run on the GPU over all rows, ``gpu_rows`` rows over the
    NPU's real positions. Times are in seconds; ``compute_s`` is the makespan of both
    processors (shared memory included), ``objective_s`` adds the solver's hand-over cost.
    ``gpu_busy_s``/``npu_busy_s`` are how long each processor is occupied.
    """

    strategy: str
    npu_rows: int
    npu_graphs: tuple[int, ...]
    gpu_tail_tokens: int
    gpu_rows: int
    t_gpu_s: float
    t_npu_s: float
    compute_s: float
    objective_s: float
    gpu_busy_s: float
    npu_busy_s: float
    gpu_bytes: float
    npu_bytes: float
    gpu_compute_bound: bool

    @property
    def npu_tokens(self) -> int:
        """Sequence positions the NPU's graphs cover (padding included)."""
        return sum(self.npu_graphs)

    @property
    def uses_gpu(self) -> bool:
        """Whether the GPU computes any part."""
        return self.t_gpu_s > 0

    @property
    def uses_npu(self) -> bool:
        """Whether the NPU computes any part."""
        return self.t_npu_s > 0

    @property
    def procs(self) -> str:
        """``gpu``, ``npu`` or ``gpu+npu``."""
        if self.uses_gpu and self.uses_npu:
            return "gpu+npu"
        return "npu" if self.uses_npu else "gpu"

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly row of the placement table."""
        return {
            "strategy": self.strategy,
            "backend": self.procs,
            "npu_rows": self.npu_rows,
            "npu_graphs": list(self.npu_graphs),
            "gpu_tail_tokens": self.gpu_tail_tokens,
            "gpu_rows": self.gpu_rows,
            "t_gpu_ms": self.t_gpu_s * 1e3,
            "t_npu_ms": self.t_npu_s * 1e3,
            "compute_ms": self.compute_s * 1e3,
            "objective_ms": self.objective_s * 1e3,
        }


def row_options(n: int) -> np.ndarray:
    """NPU row counts a partition may take: multiples of 256 below ``n``, and ``n``."""
    aligned = np.arange(ROW_ALIGN, n, ROW_ALIGN, dtype=np.int64)
    return np.append(aligned, np.int64(n))


class PartitionSolver:
    """Enumerates and scores partitions of Matmuls for one SoC (HeteroLLM §4.3).

    ``handover_s`` is the solver's ``T_sync + T_copy`` for a kernel that uses the NPU;
    ``npu_last_s`` is added where the NPU's share ends after the GPU's (or the NPU runs the
    whole kernel): the GPU queue has drained by then and the next GPU kernel is submitted to
    an empty queue (§3.1, §4.2 — fast synchronisation in the GPU-dominant decode).
    Results are cached per (scope, Matmul shape, static-graph strategy); the caches are per
    instance (no module state).
    """

    def __init__(self, soc: HeteroSoc, handover_s: float, npu_last_s: float = 0.0) -> None:
        for name, value in (("handover_s", handover_s), ("npu_last_s", npu_last_s)):
            if not (np.isfinite(value) and value >= 0):
                raise SpecError(name, "must be a finite, non-negative number of seconds")
        self.soc = soc
        self.handover_s = float(handover_s)
        self.npu_last_s = float(npu_last_s)
        self._cache: dict[tuple[object, ...], Partition] = {}
        self._npu: dict[tuple[int, int, int], tuple[float, float]] = {}

    # --- token plans -------------------------------------------------------------------------

    def prepared(self, tokens: int) -> bool:
        """Whether the NPU holds a graph for exactly ``tokens`` positions: a prepared static
        shape, or one position — the decode graph generated in advance (§4.1.2), which the
        prefill's LM head (last position only) reuses."""
        return tokens == DECODE_TOKENS or tokens in self.soc.npu.static_shapes

    def padding_plan(self, tokens: int) -> tuple[int, ...]:
        """Prepared graphs for ``tokens`` by padding (§4.1.1, §5.2.2 "Padding")."""
        return self.soc.npu.pad_plan(tokens)

    def pipe_plans(self, tokens: int) -> list[tuple[int, ...]]:
        """The graph sequences "Pipe" chooses among (§5.2.2: it "chooses different standard
        sizes dynamically"): the first ``j`` shapes of the largest-first cut, the rest of
        the prompt padded (``j`` = 0 is Padding itself, the last the full cut). Each extra
        graph streams the weights again, so a finer cut is not always cheaper (a 1000-token
        prompt: 512+256+128+64+32+32 streams the weights six times for the same 1024
        positions as one padded graph)."""
        shapes, _ = self.soc.npu.cut_plan(tokens)
        plans: list[tuple[int, ...]] = []
        for j in range(len(shapes) + 1):
            head = shapes[:j]
            rest = tokens - sum(head)
            plan = (*head, *self.padding_plan(rest)) if rest else head
            if plan not in plans:
                plans.append(plan)
        return plans

    def token_plans(self, tokens: int) -> list[tuple[int, ...]]:
        """Every NPU token plan of the prefill enumeration: for each multiple of 32 up to
        the prompt rounded up to 32, its exact cut into prepared shapes (when one exists),
        plus the padding plan. Sorted by covered tokens, then by number of graphs."""
        check_count("tokens", tokens, maximum=10**7)
        plans: set[tuple[int, ...]] = set()
        top = -(-tokens // SEQ_ALIGN) * SEQ_ALIGN
        for n in range(SEQ_ALIGN, top + 1, SEQ_ALIGN):
            shapes, margin = self.soc.npu.cut_plan(n)
            if not margin and shapes:
                plans.add(shapes)
        plans.update(self.pipe_plans(tokens))
        if self.prepared(tokens):
            plans.add((tokens,))
        return sorted(plans, key=lambda p: (sum(p), len(p), p))

    # --- timing helpers ----------------------------------------------------------------------

    def _npu_time(self, graph: int, k: int, rows: int) -> tuple[float, float]:
        key = (graph, k, rows)
        hit = self._npu.get(key)
        if hit is None:
            hit = self.soc.npu_gemm((graph,), k, rows)
            self._npu[key] = hit
        return hit

    def _gpu_all(self, g: Gemm) -> Partition:
        t, b = self.soc.gpu_gemm(g.tokens, g.k, g.n)
        t_s = float(t)
        return Partition(
            "gpu",
            0,
            (),
            g.tokens,
            0,
            t_s,
            0.0,
            t_s,
            t_s,
            t_s,
            0.0,
            float(b),
            0.0,
            self._gpu_compute_bound(g.tokens, g.k, g.n),
        )

    def _gpu_compute_bound(self, tokens: int, k: int, rows: int) -> bool:
        gpu = self.soc.gpu
        p = self.soc.precision
        flops = 2.0 * tokens * k * rows
        nbytes = k * rows * p.w + tokens * (k + rows) * p.a
        return bool(flops / gpu.ops_rate >= nbytes / gpu.bw)

    def _npu_all(self, g: Gemm, graphs: tuple[int, ...], strategy: str) -> Partition:
        t = b = 0.0
        for s in graphs:
            ti, bi = self._npu_time(s, g.k, g.n)
            t += ti
            b += bi
        return Partition(
            strategy,
            g.n,
            graphs,
            0,
            0,
            0.0,
            t,
            t,
            t + self.handover_s + self.npu_last_s,
            0.0,
            t,
            0.0,
            b,
            False,
        )

    def whole_npu(self, g: Gemm, static: StaticGraphs, *, decode: bool = False) -> Partition:
        """The kernel wholly on the NPU; a prompt length without a graph is handled by
        ``static`` (decode graphs are generated in advance for the batch, §4.1.2)."""
        if decode:
            return self._npu_all(g, (g.tokens,), "npu")
        if self.prepared(g.tokens):
            return self._npu_all(g, (g.tokens,), "npu")
        if static == "padding":
            return self._npu_all(g, self.padding_plan(g.tokens), "npu-padding")
        if static == "pipe":
            runs = [self._npu_all(g, p, "npu-pipe") for p in self.pipe_plans(g.tokens)]
            best = min(runs, key=lambda p: (p.t_npu_s, len(p.npu_graphs)))
            if len(best.npu_graphs) == 1:
                return replace(best, strategy="npu-padding")
            return best
        return self._npu_all(g, (g.tokens,), "online-prepare")

    # --- the solver --------------------------------------------------------------------------

    def solve(
        self,
        g: Gemm,
        scope: Scope = "tensor",
        static: StaticGraphs = "padding",
        *,
        decode: bool = False,
    ) -> Partition:
        """The best partition of ``g`` within ``scope`` by the §4.3 objective.

        ``tensor``: every partition (prefill); ``rows``: row-cutting of the fixed decode
        graph; ``layer``: GPU-all or NPU-all (NPU-all handled by ``static``); ``gpu`` /
        ``npu``: forced. Ties go to the GPU, then to the NPU-all plan, then to the fewer
        NPU tokens and rows (a deterministic order).
        """
        check_count("gemm.tokens", g.tokens, maximum=10**7)
        check_count("gemm.k", g.k, maximum=10**7)
        check_count("gemm.n", g.n, maximum=10**8)
        key = (scope, g.tokens, g.k, g.n, static, decode)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if scope == "gpu":
            best = self._gpu_all(g)
        elif scope == "npu":
            best = self.whole_npu(g, static, decode=decode)
        elif scope == "layer":
            best = min(
                (self._gpu_all(g), self.whole_npu(g, static, decode=decode)),
                key=lambda p: p.objective_s,
            )
        else:
            fixed = scope == "rows" or decode
            plans: list[tuple[int, ...]] = [(g.tokens,)] if fixed else self.token_plans(g.tokens)
            best = self._enumerate(g, plans, prepared=fixed)
        self._cache[key] = best
        return best

    def candidates(self, g: Gemm, plans: Sequence[tuple[int, ...]]) -> dict[str, np.ndarray]:
        """Every (token plan × NPU rows) partition of ``g`` as arrays of shape
        ``(len(plans), len(row_options(g.n)))``: ``t_gpu``, ``t_npu``, ``compute``,
        ``objective``, and the bookkeeping arrays ``tail`` and ``gpu_rows``."""
        rows = row_options(g.n)
        graphs = sorted({s for p in plans for s in p})
        gidx = {s: i for i, s in enumerate(graphs)}
        nt = np.empty((len(graphs), rows.size))
        nb = np.empty_like(nt)
        for i, s in enumerate(graphs):
            for j, r in enumerate(rows):
                nt[i, j], nb[i, j] = self._npu_time(s, g.k, int(r))
        counts = np.zeros((len(plans), len(graphs)))
        for pi, plan in enumerate(plans):
            for s in plan:
                counts[pi, gidx[s]] += 1
        t_npu = counts @ nt
        b_npu = counts @ nb
        covered = np.array([min(sum(p), g.tokens) for p in plans], dtype=np.int64)
        tail = g.tokens - covered
        t_tail, b_tail = self.soc.gpu_gemm(tail, g.k, g.n)
        side_rows = g.n - rows
        t_side, b_side = self.soc.gpu_gemm(covered[:, None], g.k, side_rows[None, :])
        t_gpu = t_tail[:, None] + t_side
        b_gpu = b_tail[:, None] + b_side
        compute = corun_s(t_gpu, b_gpu, t_npu, b_npu, self.soc.bus.peak_gbps)
        return {
            "t_gpu": t_gpu,
            "t_npu": t_npu,
            "b_gpu": b_gpu,
            "b_npu": b_npu,
            "compute": compute,
            "objective": compute + self.handover_s + self.npu_last_s * (t_npu > t_gpu),
            "tail": np.broadcast_to(tail[:, None], t_gpu.shape),
            "gpu_rows": np.broadcast_to(side_rows[None, :], t_gpu.shape),
            "rows": rows,
        }

    def _enumerate(self, g: Gemm, plans: list[tuple[int, ...]], *, prepared: bool) -> Partition:
        c = self.candidates(g, plans)
        gpu_all = self._gpu_all(g)
        obj = c["objective"]
        pi, ri = np.unravel_index(int(np.argmin(obj)), obj.shape)
        if gpu_all.objective_s <= float(obj[pi, ri]):
            return gpu_all
        plan = plans[pi]
        rows = int(c["rows"][ri])
        tail = int(c["tail"][pi, ri])
        gpu_rows = int(c["gpu_rows"][pi, ri])
        t_gpu = float(c["t_gpu"][pi, ri])
        t_npu = float(c["t_npu"][pi, ri])
        compute = float(c["compute"][pi, ri])
        shapes = (g.tokens,) if prepared or self.prepared(g.tokens) else ()
        strategy = _strategy(g, plan, rows, t_gpu > 0, shapes)
        busy_g, busy_n = _busy(t_gpu, t_npu, compute)
        tail_bound = self._gpu_compute_bound(tail, g.k, g.n) if tail else False
        side = min(sum(plan), g.tokens)
        side_bound = self._gpu_compute_bound(side, g.k, gpu_rows) if gpu_rows else False
        return Partition(
            strategy,
            rows,
            plan,
            tail,
            gpu_rows,
            t_gpu,
            t_npu,
            compute,
            float(obj[pi, ri]),
            busy_g,
            busy_n,
            float(c["b_gpu"][pi, ri]),
            float(c["b_npu"][pi, ri]),
            tail_bound or side_bound,
        )


def _busy(t_gpu: float, t_npu: float, makespan: float) -> tuple[float, float]:
    """How long each processor is occupied in a co-run of ``makespan``: the longer one the
    whole makespan, the shorter its alone time stretched by the same slow-down."""
    if t_gpu <= 0 or t_npu <= 0:
        return t_gpu, t_npu
    extra = makespan - max(t_gpu, t_npu)  # = short/f − short
    if t_gpu >= t_npu:
        return makespan, t_npu + extra
    return t_gpu + extra, makespan


def _strategy(
    g: Gemm, plan: tuple[int, ...], rows: int, gpu_used: bool, shapes: tuple[int, ...]
) -> str:
    covered = sum(plan)
    if not gpu_used:
        if plan == (g.tokens,):
            return "npu" if g.tokens in shapes else "online-prepare"
        return "npu-padding" if len(plan) == 1 else "npu-pipe"
    all_rows = rows == g.n
    if all_rows and covered < g.tokens:
        return "seq-cutting" if len(plan) == 1 else "multi-seq-cutting"
    if not all_rows and covered == g.tokens:
        return "row-cutting"
    return "hybrid-cutting"
