"""Iteration-level (continuous) batching with a paged KV cache, vLLM-like, on every device;
``max_batch = 1`` is plain batch-1 first-come-first-served serving.

Queues. With ``max_batch = 1`` all devices (*units*) pull from one shared FCFS queue:
whichever unit frees up first takes the oldest waiting request (idle units in index
order). With ``max_batch > 1`` the units are data-parallel replicas behind a router: each
request is sent on arrival to the unit with the fewest outstanding requests (running plus
queued there; ties to the lowest index) and waits in that unit's own FCFS queue, as with a
least-loaded load balancer in front of independent vLLM instances.

Semantics, per unit, at every iteration boundary — exactly what the step-by-step reference
mode does, and what the fast path reproduces by only stopping at the boundaries where a
decision can change:

1. If requests wait and the unit can admit the head of the queue (fewer than ``max_batch``
   running, and free KV blocks minus the head's prompt blocks at least the watermark), it
   runs a *prefill iteration* of as many queued requests as fit (FCFS, at most
   ``max_batched_tokens`` prompt tokens unless a single prompt is longer). Decodes pause
   meanwhile, as in vLLM without chunked prefill. The prefill produces each request's
   first token.
2. Otherwise, if sequences are running, it runs one *decode iteration* of all of them. If
   the KV blocks they need for this step exceed the pool, the most recently admitted
   sequence is preempted by *recompute*: its blocks are freed and it goes back to the front
   of the queue; re-admitted later, it re-prefills its prompt plus the tokens generated so
   far, which yields its next token.
3. Otherwise it idles.

The KV pool of a unit is
``floor((capacity · memory_utilization − weights) / (block_size · KV bytes per token))``
blocks (vLLM's ``gpu_memory_utilization``; activation memory is assumed to fit in the
remaining headroom). A sequence with ``c`` cached tokens holds ``ceil(c / block_size)``
blocks; the step that writes its next token needs ``ceil((c + 1) / block_size)``.

Fast path: a decode run is planned up to the first completion or KV shortage; a request
routed to a decoding unit that can admit it interrupts that unit's run at its next
iteration boundary (a *check* event there), which is where the reference admits it.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable

import numpy as np

from simulations.core.errors import CapacityError

from .core import DECODE, IDLE, PREFILL, ProgressFn, SimOutput, Simulator, Unit
from .requests import RequestSet


def book_decode_run(
    unit: Unit, plan: tuple[float, int, int, int, float, float], k: int, running: Iterable[int]
) -> None:
    """Book ``k`` steps of a planned decode run ``plan`` = (start, batch, first step, planned
    steps, seconds, joules) on ``unit``: its busy interval and energy (re-costed when the run
    stops early at a boundary), generated tokens and collective seconds; a lone sequence
    labels the interval with its id (``running``: the unit's running sequences). The unit's
    version moves on, so events planned on the old run are stale. Shared by every scheduler
    that fast-forwards decode runs on a decode curve."""
    t0, b, k0, n, dur, joules = plan
    if k != n:
        dur, joules = unit.curve.run_cost(b, k0, k)
    label = next(iter(running)) if b == 1 else -1
    unit.occupy(t0, t0 + dur, joules, DECODE, label, b)
    unit.decode_tokens += b * k
    if unit.group_size > 1:
        comm = unit.decode_comm_s.get(b)
        if comm is None:
            comm = unit.decode_comm_s[b] = unit.dm.collective_decode_s(unit.model, b)
        unit.comm_s += k * comm
    unit.version += 1


class BatchingSim(Simulator):
    """Continuous batching (or batch-1 FCFS) of whole requests on every unit."""

    def __init__(
        self,
        requests: RequestSet,
        units: list[Unit],
        *,
        max_batch: int = 1,
        block_size: int = 16,
        memory_utilization: float = 0.9,
        max_batched_tokens: int = 4096,
        watermark: float = 0.01,
        reference: bool = False,
        audit: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        super().__init__(requests, units, reference=reference, progress=progress)
        if not units:
            raise CapacityError("devices", "the system has no devices")
        self.max_batch = max_batch
        self.bs = block_size
        self.max_batched_tokens = max_batched_tokens
        self.audit = audit
        nu = len(units)
        self.pool = [0] * nu
        self.wm = [0] * nu
        for u in units:
            kv_block = block_size * u.kv_per_token
            pool = math.floor((u.capacity * memory_utilization - u.weights) / kv_block)
            if pool < 1:
                raise CapacityError(
                    f"devices[{u.placement}]",
                    f"{u.slug} has no room for a KV cache after the weights "
                    f"({u.weights / 1e9:.1f} GB of {u.capacity / 1e9:.1f} GB at "
                    f"memory_utilization {memory_utilization:g})",
                )
            self.pool[u.index] = pool
            self.wm[u.index] = int(watermark * pool)
            # A convex decode curve learns each batch size up to the whole pool at once.
            u.curve.kv_limit = max(u.curve.kv_limit, pool * block_size)
        self._check_capacity()
        self.mode = [IDLE] * nu
        self.S = [0] * nu
        self.running: list[dict[int, int]] = [{} for _ in units]
        self.sum_off = [0] * nu
        self.fin: list[list[tuple[int, int]]] = [[] for _ in units]
        self.run_plan: list[tuple[float, int, int, int, float, float] | None] = [None] * nu
        self.check_at: list[float | None] = [None] * nu
        self.peak_blocks = [0] * nu
        self.routed = max_batch > 1
        shared: deque[int] = deque()
        self.queues: list[deque[int]] = [deque() for _ in units] if self.routed else [shared] * nu
        self.plen = list(self.prompt)
        self.on_unit = [-1] * len(self.prompt)
        self.fin_step = [0] * len(self.prompt)
        self.total_preemptions = 0

    # -- capacity ------------------------------------------------------------------------

    def _check_capacity(self) -> None:
        """Every request must fit alone on every unit, or it could never finish."""
        longest = int(np.max(self.requests.input_tokens + self.requests.output_tokens - 1))
        need = -(-longest // self.bs)
        for u in self.units:
            if need + self.wm[u.index] > self.pool[u.index]:
                raise CapacityError(
                    "workload",
                    f"a request of {longest + 1} tokens needs {need} KV blocks but "
                    f"{u.slug} has room for {self.pool[u.index] - self.wm[u.index]}",
                )

    def _held(self, u: int, k: int) -> int:
        """KV blocks the running sequences of ``u`` hold after ``k`` more decode steps."""
        run = self.running[u]
        if not run:
            return 0
        base = self.S[u] + k + self.bs - 1
        bs = self.bs
        if len(run) <= 32:
            return sum((off + base) // bs for off in run.values())
        offs = np.fromiter(run.values(), dtype=np.int64, count=len(run))
        return int(((offs + base) // bs).sum())

    def _held_bound(self, u: int, k: int) -> int:
        """An upper bound of :meth:`_held` in O(1) (sum of ceilings ≤ ceiling bound)."""
        b = len(self.running[u])
        return (self.sum_off[u] + b * (self.S[u] + k + self.bs - 1)) // self.bs

    def _fits_after(self, u: int, k: int) -> bool:
        """Whether the blocks held after ``k`` steps fit the pool."""
        pool = self.pool[u]
        return self._held_bound(u, k) <= pool or self._held(u, k) <= pool

    def _can_admit(self, u: int, rid: int, k: int) -> bool:
        """Whether ``u`` could admit ``rid`` at the boundary ``k`` steps into its run."""
        if len(self.running[u]) >= self.max_batch:
            return False
        need = -(-self.plen[rid] // self.bs)
        room = self.pool[u] - self.wm[u] - need
        return self._held_bound(u, k) <= room or self._held(u, k) <= room

    # -- arrivals and queues ------------------------------------------------------------

    def on_arrivals(self, ids: list[int]) -> None:
        """Queue the arrivals (routed to a unit each, or on the shared queue) and offer them."""
        if not self.routed:
            self.queues[0].extend(ids)
            self._offer(0)
            return
        touched: list[int] = []
        for rid in ids:
            u = min(
                range(len(self.units)),
                key=lambda i: (len(self.running[i]) + len(self.queues[i]), i),
            )
            self.queues[u].append(rid)
            if u not in touched:
                touched.append(u)
        for u in touched:
            self._offer(u)

    def _offer(self, u: int) -> None:
        """Make sure waiting requests are taken where the reference would take them: by idle
        units (shared queue), or by ``u`` at its next iteration boundary (routed)."""
        if not self.routed:
            q = self.queues[0]
            for unit in self.units:
                if not q:
                    return
                if self.mode[unit.index] == IDLE and self._can_admit(unit.index, q[0], 0):
                    self._start_prefill(unit.index)
            return
        q = self.queues[u]
        if not q:
            return
        mode = self.mode[u]
        if mode == IDLE:
            self._decide(u)
            return
        if mode != DECODE or self.reference or self.check_at[u] is not None:
            return  # a prefill's end, or the reference's next step, decides
        head = q[0]
        if not self._can_admit(u, head, 0):
            return  # blocks only grow during a run: no boundary of it can admit
        plan = self.run_plan[u]
        assert plan is not None
        t0, b, k0, n, _, _ = plan
        now = self.now
        unit = self.units[u]
        # The first boundary strictly after now (a boundary at now was decided already).
        k, tk = unit.curve.next_boundary(b, k0, n, now - t0)
        while k < n and t0 + tk <= now:
            k += 1
            tk = unit.curve.run_cost(b, k0, k)[0]
        if k >= n or not self._can_admit(u, head, k):
            return  # the run's end is its own decision point
        self.check_at[u] = t0 + tk
        self.at(t0 + tk, self._check, u, unit.version, k)

    def _check(self, u: int, version: int, k: int) -> None:
        """An iteration boundary of ``u``'s run at which it may admit its queue's head."""
        unit = self.units[u]
        if version != unit.version:
            return
        self.check_at[u] = None
        q = self.queues[u]
        if q and self._can_admit(u, q[0], k):
            self._advance(u, k)
            self._start_prefill(u)
        self._offer(u)

    # -- prefill -------------------------------------------------------------------------

    def _start_prefill(self, u: int) -> None:
        unit = self.units[u]
        q = self.queues[u]
        run = self.running[u]
        free = self.pool[u] - self.wm[u] - self._held(u, 0)
        batch: list[int] = []
        tokens = 0
        blocks = 0
        while q and len(run) + len(batch) < self.max_batch:
            rid = q[0]
            length = self.plen[rid]
            nb = -(-length // self.bs)
            if batch and tokens + length > self.max_batched_tokens:
                break
            if blocks + nb > free:
                break
            q.popleft()
            batch.append(rid)
            tokens += length
            blocks += nb
        if not batch:
            raise AssertionError("prefill started with nothing admissible")
        now = self.now
        s = self.S[u]
        for rid in batch:
            off = self.plen[rid] - s
            run[rid] = off
            self.sum_off[u] += off
            fin = s + self.output[rid] - self.generated[rid] - 1
            self.fin_step[rid] = fin
            heapq.heappush(self.fin[u], (fin, rid))
            self.on_unit[rid] = u
        lens = [self.plen[r] for r in batch]
        cost = unit.prefill_cost(lens)
        end = now + cost.seconds
        unit.occupy(now, end, cost.joules, PREFILL, batch[0] if len(batch) == 1 else -1, len(batch))
        unit.prefill_tokens += tokens
        unit.prefill_outputs += len(batch)
        if unit.group_size > 1:
            unit.comm_s += unit.dm.collective_prefill_s(unit.model, lens)
        self._note_peak(u, 0)
        self.mode[u] = PREFILL
        self.run_plan[u] = None
        self.check_at[u] = None
        unit.version += 1
        self.at(end, self._prefill_end, u, unit.version, batch)

    def _prefill_end(self, u: int, version: int, batch: list[int]) -> None:
        now = self.now
        for rid in batch:
            self.generated[rid] += 1
            self.first_token(rid, now)
        self._complete_due(u)
        self._decide(u)
        self._offer(u)

    # -- decode --------------------------------------------------------------------------

    def _next_fin(self, u: int) -> int:
        fin = self.fin[u]
        while fin:
            s_fin, rid = fin[0]
            if self.on_unit[rid] == u and self.fin_step[rid] == s_fin:
                return s_fin
            heapq.heappop(fin)
        raise AssertionError("running sequences without a completion step")

    def _complete_due(self, u: int) -> None:
        fin = self.fin[u]
        s = self.S[u]
        run = self.running[u]
        while fin and fin[0][0] <= s:
            s_fin, rid = heapq.heappop(fin)
            if self.on_unit[rid] != u or self.fin_step[rid] != s_fin:
                continue
            self.sum_off[u] -= run.pop(rid)
            self.on_unit[rid] = -1
            self.generated[rid] = self.output[rid]
            self.complete(rid, self.now, u)

    def _preempt_for_next_step(self, u: int) -> None:
        run = self.running[u]
        while run and not self._fits_after(u, 1):
            victim = next(reversed(run))
            self.sum_off[u] -= run.pop(victim)
            g = self.output[victim] - (self.fin_step[victim] - self.S[u])
            self.generated[victim] = g
            self.plen[victim] = self.prompt[victim] + g
            self.on_unit[victim] = -1
            self.preemptions[victim] += 1
            self.total_preemptions += 1
            self.queues[u].appendleft(victim)

    def _decide(self, u: int) -> None:
        """What ``u`` does at an iteration boundary (see the module notes)."""
        q = self.queues[u]
        if q and self._can_admit(u, q[0], 0):
            self._start_prefill(u)
            return
        if self.running[u]:
            self._preempt_for_next_step(u)
        if not self.running[u]:
            self.mode[u] = IDLE
            self.run_plan[u] = None
            self.check_at[u] = None
            return
        self._plan_run(u)

    def _plan_run(self, u: int) -> None:
        unit = self.units[u]
        b = len(self.running[u])
        s = self.S[u]
        n = self._next_fin(u) - s
        if n > 1 and not self._fits_after(u, n):
            # First k in [2, n] whose blocks overflow: run k-1 steps, then preempt.
            lo, hi = 1, n
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._fits_after(u, mid):
                    lo = mid
                else:
                    hi = mid
            n = lo
        if self.reference:
            n = 1
        k0 = self.sum_off[u] + b * s
        dur, joules = unit.curve.run_cost(b, k0, n)
        now = self.now
        self.run_plan[u] = (now, b, k0, n, dur, joules)
        self.mode[u] = DECODE
        self.check_at[u] = None
        self._note_peak(u, n)
        unit.version += 1
        self.at(now + dur, self._run_end, u, unit.version)

    def _advance(self, u: int, k: int) -> None:
        """Account ``k`` steps of ``u``'s planned run (all of it or up to a boundary)."""
        plan = self.run_plan[u]
        assert plan is not None
        book_decode_run(self.units[u], plan, k, self.running[u])
        self.S[u] += k
        self.run_plan[u] = None

    def _run_end(self, u: int, version: int) -> None:
        unit = self.units[u]
        if version != unit.version:
            return
        plan = self.run_plan[u]
        assert plan is not None
        self._advance(u, plan[3])
        self._complete_due(u)
        self._decide(u)
        self._offer(u)

    def _note_peak(self, u: int, k: int) -> None:
        """Track the peak KV blocks (exact when auditing, else the O(1) bound)."""
        held = self._held(u, k) if self.audit else min(self._held_bound(u, k), self.pool[u])
        if self.audit and held > self.pool[u]:
            raise AssertionError(f"unit {u}: {held} KV blocks exceed the pool {self.pool[u]}")
        if held > self.peak_blocks[u]:
            self.peak_blocks[u] = held
            unit = self.units[u]
            unit.mem_peak = max(unit.mem_peak, unit.weights + held * self.bs * unit.kv_per_token)

    def run(self) -> SimOutput:
        """Run, then report the KV pool and preemptions alongside the outcome."""
        out = super().run()
        out.extra["preemptions"] = self.total_preemptions
        out.extra["kv_pool_blocks"] = list(self.pool)
        out.extra["kv_peak_blocks"] = list(self.peak_blocks)
        return out
