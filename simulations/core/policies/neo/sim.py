"""Neo's iteration-level engine: runqueues, the two KV caches, and asymmetric pipelining.

See :class:`NeoSim`. The scheduler (§3.2) lives in :mod:`.scheduler`, the stage times in
:mod:`.costs`.
"""

from __future__ import annotations

from collections import deque
from operator import sub
from typing import Any

from simulations.core.engine.core import DECODE, PREFILL, ProgressFn, SimOutput, Simulator, Unit
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError

from .costs import ProfileTable, StageCosts
from .scheduler import FASTDECODE, NeoScheduler, Schedule

WAITING = 0
ON_GPU = 1
ON_CPU = 2


class NeoSim(Simulator):
    """One Neo node: ``gpus`` (a tensor-parallel group running in lockstep) and the host CPU.

    *Queues* (§3, Fig. 2): a prefill waitqueue, a GPU decoding runqueue and a CPU decoding
    runqueue. A prefilled request's KV cache lives wholly in the GPU cache or wholly in the
    CPU cache (§3.1), both paged in blocks of ``block_size`` tokens: the GPU cache holds
    ``gpu_pool`` blocks (per GPU: its share of every token), the CPU cache ``cpu_pool``.

    *Iterations* run back to back while there is work. Each follows the scheduler's
    :class:`~.scheduler.Schedule` and lasts, from the exact stage costs,

    - two-batch (asymmetric pipelining, Fig. 5):
      ``L × (max{T_l0, T_ca1} + max{T_l1 + T_ga0, T_ca0})`` plus each sub-batch's pre- and
      post-layer (§3.2 keeps only the layer term as ``T``; the simulation charges both);
    - GPU-only: ``L × (T_l + T_ga)`` plus the pre/post-layer;

    and at least as long as its PCIe traffic in each direction: the layer-wise swap-out of
    newly prefilled KV that goes to the CPU cache, swaps of whole requests, and per layer the
    Q/K/V of every CPU-decoded token to the host and its attention output back. Transfers
    overlap compute layer by layer (§3.1), so only their total per direction can extend an
    iteration. Each prefill yields its request's first token, each decode one token, at the
    iteration's end.

    *Reports*: every GPU unit is busy for the whole iteration (energy: active power while
    the estimated GPU stages run, waiting power for the rest); the CPU unit is busy for the
    iteration's CPU attention, recorded as one interval at the iteration's start (the real
    CPU work interleaves with the GPU's layer by layer).
    """

    def __init__(
        self,
        requests: RequestSet,
        gpus: list[Unit],
        cpu: Unit | None,
        costs: StageCosts,
        table: ProfileTable,
        *,
        mode: str,
        block_size: int,
        max_batch: int,
        max_tokens: int,
        gpu_pool: int,
        cpu_pool: int,
        reference: bool = False,
        audit: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        units = list(gpus) + ([cpu] if cpu is not None else [])
        super().__init__(requests, units, reference=reference, progress=progress)
        self.gpus = gpus
        self.cpu = cpu
        self.costs = costs
        self.table = table
        self.mode = mode
        self.block_size = block_size
        self.max_batch = max_batch
        self.max_tokens = max_tokens
        self.gpu_pool = gpu_pool
        self.cpu_pool = cpu_pool
        self.n_layers = costs.n_layers
        self.audit = audit
        n = len(requests)
        self.ctx = [0] * n
        self.plen = list(self.prompt)
        self.waitq: deque[int] = deque()
        self.gpu_q: list[int] = []
        self.cpu_q: list[int] = []
        # Where each request's KV cache lives, and each cache's blocks after one more token
        # per request (Σ ceil((c + 1) / block_size)), kept up to date incrementally.
        self.where = [WAITING] * n
        self.gpu_blocks = 0
        self.cpu_blocks = 0
        # Σ ctx over the GPU-resident requests (the scheduler's GPU attention width), kept
        # up to date the same way so a plan need not sum the GPU runqueue.
        self.gpu_ctx = 0
        # A lower bound on the context of every CPU-resident request (contexts only grow
        # while resident): lowered when a request joins the CPU cache, set to the exact
        # minimum when requests finish. The scheduler's step 4 settles most of its
        # shortest-request checks with it instead of scanning the CPU runqueue.
        self.cpu_floor = 0
        self._run_state: _Run | None = None
        self._skip_checks = 0
        self._backoff = 0
        self.scheduler = NeoScheduler(self, mode)
        gm = gpus[0].dm
        self._p_active_prefill = float(getattr(gm, "p_compute", gpus[0].device.board_power_w))
        self._p_active_decode = float(getattr(gm, "p_memory", gpus[0].device.board_power_w))
        self._p_wait = float(gpus[0].idle_w)
        self._cpu_w = float(getattr(cpu.dm, "power_w", 0.0)) if cpu is not None else 0.0
        self.kv_gpu_unit = costs.kv_token_bytes / costs.tp
        self.stats: dict[str, Any] = {
            "iterations": 0,
            "runs": 0,
            "two_batch_iterations": 0,
            "forced_cpu_iterations": 0,
            "swap_ins": 0,
            "swap_outs": 0,
            "recomputes": 0,
            "prefills_to_cpu": 0,
            "gpu_decode_tokens": 0,
            "cpu_decode_tokens": 0,
            "estimate_violations": 0,
            "peak_gpu_blocks": 0,
            "peak_cpu_blocks": 0,
        }
        self.schedules: list[tuple[Any, ...]] = []
        self._check_capacity()

    # -- capacity ------------------------------------------------------------------------

    def _check_capacity(self) -> None:
        """Every request must fit alone in the cache it can live in, or it never finishes."""
        bs = self.block_size
        longest = max(p + o for p, o in zip(self.prompt, self.output, strict=True))
        need = -(-longest // bs)
        if self.mode == FASTDECODE:
            room, where = self.cpu_pool, "the CPU KV cache"
        else:
            room, where = self.gpu_pool - 1, "the GPU KV cache"
        if need > room:
            raise CapacityError(
                "workload",
                f"a request of {longest} tokens needs {need} KV blocks but {where} has room "
                f"for {max(room, 0)}",
            )

    def _blocks_of(self, queue: list[int]) -> int:
        bs = self.block_size
        ctx = self.ctx
        return sum((ctx[r] + bs) // bs for r in queue)

    def _advance(self, on_gpu: list[int], on_cpu: list[int], k: int) -> None:
        """Move the contexts of the GPU-resident ``on_gpu`` and the CPU-resident ``on_cpu``
        by ``k`` tokens, keeping the block counts. (A run's decodes are split by cache when
        it is built, so no request's residence is looked up here.)"""
        if self.audit:
            where = self.where
            assert all(where[r] == ON_GPU for r in on_gpu), "a GPU decode is not on the GPU"
            assert all(where[r] == ON_CPU for r in on_cpu), "a CPU decode is not on the CPU"
        bs = self.block_size
        kb = k + bs
        ctx = self.ctx
        dg = 0
        for r in on_gpu:
            c = ctx[r]
            ctx[r] = c + k
            dg += (c + kb) // bs - (c + bs) // bs
        dc = 0
        for r in on_cpu:
            c = ctx[r]
            ctx[r] = c + k
            dc += (c + kb) // bs - (c + bs) // bs
        self.gpu_blocks += dg
        self.cpu_blocks += dc
        self.gpu_ctx += len(on_gpu) * k

    def _growth(self, rs: list[int], k: int) -> int:
        """Blocks ``rs`` take in addition after ``k`` more tokens each."""
        bs = self.block_size
        kb = k + bs
        return sum([(c + kb) // bs - (c + bs) // bs for c in map(self.ctx.__getitem__, rs)])

    def _restore(self, rs: list[int], saved: list[int], blocks: tuple[int, int, int]) -> None:
        """Undo :meth:`_advance`: the contexts ``saved`` of ``rs`` and the block counts and
        GPU context sum ``blocks`` read before it."""
        ctx = self.ctx
        for r, c in zip(rs, saved, strict=True):
            ctx[r] = c
        self.gpu_blocks, self.cpu_blocks, self.gpu_ctx = blocks

    # -- events --------------------------------------------------------------------------

    def on_arrivals(self, ids: list[int]) -> None:
        """Queue the arrivals; an idle node starts an iteration. A fast-forwarded run whose
        plan admitted every waiting request stops at the iteration boundary after them
        (where the step-by-step scheduler first sees them); behind a request the plan
        could not admit, they change nothing until the run ends."""
        self.waitq.extend(ids)
        run = self._run_state
        if run is None:
            self._iterate()
        elif run.cuttable and run.n > 1:
            m = run.steps_until(self.now)
            if m < run.n:
                run.n = m
                run.version += 1
                self.at(run.t0 + run.total(m)[0], self._end, run, run.version)

    def _iterate(self) -> None:
        sch = self.scheduler.plan()
        self._apply_moves(sch)
        if sch.empty:
            self._run_state = None
            if self.waitq and not self.gpu_q and not self.cpu_q:
                raise AssertionError("requests wait but nothing can be scheduled")
            return
        run = _Run(self, sch)
        if not self.reference:
            run.n = self._run_length(sch)
        run.build_segments()
        self._run_state = run
        self.at(run.t0 + run.total(run.n)[0], self._end, run, run.version)

    def _run_length(self, sch: Schedule) -> int:
        """Iterations the schedule repeats unchanged (a fast-forwarded run).

        Only decode-only iterations without swaps repeat. A run ends at the first
        completion; before that, the scheduler's decision at step ``k`` depends on ``k``
        through affine functions of the growing contexts (estimates, block counts), so if
        it makes the same decision at the run's last step it makes it at every step in
        between — checked by re-planning there (and bisecting when it differs).
        """
        if sch.prefill_gpu or sch.prefill_cpu or sch.swap_in or sch.swap_out or sch.recompute:
            return 1
        gen = self.generated
        out = self.output
        on_cpu = sch.cpu0 + sch.cpu1 if sch.two_batch else []
        decodes = sch.gpu_dec + on_cpu
        n = min(map(sub, map(out.__getitem__, decodes), map(gen.__getitem__, decodes)))
        if n < 3:
            return 1
        if self._skip_checks:
            # Recent runs were short: checking would cost more plans than it saves.
            self._skip_checks -= 1
            return 1
        if self._same_after(sch, on_cpu, n - 1):
            self._backoff = 0
            return n
        lo, hi = 1, n - 1  # the decision holds at step lo - 1, not at step hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._same_after(sch, on_cpu, mid):
                lo = mid + 1
            else:
                hi = mid
        if lo < 4:
            self._backoff = min(max(1, 2 * self._backoff), 16)
            self._skip_checks = self._backoff
        else:
            self._backoff = 0
        return lo

    def _same_after(self, sch: Schedule, on_cpu: list[int], k: int) -> bool:
        """Whether the scheduler makes the same decision ``k`` iterations later (``on_cpu``:
        the schedule's CPU decodes, none unless it runs two batches)."""
        gpu_dec = sch.gpu_dec
        ctx = self.ctx
        saved_g = list(map(ctx.__getitem__, gpu_dec))
        saved_c = list(map(ctx.__getitem__, on_cpu))
        blocks = (self.gpu_blocks, self.cpu_blocks, self.gpu_ctx)
        self._advance(gpu_dec, on_cpu, k)
        try:
            other = self.scheduler.plan()
        finally:
            self._restore(gpu_dec, saved_g, blocks)
            self._restore(on_cpu, saved_c, blocks)
        return (
            other.trace == sch.trace
            and other.two_batch == sch.two_batch
            and other.forced == sch.forced
            and not (other.prefill_gpu or other.prefill_cpu)
            and not (other.swap_in or other.swap_out or other.recompute)
            and other.gpu_dec == sch.gpu_dec
            and other.cpu0 == sch.cpu0
            and other.cpu1 == sch.cpu1
        )

    def _apply_moves(self, sch: Schedule) -> None:
        """Queue changes that take effect when the iteration starts."""
        st = self.stats
        where = self.where
        if sch.recompute:
            gone = set(sch.recompute)
            self.gpu_q = [r for r in self.gpu_q if r not in gone]
            self.cpu_q = [r for r in self.cpu_q if r not in gone]
            for r in reversed(sch.recompute):
                self.plen[r] = self.prompt[r] + self.generated[r]
                self.ctx[r] = 0
                self.preemptions[r] += 1
                where[r] = WAITING
                self.waitq.appendleft(r)
            self.gpu_blocks = self._blocks_of(self.gpu_q)
            self.cpu_blocks = self._blocks_of(self.cpu_q)
            self.gpu_ctx = sum(self.ctx[r] for r in self.gpu_q)
            st["recomputes"] += len(sch.recompute)
        if sch.swap_out:
            n_out = len(sch.swap_out)
            del self.gpu_q[len(self.gpu_q) - n_out :]
            self.cpu_q[0:0] = list(reversed(sch.swap_out))
            b = self._blocks_of(sch.swap_out)
            self.gpu_blocks -= b
            self.cpu_blocks += b
            self.gpu_ctx -= sum(self.ctx[r] for r in sch.swap_out)
            for r in sch.swap_out:
                where[r] = ON_CPU
            self.cpu_floor = min(self.cpu_floor, min(map(self.ctx.__getitem__, sch.swap_out)))
            st["swap_outs"] += n_out
        if sch.swap_in:
            n_in = len(sch.swap_in)
            del self.cpu_q[:n_in]
            self.gpu_q.extend(sch.swap_in)
            b = self._blocks_of(sch.swap_in)
            self.gpu_blocks += b
            self.cpu_blocks -= b
            self.gpu_ctx += sum(self.ctx[r] for r in sch.swap_in)
            for r in sch.swap_in:
                where[r] = ON_GPU
            st["swap_ins"] += n_in
        pref = sch.prefill_gpu + sch.prefill_cpu
        if pref:
            chosen = set(pref)
            q = self.waitq
            kept: list[int] = []
            while chosen:
                r = q.popleft()
                if r in chosen:
                    chosen.discard(r)
                else:
                    kept.append(r)
            q.extendleft(reversed(kept))

    def _book(self, run: _Run) -> None:
        """Record the run's ``n`` iterations on the units and in the counters."""
        sch = run.sch
        n = run.n
        dur, gpu_busy, cpu_busy, t_out, t_in = run.total(n)
        now = run.t0
        end = now + dur
        kind = PREFILL if run.lens else DECODE
        p_act = self._p_active_prefill if run.lens else self._p_active_decode
        busy = min(gpu_busy, dur)
        joules = busy * p_act + (dur - busy) * self._p_wait
        x_g, x_c = run.x_g, run.x0 + run.x1
        nb = len(run.lens) + x_g + x_c
        for u in self.gpus:
            u.occupy(now, end, joules, kind, -1, nb)
            if t_out:
                u.link_out.book(now, now + t_out, -1)
            if t_in:
                u.link_in.book(now, now + t_in, -1)
        g0 = self.gpus[0]
        g0.prefill_tokens += sum(run.lens)
        g0.prefill_outputs += len(run.lens)
        g0.decode_tokens += n * x_g
        if self.cpu is not None and cpu_busy > 0:
            self.cpu.occupy(now, now + cpu_busy, cpu_busy * self._cpu_w, DECODE, -1, x_c)
            self.cpu.decode_tokens += n * x_c
        st = self.stats
        st["iterations"] += n
        st["runs"] += 1
        st["gpu_decode_tokens"] += n * x_g
        st["cpu_decode_tokens"] += n * x_c
        st["prefills_to_cpu"] += len(sch.prefill_cpu)
        if sch.two_batch:
            st["two_batch_iterations"] += n
            if not sch.forced and not sch.inequalities_hold():
                st["estimate_violations"] += n
        if sch.forced:
            st["forced_cpu_iterations"] += n
        self._note_memory(sch, run, n - 1)
        if self.audit:
            self.schedules.append(
                (
                    sch.two_batch,
                    sch.forced,
                    sch.inequalities_hold(),
                    (sch.t_l0, sch.t_l1, sch.t_ga0, sch.t_ca0, sch.t_ca1),
                    run.exact_stages(),
                    len(run.lens),
                    x_g,
                    run.x0,
                    run.x1,
                    dur,
                    n,
                )
            )

    def _note_memory(self, sch: Schedule, run: _Run, k: int) -> None:
        """Blocks in use during the run's last iteration (``k`` steps in); exceeding a cache
        is a scheduler bug."""
        bs = self.block_size
        plen = self.plen
        if self.audit or not k:
            if k:
                ctx = self.ctx
                saved_g = list(map(ctx.__getitem__, run.on_gpu))
                saved_c = list(map(ctx.__getitem__, run.on_cpu))
                blocks = (self.gpu_blocks, self.cpu_blocks, self.gpu_ctx)
                self._advance(run.on_gpu, run.on_cpu, k)
            g = self.gpu_blocks
            cpu = self.cpu_blocks
            if self.audit:
                assert g == self._blocks_of(self.gpu_q), "GPU block count drifted"
                assert cpu == self._blocks_of(self.cpu_q), "CPU block count drifted"
                assert self.gpu_ctx == sum(self.ctx[r] for r in self.gpu_q), "GPU context drifted"
                assert all(self.ctx[r] >= self.cpu_floor for r in self.cpu_q), "CPU floor too high"
            if k:
                self._restore(run.on_gpu, saved_g, blocks)
                self._restore(run.on_cpu, saved_c, blocks)
        else:
            # The counts k steps in, without moving the contexts there and back.
            g = self.gpu_blocks + self._growth(run.on_gpu, k)
            cpu = self.cpu_blocks + self._growth(run.on_cpu, k)
        g += sum(-(-plen[r] // bs) for r in sch.prefill_gpu)
        cpu += sum(-(-plen[r] // bs) for r in sch.prefill_cpu)
        if g > self.gpu_pool:
            raise AssertionError(f"GPU KV cache overflows: {g} of {self.gpu_pool} blocks")
        if cpu > self.cpu_pool:
            raise AssertionError(f"CPU KV cache overflows: {cpu} of {self.cpu_pool} blocks")
        st = self.stats
        if g > st["peak_gpu_blocks"]:
            st["peak_gpu_blocks"] = g
            kv = g * bs * self.kv_gpu_unit
            for u in self.gpus:
                u.mem_peak = max(u.mem_peak, u.weights + kv)
        if cpu > st["peak_cpu_blocks"]:
            st["peak_cpu_blocks"] = cpu
            if self.cpu is not None:
                self.cpu.mem_peak = max(self.cpu.mem_peak, cpu * bs * self.costs.kv_token_bytes)

    def _end(self, run: _Run, version: int) -> None:
        if version != run.version:
            return
        self._book(run)
        sch = run.sch
        n = run.n
        now = self.now
        ctx = self.ctx
        gen = self.generated
        out = self.output
        done = False
        unit = self.gpus[0].index
        bs = self.block_size
        where = self.where
        self._advance(run.on_gpu, run.on_cpu, n)
        for r in run.decodes:
            g = gen[r] + n
            gen[r] = g
            if g == out[r]:
                self.complete(r, now, unit)
                b = (ctx[r] + bs) // bs
                if where[r] == ON_GPU:
                    self.gpu_blocks -= b
                    self.gpu_ctx -= ctx[r]
                else:
                    self.cpu_blocks -= b
                where[r] = WAITING
                done = True
        self.gpu_blocks += self._start_decoding(sch.prefill_gpu, self.gpu_q, ON_GPU, unit)
        self.cpu_blocks += self._start_decoding(sch.prefill_cpu, self.cpu_q, ON_CPU, unit)
        if done:
            # Finished requests are no longer resident (their residence is WAITING = 0).
            self.gpu_q = list(filter(where.__getitem__, self.gpu_q))
            self.cpu_q = list(filter(where.__getitem__, self.cpu_q))
            self.cpu_floor = min(map(ctx.__getitem__, self.cpu_q), default=0)
        self._iterate()

    def _start_decoding(self, prefilled: list[int], queue: list[int], place: int, unit: int) -> int:
        """Requests ``prefilled`` this iteration get their first token; those with more to
        generate join ``queue`` with their KV cache at ``place``. Returns the blocks they
        take there (after one more token each)."""
        now = self.now
        ctx = self.ctx
        gen = self.generated
        out = self.output
        plen = self.plen
        where = self.where
        bs = self.block_size
        blocks = 0
        for r in prefilled:
            ctx[r] = plen[r]
            gen[r] += 1
            self.first_token(r, now)
            if gen[r] == out[r]:
                self.complete(r, now, unit)
            else:
                queue.append(r)
                where[r] = place
                blocks += (ctx[r] + bs) // bs
                if place == ON_GPU:
                    self.gpu_ctx += ctx[r]
                elif ctx[r] < self.cpu_floor:
                    self.cpu_floor = ctx[r]
        return blocks

    def run(self) -> SimOutput:
        """Run, then report the caches and the scheduler's counters with the outcome."""
        out = super().run()
        out.extra.update(self.stats)
        out.extra["mode"] = self.mode
        out.extra["kv_pool_blocks_gpu"] = self.gpu_pool
        out.extra["kv_pool_blocks_cpu"] = self.cpu_pool
        it = max(1, self.stats["iterations"])
        out.extra["two_batch_fraction"] = self.stats["two_batch_iterations"] / it
        return out


#: Relative tolerance within which an iteration-time component must match the affine
#: interpolation of its segment (the exact costs are piecewise affine in the step).
_AFFINE_RTOL = 1e-10

_Vec = tuple[float, float, float, float, float]


class _Run:
    """``n`` identical iterations of one schedule starting at ``t0`` (``n`` = 1 unless the
    run is fast-forwarded). Iteration ``k`` sees every scheduled decode ``k`` tokens longer;
    its (duration, GPU busy, CPU busy, PCIe out, PCIe in) seconds are piecewise affine in
    ``k`` and summed per affine segment, verified like the engine's decode curves."""

    def __init__(self, sim: NeoSim, sch: Schedule) -> None:
        self.sim = sim
        self.sch = sch
        self.t0 = sim.now
        self.n = 1
        self.version = 0
        # Arrivals can change the next plans only if step 3 admitted every waiting request.
        self.cuttable = not sch.admission_blocked
        c = sim.costs
        ctx = sim.ctx
        plen = sim.plen
        self.lens = list(map(plen.__getitem__, sch.prefill_gpu)) + list(
            map(plen.__getitem__, sch.prefill_cpu)
        )
        self.on_gpu = sch.gpu_dec
        self.on_cpu = sch.cpu0 + sch.cpu1 if sch.two_batch else []
        self.decodes = self.on_gpu + self.on_cpu
        self.x_g = len(sch.gpu_dec)
        self.x0 = len(sch.cpu0) if sch.two_batch else 0
        self.x1 = len(sch.cpu1) if sch.two_batch else 0
        get = ctx.__getitem__
        self.cg = sum(map(get, sch.gpu_dec))
        self.c0 = sum(map(get, sch.cpu0)) if self.x0 else 0
        self.c1 = sum(map(get, sch.cpu1)) if self.x1 else 0
        pref_tokens = sum(self.lens)
        s0 = pref_tokens + self.x_g + self.x0
        self.t_l0 = c.linear_layer_s(s0)
        self.t_l1 = c.linear_layer_s(self.x1) if sch.two_batch else 0.0
        self.t_pref = c.prefill_attn_layer_s(self.lens)
        seqs0 = len(self.lens) + self.x_g + self.x0
        self.prepost = c.pre_post_s(s0, seqs0)
        if sch.two_batch:
            self.prepost += c.pre_post_s(self.x1, self.x1, step=False)
        kv = c.kv_token_bytes
        x_c = self.x0 + self.x1
        out_b = kv * (sum(map(plen.__getitem__, sch.prefill_cpu)) + sum(map(get, sch.swap_out)))
        in_b = kv * sum(map(get, sch.swap_in))
        if x_c:
            out_b += c.n_layers * x_c * c.qkv_bytes
            in_b += c.n_layers * x_c * c.o_bytes
        self.t_out = c.link_s(out_b) if out_b else 0.0
        self.t_in = c.link_s(in_b) if in_b else 0.0
        self.segs: list[tuple[int, int, _Vec, _Vec]] = []
        # The last total asked for (segments do not change once built).
        self._total_m = -1
        self._total: _Vec = (0.0, 0.0, 0.0, 0.0, 0.0)

    def stages(self, k: int) -> tuple[float, float, float, float, float]:
        """Exact per-layer (T_l0, T_l1, T_ga0, T_ca0, T_ca1) of iteration ``k``."""
        c = self.sim.costs
        t_ga0 = self.t_pref + c.gpu_decode_attn_layer_s(self.x_g, self.cg + k * self.x_g)
        t_ca0 = c.cpu_attn_layer_s(self.x0, self.c0 + k * self.x0) if self.x0 else 0.0
        t_ca1 = c.cpu_attn_layer_s(self.x1, self.c1 + k * self.x1) if self.x1 else 0.0
        return self.t_l0, self.t_l1, t_ga0, t_ca0, t_ca1

    def exact_stages(self) -> tuple[float, float, float, float, float]:
        """The stages of the run's first iteration."""
        return self.stages(0)

    def step(self, k: int) -> _Vec:
        """(duration, GPU busy, CPU busy, PCIe out, PCIe in) of iteration ``k``."""
        t_l0, t_l1, t_ga0, t_ca0, t_ca1 = self.stages(k)
        n_layers = self.sim.n_layers
        if self.sch.two_batch:
            compute = n_layers * (max(t_l0, t_ca1) + max(t_l1 + t_ga0, t_ca0)) + self.prepost
            gpu = n_layers * (t_l0 + t_l1 + t_ga0) + self.prepost
            cpu = n_layers * (t_ca0 + t_ca1)
        else:
            compute = gpu = n_layers * (t_l0 + t_ga0) + self.prepost
            cpu = 0.0
        dur = max(compute, self.t_out, self.t_in)
        return dur, gpu, cpu, self.t_out, self.t_in

    def build_segments(self) -> None:
        """Cover steps ``0 … n-1`` with verified affine segments."""
        n = self.n
        self._total_m = -1
        v0 = self.step(0)
        if n == 1:
            self.segs = [(0, 0, v0, v0)]
            return
        self.segs = self._cover(0, n - 1, v0, self.step(n - 1))

    def _cover(self, lo: int, hi: int, vlo: _Vec, vhi: _Vec) -> list[tuple[int, int, _Vec, _Vec]]:
        if hi - lo <= 1:
            return [(lo, lo, vlo, vlo)] + ([(hi, hi, vhi, vhi)] if hi > lo else [])
        span = hi - lo
        mid = lo + span // 2
        vm = self.step(mid)
        q = lo + span // 4
        vq = self.step(q) if q not in (lo, mid) else vm
        ok = True
        for k, v in ((mid, vm), (q, vq)):
            w = (k - lo) / span
            for a, b, x in zip(vlo, vhi, v, strict=True):
                if abs(a + (b - a) * w - x) > _AFFINE_RTOL * max(abs(x), 1e-12):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return [(lo, hi, vlo, vhi)]
        return self._cover(lo, mid, vlo, vm) + self._cover(mid + 1, hi, self.step(mid + 1), vhi)

    def total(self, m: int) -> _Vec:
        """Sums of the components over iterations ``0 … m-1``."""
        if m == self._total_m:
            # Asked again for the run's length (when it is scheduled, then booked).
            return self._total
        out = self._sum(m)
        self._total_m, self._total = m, out
        return out

    def _sum(self, m: int) -> _Vec:
        acc = [0.0, 0.0, 0.0, 0.0, 0.0]
        for lo, hi, vlo, vhi in self.segs:
            if lo >= m:
                break
            top = min(hi, m - 1)
            cnt = top - lo + 1
            span = hi - lo
            for i in range(5):
                a = vlo[i]
                slope = (vhi[i] - a) / span if span else 0.0
                acc[i] += cnt * a + slope * cnt * (cnt - 1) / 2
        return acc[0], acc[1], acc[2], acc[3], acc[4]

    def steps_until(self, t: float) -> int:
        """The first iteration boundary strictly after time ``t`` (as a step count >= 1)."""
        lo, hi = 1, self.n
        t0 = self.t0
        if t0 + self.total(1)[0] > t:
            return 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if t0 + self.total(mid)[0] > t:
                hi = mid
            else:
                lo = mid
        return hi
