"""The event-level scheduler of disaggregated serving: a prefill pool and a decode pool of
engine units (devices or tensor-parallel groups) and the KV hand-over between them.

See :class:`~.policy.DisaggregatedPolicy` for the rules and their sources.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from simulations.core.engine.batching import book_decode_run
from simulations.core.engine.core import (
    DECODE,
    IDLE,
    PREFILL,
    ProgressFn,
    SimOutput,
    Simulator,
    Unit,
)
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError

from .transfer import Hop, move

#: A KV path between a prefill unit and a decode unit (the hops, in order).
PathFn = Callable[[Unit, Unit], Sequence[Hop]]


class DisaggSim(Simulator):
    """Prefill pool → KV hand-over → decode pool. Units: prefill units first, then decode.

    Per request: routed on arrival to the prefill unit with the fewest outstanding prompt
    tokens (queued or prefilling; ties to the lowest index), prefilled in that unit's FCFS
    batches (at most ``prefill_max_tokens`` prompt tokens, one prompt for a batch-1 unit,
    and only while the unit's KV pool holds the prompts), then handed over: the decode unit
    with the most free KV memory among those with a free batch slot and room for the
    request's whole KV cache is reserved — at the prefill's start when ``overlap`` (the KV
    then streams layer by layer behind the prefill), else at its end — and the KV moves
    over ``path(prefill unit, decode unit)``. With no decode unit free the request waits
    at the hand-over (FIFO), its KV held on the prefill unit: backpressure, which in turn
    stops that unit admitting prefills once its pool is full. A decode unit runs continuous
    batching of decode iterations; arrived sequences join at its next iteration boundary.
    """

    def __init__(
        self,
        requests: RequestSet,
        prefill: list[Unit],
        decode: list[Unit],
        *,
        path: PathFn,
        kv_bits: Callable[[Unit], float],
        prefill_batch: Sequence[int],
        decode_batch: Sequence[int],
        prefill_max_tokens: int,
        memory_utilization: float,
        overlap: bool,
        reference: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        super().__init__(requests, prefill + decode, reference=reference, progress=progress)
        if not prefill:
            raise CapacityError("devices", "a disaggregated system needs a prefill device")
        if not decode:
            raise CapacityError("devices", "a disaggregated system needs a decode device")
        self.prefill = prefill
        self.decode = decode
        self.path = path
        self.overlap = overlap
        self.prefill_max_tokens = prefill_max_tokens
        self.batch_cap = list(prefill_batch) + list(decode_batch)
        self.layers = prefill[0].model.n_layers
        #: Bytes per token of the KV the wire carries to each decode unit (its KV precision:
        #: the sender quantises before sending, as GLITCHES §III does for the FPGA).
        self.wire_per_token = [0.0] * len(self.units)
        for d in decode:
            self.wire_per_token[d.index] = kv_bits(d)
        nu = len(self.units)
        self.pool = [u.capacity * memory_utilization - u.weights for u in self.units]
        for u in self.units:
            if self.pool[u.index] <= 0:
                raise CapacityError(
                    f"devices[{u.placement}]",
                    f"{u.slug} has no room for a KV cache after the weights "
                    f"({u.weights / 1e9:.1f} GB of {u.capacity / 1e9:.1f} GB at "
                    f"memory_utilization {memory_utilization:g})",
                )
        self.kv_used = [0.0] * nu
        self._check_capacity()
        n = len(self.prompt)
        self.mode = [IDLE] * nu
        # prefill side
        self.pq: list[deque[int]] = [deque() for _ in range(nu)]
        self.outstanding = [0] * nu  # prompt tokens queued or prefilling per prefill unit
        # decode side
        self.slots = [0] * nu  # reserved + running sequences per decode unit
        self.running: list[dict[int, int]] = [{} for _ in range(nu)]
        self.S = [0] * nu
        self.sum_off = [0] * nu
        self.fin: list[list[tuple[int, int]]] = [[] for _ in range(nu)]
        self.arrived: list[list[int]] = [[] for _ in range(nu)]
        self.run_plan: list[tuple[float, int, int, int, float, float] | None] = [None] * nu
        self.check_at: list[float | None] = [None] * nu
        self.fin_step = [0] * n
        # per request
        self.p_unit = [-1] * n
        self.d_unit = [-1] * n
        self.prefill_end = [math.nan] * n
        self.handover_start = [math.nan] * n  # when a decode unit was reserved
        self.kv_ready = [math.nan] * n  # when the KV (and the first token) reached it
        self.decode_start = [math.nan] * n
        self.transfer_s = [0.0] * n
        self.prefills = [0] * n
        self.decodes = [0] * n
        self.handover_q: deque[int] = deque()
        self.backpressured = 0

    # -- capacity ------------------------------------------------------------------------

    def _check_capacity(self) -> None:
        """Every request must fit alone on every unit of both pools, or it could wait
        forever (a mixed pool's routing does not steer requests by size)."""
        longest_prompt = int(np.max(self.requests.input_tokens))
        longest = int(np.max(self.requests.input_tokens + self.requests.output_tokens - 1))
        for u in self.prefill:
            if longest_prompt * u.kv_per_token > self.pool[u.index]:
                raise CapacityError(
                    "workload",
                    f"a prompt of {longest_prompt} tokens does not fit the KV pool of prefill "
                    f"device {u.slug} ({self.pool[u.index] / 1e9:.2f} GB)",
                )
        for u in self.decode:
            if longest * u.kv_per_token > self.pool[u.index]:
                raise CapacityError(
                    "workload",
                    f"a request of {longest + 1} tokens does not fit the KV pool of decode "
                    f"device {u.slug} ({self.pool[u.index] / 1e9:.2f} GB)",
                )

    def _alloc(self, u: int, nbytes: float) -> None:
        self.kv_used[u] += nbytes
        self.units[u].alloc(nbytes)  # tracks the memory peak the result reports

    def _release(self, u: int, nbytes: float) -> None:
        self.kv_used[u] -= nbytes
        self.units[u].release(nbytes)

    def _decode_need(self, rid: int, d: Unit) -> float:
        return (self.prompt[rid] + self.output[rid] - 1) * d.kv_per_token

    def _pick_decode(self, rid: int) -> Unit | None:
        """The decode unit with the most free KV memory that can take ``rid`` now."""
        best: Unit | None = None
        best_free = -1.0
        for d in self.decode:
            di = d.index
            if self.slots[di] >= self.batch_cap[di]:
                continue
            free = self.pool[di] - self.kv_used[di]
            if free >= self._decode_need(rid, d) and free > best_free:
                best, best_free = d, free
        return best

    def _reserve(self, rid: int, d: Unit) -> None:
        di = d.index
        self.d_unit[rid] = di
        self.slots[di] += 1
        self._alloc(di, self._decode_need(rid, d))
        self.handover_start[rid] = self.now

    # -- arrivals and prefill ------------------------------------------------------------

    def on_arrivals(self, ids: list[int]) -> None:
        """Route each arrival to the least-loaded prefill unit and start idle units."""
        touched: list[int] = []
        for rid in ids:
            u = min(self.prefill, key=lambda x: (self.outstanding[x.index], x.index)).index
            self.pq[u].append(rid)
            self.outstanding[u] += self.prompt[rid]
            if u not in touched:
                touched.append(u)
        for u in touched:
            self._try_prefill(u)

    def _try_prefill(self, u: int) -> None:
        if self.mode[u] != IDLE or not self.pq[u]:
            return
        unit = self.units[u]
        q = self.pq[u]
        free = self.pool[u] - self.kv_used[u]
        batch: list[int] = []
        tokens = 0
        while q and len(batch) < self.batch_cap[u]:
            rid = q[0]
            p = self.prompt[rid]
            if batch and tokens + p > self.prefill_max_tokens:
                break
            if (tokens + p) * unit.kv_per_token > free:
                break  # backpressure: the pool holds KV waiting at the hand-over
            q.popleft()
            batch.append(rid)
            tokens += p
        if not batch:
            return
        now = self.now
        lens = [self.prompt[r] for r in batch]
        cost = unit.prefill_cost(lens)
        end = now + cost.seconds
        unit.occupy(now, end, cost.joules, PREFILL, batch[0] if len(batch) == 1 else -1, len(batch))
        unit.prefill_tokens += tokens
        unit.prefill_outputs += len(batch)
        if unit.group_size > 1:
            unit.comm_s += unit.dm.collective_prefill_s(unit.model, lens)
        self._alloc(u, tokens * unit.kv_per_token)
        self.mode[u] = PREFILL
        per_layer = cost.seconds / self.layers
        # Hand-overs keep their order: none is reserved ahead of an older one that waits
        # (in the queue, or earlier in this batch).
        stream = self.overlap and not self.handover_q
        for rid in batch:
            self.p_unit[rid] = u
            self.prefills[rid] += 1
            if stream and self.output[rid] > 1:
                d = self._pick_decode(rid)
                if d is None:
                    stream = False
                else:
                    self._reserve(rid, d)
                    self._send(rid, unit, d, now, per_layer, end)
        self.at(end, self._prefill_end, u, batch)

    def _prefill_end(self, u: int, batch: list[int]) -> None:
        now = self.now
        unit = self.units[u]
        for rid in batch:
            self.generated[rid] = 1
            self.first_token(rid, now)
            self.prefill_end[rid] = now
            self.outstanding[u] -= self.prompt[rid]
            if self.output[rid] == 1:
                self._release(u, self.prompt[rid] * unit.kv_per_token)
                self.complete(rid, now, u)
            elif self.d_unit[rid] < 0:
                self.handover_q.append(rid)
        self.mode[u] = IDLE
        self._dispatch_handovers()
        self._try_prefill(u)

    # -- hand-over -----------------------------------------------------------------------

    def _dispatch_handovers(self) -> None:
        """Send waiting hand-overs (FIFO) while the head finds a decode unit."""
        q = self.handover_q
        while q:
            rid = q[0]
            d = self._pick_decode(rid)
            if d is None:
                return
            q.popleft()
            if self.now > self.prefill_end[rid]:
                self.backpressured += 1
            self._reserve(rid, d)
            self._send(rid, self.units[self.p_unit[rid]], d, self.now, 0.0, self.now)

    def _send(self, rid: int, p: Unit, d: Unit, start: float, per_layer: float, end: float) -> None:
        """Move ``rid``'s KV from ``p`` to ``d`` from ``start`` (layer-wise behind a prefill
        of ``per_layer`` seconds a layer ending at ``end``, or 0 for a finished one)."""
        layer_bytes = self.prompt[rid] * self.wire_per_token[d.index] / self.layers
        first, last = move(self.path(p, d), start, per_layer, layer_bytes, self.layers, rid)
        self.transfer_s[rid] = max(0.0, last - first)
        self.at(max(last, end), self._kv_arrived, rid)

    def _kv_arrived(self, rid: int) -> None:
        """The KV cache and the first token are on the decode unit: free the prefill copy,
        and the sequence joins the decode batch at the unit's next iteration boundary."""
        u = self.p_unit[rid]
        self._release(u, self.prompt[rid] * self.units[u].kv_per_token)
        self.kv_ready[rid] = self.now
        di = self.d_unit[rid]
        self.arrived[di].append(rid)
        if self.mode[di] == IDLE:
            self._decide(di)
        else:
            self._claim_boundary(di)
        self._try_prefill(u)

    # -- decode (continuous batching) ----------------------------------------------------

    def _join(self, di: int) -> None:
        s = self.S[di]
        run = self.running[di]
        for rid in self.arrived[di]:
            off = self.prompt[rid] - s  # the prompt's KV is cached; step k writes token k
            run[rid] = off
            self.sum_off[di] += off
            fin = s + self.output[rid] - 1
            self.fin_step[rid] = fin
            heapq.heappush(self.fin[di], (fin, rid))
            self.decode_start[rid] = self.now
            self.decodes[rid] += 1
        self.arrived[di].clear()

    def _decide(self, di: int) -> None:
        if self.arrived[di]:
            self._join(di)
        run = self.running[di]
        if not run:
            self.mode[di] = IDLE
            self.run_plan[di] = None
            return
        unit = self.units[di]
        b = len(run)
        s = self.S[di]
        n = 1 if self.reference else self.fin[di][0][0] - s
        k0 = self.sum_off[di] + b * s
        dur, joules = unit.curve.run_cost(b, k0, n)
        now = self.now
        self.run_plan[di] = (now, b, k0, n, dur, joules)
        self.mode[di] = DECODE
        self.check_at[di] = None
        unit.version += 1
        self.at(now + dur, self._run_end, di, unit.version)

    def _claim_boundary(self, di: int) -> None:
        """Stop the running decode at its next iteration boundary to let arrivals join."""
        if self.reference or self.check_at[di] is not None:
            return
        plan = self.run_plan[di]
        assert plan is not None
        t0, b, k0, n, _, _ = plan
        unit = self.units[di]
        now = self.now
        k, tk = unit.curve.next_boundary(b, k0, n, now - t0)
        while k < n and t0 + tk <= now:
            k += 1
            tk = unit.curve.run_cost(b, k0, k)[0]
        if k >= n:
            return  # the run's end comes first and decides
        self.check_at[di] = t0 + tk
        self.at(t0 + tk, self._check, di, unit.version, k)

    def _check(self, di: int, version: int, k: int) -> None:
        unit = self.units[di]
        if version != unit.version:
            return
        self.check_at[di] = None
        self._advance(di, k)
        self._decide(di)

    def _advance(self, di: int, k: int) -> None:
        unit = self.units[di]
        plan = self.run_plan[di]
        assert plan is not None
        book_decode_run(unit, plan, k, self.running[di])
        self.S[di] += k
        self.run_plan[di] = None
        # Sequences whose last token this step wrote are done.
        fin = self.fin[di]
        run = self.running[di]
        s = self.S[di]
        freed = False
        while fin and fin[0][0] <= s:
            _, rid = heapq.heappop(fin)
            self.sum_off[di] -= run.pop(rid)
            self.generated[rid] = self.output[rid]
            self._release(di, self._decode_need(rid, unit))
            self.slots[di] -= 1
            self.complete(rid, self.now, di)
            freed = True
        if freed:
            self._dispatch_handovers()

    def _run_end(self, di: int, version: int) -> None:
        unit = self.units[di]
        if version != unit.version:
            return
        plan = self.run_plan[di]
        assert plan is not None
        self._advance(di, plan[3])
        self._decide(di)

    # -- outcome -------------------------------------------------------------------------

    def run(self) -> SimOutput:
        """Run, then report the hand-over (waits, transfers) and the pools."""
        out = super().run()
        span = out.t_end - out.t_start
        n = len(self.prompt)
        handed = [r for r in range(n) if self.output[r] > 1]
        wait = [self.handover_start[r] - self.prefill_end[r] for r in handed]
        wait = [max(0.0, w) for w in wait]
        exposed = [self.decode_start[r] - self.prefill_end[r] for r in handed]
        e2e = float(np.sum(np.array(self.finish) - np.array(self.arrival)))
        kv_wait = [
            self.kv_ready[r] - max(self.handover_start[r], self.prefill_end[r]) for r in handed
        ]

        def pool(units: list[Unit]) -> dict[str, Any]:
            devices = sum(u.group_size for u in units)
            return {
                "instances": len(units),
                "devices": devices,
                "busy_fraction": float(np.mean([u.busy_s / span for u in units])),
                "kv_peak_fraction": float(
                    max((u.mem_peak - u.weights) / self.pool[u.index] for u in units)
                ),
            }

        def stats(xs: list[float]) -> dict[str, float]:
            if not xs:
                return {"mean_ms": 0.0, "p90_ms": 0.0, "max_ms": 0.0}
            a = np.asarray(xs) * 1e3
            return {
                "mean_ms": float(a.mean()),
                "p90_ms": float(np.percentile(a, 90)),
                "max_ms": float(a.max()),
            }

        out.extra.update(
            {
                "handed_over": len(handed),
                "decode_reserved_at_prefill_start": sum(
                    1 for r in handed if self.handover_start[r] < self.prefill_end[r]
                ),
                "backpressured": self.backpressured,
            }
        )
        share = float(sum(max(0.0, x) for x in kv_wait) / e2e) if e2e > 0 else 0.0
        exposed_kv = stats(kv_wait)
        queueing = stats(wait)
        prefill_pool, decode_pool = pool(self.prefill), pool(self.decode)
        out.extra["disaggregated"] = {
            "kv_transfer_share": share,
            "kv_transfer_span": stats([self.transfer_s[r] for r in handed]),
            "exposed_kv_transfer": exposed_kv,
            "handover_queueing": queueing,
            "prefill_end_to_decode_start": stats(exposed),
            "prefill_pool": prefill_pool,
            "decode_pool": decode_pool,
            # The run page shows a block's notes: the hand-over and the pools in one line.
            "notes": (
                f"KV transfer: {share * 100:.3g} % of the requests' time (mean "
                f"{exposed_kv['mean_ms']:.2f} ms a request not hidden behind its prefill); "
                f"prefill pool {prefill_pool['busy_fraction']:.0%} busy "
                f"({prefill_pool['instances']} instances of {prefill_pool['devices']} devices), "
                f"decode pool {decode_pool['busy_fraction']:.0%} busy "
                f"({decode_pool['instances']} instances of {decode_pool['devices']} devices); "
                f"queueing at the hand-over for decode KV memory: mean "
                f"{queueing['mean_ms']:.1f} ms, p90 {queueing['p90_ms']:.1f} ms "
                f"({self.backpressured} of {len(handed)} requests waited)."
            ),
        }
        return out
