"""The event-level scheduler of disaggregated serving: a prefill pool and a decode pool of
engine units (devices or tensor-parallel groups) and the KV hand-over between them.

See :class:`~.policy.DisaggregatedPolicy` for the rules and their sources.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from simulations.core.devices.base import LOGIT_BYTES, TOKEN_BYTES
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

from .transfer import Hop, move, move_fifo

#: A KV path between a prefill unit and a decode unit (the hops, in order).
PathFn = Callable[[Unit, Unit], Sequence[Hop]]


@dataclass(frozen=True)
class Scheduling:
    """The rules of one member of the disaggregated family (the defaults are the
    ``disaggregated`` policy's; GLITCHES §III-C sets every one the other way).

    - ``decode_dispatch``: a hand-over goes to the decode unit with the most free KV memory
      (``"most_free_kv"``) or to the lowest-index one with a free slot and room
      (``"fcfs"``: GLITCHES' idle FPGAs taken first-come-first-served).
    - ``shared_prefill_queue``: instead of routing each arrival to the least-loaded prefill
      unit's own queue, one FCFS queue feeds the pool one prompt at a time (its head goes
      to the lowest-index idle unit with room; it blocks the queue while none has), and a
      prefill unit reserves KV room for the whole request unless it streams to a decode
      unit at once (it may have to decode it). Memory is the device's beside the weights
      (``memory_utilization`` is not applied), every request must fit a prefill unit whole.
    - ``fallback_decode`` (needs ``shared_prefill_queue``): when every decode unit is busy
      an idle prefill unit decodes the oldest waiting request whose KV it holds, alone and
      without moving the KV; a waiting prefill that fits it stops that decode at its next
      iteration boundary and the unit resumes it afterwards. The decode pool may be empty.
    - ``host_first_token``: the first token is sampled on the host, so a decode starts no
      earlier than the prefill's logits crossed the prefill unit's host link and the token
      the decode unit's.
    - ``fifo_kv_links``: the KV moves over the host round trip with each link direction a
      FIFO resource held from the first layer to the last (:func:`.transfer.move_fifo`)
      rather than interleaving concurrent streams (:func:`.transfer.move`).
    """

    decode_dispatch: Literal["most_free_kv", "fcfs"] = "most_free_kv"
    shared_prefill_queue: bool = False
    fallback_decode: bool = False
    host_first_token: bool = False
    fifo_kv_links: bool = False


#: GLITCHES §III-C as a member of the family (``glitches`` sets ``fallback_decode`` from its
#: ``gpu_decode`` option).
GLITCHES = Scheduling(
    decode_dispatch="fcfs",
    shared_prefill_queue=True,
    fallback_decode=True,
    host_first_token=True,
    fifo_kv_links=True,
)


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

    ``scheduling`` changes these rules (:class:`Scheduling`); with
    ``shared_prefill_queue`` every event ends with one scheduling pass over the whole
    system, in this order: (1) waiting hand-overs go FIFO to decode units; (2) waiting
    prefills go FCFS to idle prefill units with room for their KV cache; if the head fits a
    unit that is decoding a fallback, that unit stops at its next decode iteration boundary
    to prefill; (3) with ``fallback_decode`` an idle prefill unit resumes its own paused
    decode or, when a hand-over still waits after (1), takes the oldest waiting one whose KV
    cache it holds. With ``audit`` the pass logs its state (:attr:`state_log`,
    :attr:`fallback_log`).
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
        scheduling: Scheduling = Scheduling(),
        reference: bool = False,
        audit: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        super().__init__(requests, prefill + decode, reference=reference, progress=progress)
        if not prefill:
            raise CapacityError("devices", "a disaggregated system needs a prefill device")
        if scheduling.fallback_decode and not scheduling.shared_prefill_queue:
            raise ValueError("fallback decoding runs on the shared prefill queue")
        if not decode and not scheduling.fallback_decode:
            raise CapacityError("devices", "a disaggregated system needs a decode device")
        self.prefill = prefill
        self.decode = decode
        self.path = path
        self.overlap = overlap
        self.rules = scheduling
        self.shared = scheduling.shared_prefill_queue
        self.fcfs = scheduling.decode_dispatch == "fcfs"
        self.move = move_fifo if scheduling.fifo_kv_links else move
        self.host_first_token = scheduling.host_first_token
        self.audit = audit
        #: With ``audit``: after every scheduling pass of the shared queue, (time, decode
        #: units with a free slot, waiting hand-overs, waiting prefills, whether the waiting
        #: prefill's head fits an idle prefill unit).
        self.state_log: list[tuple[float, int, int, int, bool]] = []
        #: With ``audit``: every fallback decode start or resume on a prefill unit, (time,
        #: unit, request, resumed, decode units with a free slot, whether the waiting
        #: prefill's head fits this unit).
        self.fallback_log: list[tuple[float, int, int, bool, int, bool]] = []
        self.prefill_max_tokens = prefill_max_tokens
        self.batch_cap = list(prefill_batch) + list(decode_batch)
        self.layers = prefill[0].model.n_layers
        self.logit_bytes = prefill[0].model.vocab_size * LOGIT_BYTES
        #: Bytes per token of the KV the wire carries to each decode unit (its KV precision:
        #: the sender quantises before sending, as GLITCHES §III does for the FPGA).
        self.wire_per_token = [0.0] * len(self.units)
        for d in decode:
            self.wire_per_token[d.index] = kv_bits(d)
        nu = len(self.units)
        utilization = 1.0 if self.shared else memory_utilization
        self.pool = [u.capacity * utilization - u.weights for u in self.units]
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
        # shared prefill queue and fallback decoding on the prefill units
        self.queue: deque[int] = deque()
        self.pinned = [-1] * nu  # the request whose fallback decode a prefill unit owns
        # per request
        self.held = [0.0] * n  # KV bytes reserved for it on its prefill unit
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
        self.streamed = 0  # hand-overs reserved at their prefill's start
        self.dispatched = 0  # hand-overs sent from the queue after their prefill
        self.fallback_decoded = 0
        #: Shared queue: per streamed request, decode start − prefill end.
        self.exposed_stream: list[float] = []

    # -- capacity ------------------------------------------------------------------------

    def _check_capacity(self) -> None:
        """Every request must fit alone on every unit of both pools, or it could wait
        forever (a mixed pool's routing does not steer requests by size). On the shared
        queue a prefill unit may have to hold (and decode) a whole request."""
        if self.shared:
            self._check_whole_requests()
            return
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

    def _check_whole_requests(self) -> None:
        longest = int(np.max(self.requests.input_tokens + self.requests.output_tokens))
        for g in self.prefill:
            if not g.fits(longest * g.kv_per_token):
                raise CapacityError(
                    "workload",
                    f"a request of {longest} tokens does not fit {g.slug} memory next to "
                    f"the weights ({g.weights / 1e9:.1f} of {g.capacity / 1e9:.1f} GB)",
                )
        for f in self.decode:
            if not f.fits(longest * self.wire_per_token[f.index]):
                raise CapacityError(
                    "workload",
                    f"a request of {longest} tokens does not fit the KV region of {f.slug} "
                    f"memory next to the weights ({f.weights / 1e9:.1f} of "
                    f"{f.capacity / 1e9:.1f} GB)",
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
        """The decode unit with the most free KV memory that can take ``rid`` now (with
        FCFS dispatch: the first that can)."""
        if self.fcfs:
            for d in self.decode:
                di = d.index
                if self.slots[di] >= self.batch_cap[di]:
                    continue
                if self.pool[di] - self.kv_used[di] >= self._decode_need(rid, d):
                    return d
            return None
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
        """Route each arrival to the least-loaded prefill unit and start idle units (or
        queue them on the shared queue and run a scheduling pass)."""
        if self.shared:
            self.queue.extend(ids)
            self._schedule()
            return
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
        kv = unit.kv_per_token
        for rid in batch:
            self.held[rid] = self.prompt[rid] * kv
        self._start_prefill(unit, batch, tokens * kv)

    def _start_prefill(self, unit: Unit, batch: list[int], reserve: float) -> None:
        """Prefill ``batch`` on ``unit`` now, reserving ``reserve`` bytes of its KV memory,
        and stream each request's KV to a decode unit that can take it at once."""
        u = unit.index
        self._alloc(u, reserve)
        now = self.now
        lens = [self.prompt[r] for r in batch]
        cost = unit.prefill_cost(lens)
        end = now + cost.seconds
        unit.occupy(now, end, cost.joules, PREFILL, batch[0] if len(batch) == 1 else -1, len(batch))
        unit.prefill_tokens += sum(lens)
        unit.prefill_outputs += len(batch)
        if unit.group_size > 1:
            unit.comm_s += unit.dm.collective_prefill_s(unit.model, lens)
        self.mode[u] = PREFILL
        if self.shared:
            self.check_at[u] = None
            unit.version += 1  # a claimed fallback boundary is stale
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
                    self.streamed += 1
                    self._reserve(rid, d)
                    self._send(rid, unit, d, now, per_layer, end)
        self.at(end, self._prefill_end, u, batch)

    def _prefill_end(self, u: int, batch: list[int]) -> None:
        now = self.now
        for rid in batch:
            self.generated[rid] = 1
            self.first_token(rid, now)
            self.prefill_end[rid] = now
            self.outstanding[u] -= self.prompt[rid]
            if self.output[rid] == 1:
                self._release(u, self.held[rid])
                self.complete(rid, now, u)
            elif self.d_unit[rid] < 0:
                self.handover_q.append(rid)
        self.mode[u] = IDLE
        if self.shared:
            self.units[u].version += 1
            self._schedule()
            return
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
            self.dispatched += 1
            self._reserve(rid, d)
            self._send(rid, self.units[self.p_unit[rid]], d, self.now, 0.0, self.prefill_end[rid])

    def _send(self, rid: int, p: Unit, d: Unit, start: float, per_layer: float, end: float) -> None:
        """Move ``rid``'s KV from ``p`` to ``d`` from ``start`` (layer-wise behind a prefill
        of ``per_layer`` seconds a layer ending at ``end``, or 0 for a finished one that
        ended at ``end``)."""
        layer_bytes = self.prompt[rid] * self.wire_per_token[d.index] / self.layers
        first, last = self.move(self.path(p, d), start, per_layer, layer_bytes, self.layers, rid)
        self.transfer_s[rid] = max(0.0, last - first)
        ready = max(last, end)
        if self.host_first_token:
            # the prefill's logits go to the host, which samples; the token goes on
            token = end + p.link_out.seconds(self.logit_bytes)
            ready = max(ready, token + d.link_in.seconds(TOKEN_BYTES))
        if self.shared and math.isnan(self.prefill_end[rid]):  # streamed behind its prefill
            self.exposed_stream.append(ready - end)
        self.at(ready, self._kv_arrived, rid)

    def _kv_arrived(self, rid: int) -> None:
        """The KV cache and the first token are on the decode unit: free the prefill copy,
        and the sequence joins the decode batch at the unit's next iteration boundary."""
        u = self.p_unit[rid]
        self._release(u, self.held[rid])
        self.kv_ready[rid] = self.now
        di = self.d_unit[rid]
        self.arrived[di].append(rid)
        if self.mode[di] == IDLE:
            self._decide(di)
        else:
            self._claim_boundary(di)
        if self.shared:
            self._schedule()
        else:
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
            if self.shared:
                self._schedule()
            else:
                self._dispatch_handovers()

    def _run_end(self, di: int, version: int) -> None:
        unit = self.units[di]
        if version != unit.version:
            return
        plan = self.run_plan[di]
        assert plan is not None
        self._advance(di, plan[3])
        self._decide(di)

    # -- the shared prefill queue and fallback decoding ------------------------------------

    def _will_stream(self, rid: int) -> bool:
        """Whether ``rid``'s KV would stream to a decode unit if its prefill started now."""
        return (
            self.output[rid] > 1
            and self.overlap
            and not self.handover_q
            and self._pick_decode(rid) is not None
        )

    def _held_tokens(self, rid: int) -> int:
        """KV tokens a prefill reserves on the shared queue: the prompt's if it will stream
        (or ends with its first token), else room for the whole request (its prefill unit
        may have to decode it)."""
        if self.output[rid] == 1 or self._will_stream(rid):
            return self.prompt[rid]
        return self.prompt[rid] + self.output[rid]

    def _free_decoders(self) -> int:
        return sum(1 for d in self.decode if self.slots[d.index] < self.batch_cap[d.index])

    def _schedule(self) -> None:
        """One scheduling pass of the shared queue (see the class docstring)."""
        self._dispatch_handovers()
        q = self.queue
        while q:
            rid = q[0]
            tokens = self._held_tokens(rid)
            g = next(
                (
                    u
                    for u in self.prefill
                    if self.mode[u.index] == IDLE and u.fits(tokens * u.kv_per_token)
                ),
                None,
            )
            if g is None:
                break
            q.popleft()
            need = tokens * g.kv_per_token
            self.held[rid] = need
            self._start_prefill(g, [rid], need)
        if q and not self.reference:
            self._fallback_claim(q[0])
        if self.rules.fallback_decode:
            hq = self.handover_q
            for g in self.prefill:
                gi = g.index
                if self.mode[gi] != IDLE:
                    continue
                if self.pinned[gi] >= 0:
                    self._fallback_start(g, resumed=True)
                elif hq:
                    rid = next((r for r in hq if self.p_unit[r] == gi), -1)
                    if rid >= 0:
                        hq.remove(rid)
                        self.pinned[gi] = rid
                        self.fallback_decoded += 1
                        self._fallback_start(g, resumed=False)
        if self.audit:
            self.state_log.append(
                (
                    self.now,
                    self._free_decoders(),
                    len(self.handover_q),
                    len(q),
                    self._head_fits(IDLE),
                )
            )

    def _head_fits(self, mode: str, only: Unit | None = None) -> bool:
        """Whether the waiting prefill's head fits a prefill unit in ``mode`` (or ``only``)."""
        if not self.queue:
            return False
        tokens = self._held_tokens(self.queue[0])
        units = [only] if only is not None else self.prefill
        return any(self.mode[g.index] == mode and g.fits(tokens * g.kv_per_token) for g in units)

    def _fallback_start(self, g: Unit, *, resumed: bool) -> None:
        """Decode the request ``g`` owns alone, to its end (one step in reference mode)."""
        gi = g.index
        rid = self.pinned[gi]
        if self.audit:
            self.fallback_log.append(
                (self.now, gi, rid, resumed, self._free_decoders(), self._head_fits(IDLE, g))
            )
        gen = self.generated[rid]
        n = 1 if self.reference else self.output[rid] - gen
        k0 = self.prompt[rid] + gen - 1
        dur, joules = g.curve.run_cost(1, k0, n)
        now = self.now
        self.run_plan[gi] = (now, 1, k0, n, dur, joules)
        self.mode[gi] = DECODE
        self.check_at[gi] = None
        g.version += 1
        self.at(now + dur, self._fallback_end, gi, g.version)

    def _fallback_advance(self, gi: int, k: int) -> None:
        """Book the first ``k`` steps of the fallback decode on ``gi``; the unit is idle."""
        g = self.units[gi]
        plan = self.run_plan[gi]
        assert plan is not None
        rid = self.pinned[gi]
        book_decode_run(g, plan, k, (rid,))
        self.generated[rid] += k
        self.run_plan[gi] = None
        self.mode[gi] = IDLE

    def _fallback_end(self, gi: int, version: int) -> None:
        g = self.units[gi]
        if version != g.version:
            return
        plan = self.run_plan[gi]
        assert plan is not None
        self._fallback_advance(gi, plan[3])
        rid = self.pinned[gi]
        if self.generated[rid] == self.output[rid]:
            self.pinned[gi] = -1
            self._release(gi, self.held[rid])
            self.complete(rid, self.now, gi)
        self._schedule()

    def _fallback_claim(self, head: int) -> None:
        """Stop the decoding prefill unit whose next iteration boundary comes first (among
        those with room for the waiting prefill ``head``) at that boundary, where the
        reference would prefill."""
        tokens = self._held_tokens(head)
        now = self.now
        best_t = math.inf
        best: tuple[int, int] | None = None
        for g in self.prefill:
            gi = g.index
            if self.mode[gi] != DECODE or not g.fits(tokens * g.kv_per_token):
                continue
            pending = self.check_at[gi]
            if pending is not None:
                if pending < best_t:
                    best_t, best = pending, None
                continue
            plan = self.run_plan[gi]
            assert plan is not None
            t0, _, k0, n, _, _ = plan
            k, tk = g.curve.next_boundary(1, k0, n, now - t0)
            while k < n and t0 + tk <= now:
                k += 1
                tk = g.curve.run_cost(1, k0, k)[0]
            if k < n and t0 + tk < best_t:
                best_t, best = t0 + tk, (gi, k)
        if best is not None:
            gi, k = best
            self.check_at[gi] = best_t
            self.at(best_t, self._fallback_check, gi, self.units[gi].version, k)

    def _fallback_check(self, gi: int, version: int, k: int) -> None:
        g = self.units[gi]
        if version != g.version:
            return
        self.check_at[gi] = None
        q = self.queue
        if q and g.fits(self._held_tokens(q[0]) * g.kv_per_token):
            self._fallback_advance(gi, k)
        self._schedule()

    # -- outcome -------------------------------------------------------------------------

    def run(self) -> SimOutput:
        """Run, then report the hand-over (waits, transfers) and the pools; on the shared
        queue, how decodes were placed and the exposed transfer time instead."""
        out = super().run()
        if self.shared:
            exposed = self.exposed_stream
            out.extra.update(
                {
                    "decodes_streamed_to_fpga": self.streamed,
                    "decodes_dispatched_to_fpga": self.dispatched,
                    "decodes_on_gpu": self.fallback_decoded,
                    "mean_exposed_kv_transfer_ms": (
                        float(np.mean(exposed)) * 1e3 if exposed else 0.0
                    ),
                }
            )
            return out
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
            # per device type in the order the system lists them (a pool may mix types)
            types: dict[str, dict[str, Any]] = {}
            for u in units:
                row = types.setdefault(u.slug, {"device": u.slug, "devices": 0, "instances": 0})
                row["devices"] += u.group_size
                row["instances"] += 1
            return {
                "instances": len(units),
                "devices": devices,
                "device_types": list(types.values()),
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
        # what the wire carried: each prompt's KV at its decode unit's precision (counted
        # with ``kv_free`` too: the bytes move, only their cost is waived)
        kv_bytes = float(sum(self.prompt[r] * self.wire_per_token[self.d_unit[r]] for r in handed))
        out.extra["disaggregated"] = {
            "kv_transfer_share": share,
            "kv_bytes_moved": kv_bytes,
            "handed_over": len(handed),
            "backpressured": self.backpressured,
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
                f"({_of(prefill_pool)}), "
                f"decode pool {decode_pool['busy_fraction']:.0%} busy "
                f"({_of(decode_pool)}); "
                f"queueing at the hand-over for decode KV memory: mean "
                f"{queueing['mean_ms']:.1f} ms, p90 {queueing['p90_ms']:.1f} ms "
                f"({self.backpressured} of {len(handed)} requests waited)."
            ),
        }
        return out


def _plural(n: int, word: str) -> str:
    """``n word`` with the word in the plural unless ``n`` is 1."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _of(pool: dict[str, Any]) -> str:
    """A pool's size in words: "1 instance of 4 devices"."""
    return f"{_plural(pool['instances'], 'instance')} of {_plural(pool['devices'], 'device')}"
