"""Chunked prefill (Sarathi-Serve, Agrawal et al., OSDI'24; vLLM's default scheduler) and
prefix caching on top of :class:`~.batching.BatchingSim`'s continuous batching.

Every iteration has a token budget, ``max_batched_tokens``. At an iteration boundary where
a prompt is being prefilled or the head of the queue can be admitted, a unit runs a *mixed
iteration*: every running sequence decodes one token (one budget token each), the prompts
already being prefilled continue with a chunk each (FCFS, as much as the budget leaves), and
queued requests are admitted while the budget, ``max_batch`` and the KV pool allow, each
with a first chunk. Decodes never pause for a prefill, so a long prompt no longer stalls
every running sequence (TPOT's tail falls); a prompt is spread over several iterations
shared with decodes (TTFT rises). The iteration that prefills a prompt's last chunk yields
its first token. Otherwise the unit decodes as :class:`~.batching.BatchingSim` does,
fast-forwarding runs of pure decode iterations; the router, the watermark and preemption by
recompute (the latest admitted decoding sequence) are the same.

KV blocks: a prompt's blocks are reserved whole when it is admitted (vLLM allocates them
chunk by chunk; reserving up front never lets a half-prefilled prompt starve, and changes
when a request is admitted only under memory pressure).

Prefix caching (``prefix_caching``): a workload may declare a shared prefix, a system
prompt of ``P`` tokens at the start of a fraction of the prompts
(:class:`~.requests.RequestSet` ``prefix_tokens``). Its full KV blocks (``P // block_size``
of them, as vLLM caches only full blocks) are cached on a unit once one request there has
prefilled them, and stay resident for the rest of the run (counted once in the pool;
vLLM would evict them only under memory pressure when no sequence uses them — not
modelled). A request admitted while its unit holds the prefix skips those tokens' prefill
(its chunks attend to them) and does not allocate their blocks. Preemption frees a
sequence's own blocks only; re-admitted, it hits the prefix again.
"""

from __future__ import annotations

import heapq

import numpy as np

from simulations.core.errors import SpecError

from .batching import BatchingSim
from .core import PREFILL, ProgressFn, SimOutput, Unit
from .requests import RequestSet


class ChunkedSim(BatchingSim):
    """Continuous batching with chunked prefill and, optionally, prefix caching."""

    def __init__(
        self,
        requests: RequestSet,
        units: list[Unit],
        *,
        max_batch: int = 256,
        block_size: int = 16,
        memory_utilization: float = 0.9,
        max_batched_tokens: int = 2048,
        watermark: float = 0.01,
        prefix_caching: bool = False,
        reference: bool = False,
        audit: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        if max_batched_tokens < max_batch:
            raise SpecError(
                "options.max_batched_tokens",
                f"with chunked prefill the token budget ({max_batched_tokens}) must be at "
                f"least max_batch ({max_batch}): every running sequence decodes a token of it",
            )
        super().__init__(
            requests,
            units,
            max_batch=max_batch,
            block_size=block_size,
            memory_utilization=memory_utilization,
            max_batched_tokens=max_batched_tokens,
            watermark=watermark,
            reference=reference,
            audit=audit,
            progress=progress,
        )
        nu = len(units)
        n = len(self.prompt)
        for unit in units:
            # A convex decode curve learns each batch size up to the whole pool at once.
            unit.curve.kv_limit = max(unit.curve.kv_limit, self.pool[unit.index] * block_size)
        #: Prompts being prefilled per unit, in admission order: [rid, tokens done, blocks].
        self.partial: list[list[list[int]]] = [[] for _ in units]
        self.reserved = [0] * nu
        pfx = requests.prefix_tokens
        self.prefix_caching = bool(prefix_caching)
        self.pfx_blocks: list[int] = (
            (np.asarray(pfx) // block_size).tolist() if pfx is not None else [0] * n
        )
        self.prefix_blocks = max(self.pfx_blocks, default=0)
        self.pinned = [0] * nu
        self.shared_sub = [0] * nu
        self.uses_shared = [False] * n
        self.prefix_lookups = 0
        self.prefix_hits = 0
        self.prefill_tokens_saved = 0
        self.mixed_iterations = 0

    # -- KV accounting (prompts reserved whole, the prefix counted once) -----------------

    def _held(self, u: int, k: int) -> int:
        return super()._held(u, k) + self.reserved[u] + self.pinned[u] - self.shared_sub[u]

    def _held_bound(self, u: int, k: int) -> int:
        # BatchingSim's O(1) bound, inlined (the admission checks call it per arrival).
        b = len(self.running[u])
        bound = (self.sum_off[u] + b * (self.S[u] + k + self.bs - 1)) // self.bs
        return bound + self.reserved[u] + self.pinned[u] - self.shared_sub[u]

    def _hit(self, u: int, rid: int) -> bool:
        """Whether ``rid`` would find its prefix cached on ``u``."""
        return self.prefix_caching and self.pfx_blocks[rid] > 0 and self.pinned[u] > 0

    def _blocks(self, u: int, rid: int) -> int:
        """Blocks ``rid``'s prompt allocates on ``u`` (its cached prefix's excluded)."""
        need = -(-self.plen[rid] // self.bs)
        return need - self.pfx_blocks[rid] if self._hit(u, rid) else need

    def _can_admit(self, u: int, rid: int, k: int) -> bool:
        run = self.running[u]
        if len(run) + len(self.partial[u]) >= self.max_batch:
            return False
        # _blocks and _held_bound inlined: this runs at every arrival and admission.
        bs = self.bs
        need = -(-self.plen[rid] // bs)
        if self.prefix_caching and self.pinned[u] and self.pfx_blocks[rid]:
            need -= self.pfx_blocks[rid]
        room = self.pool[u] - self.wm[u] - need
        bound = (self.sum_off[u] + len(run) * (self.S[u] + k + bs - 1)) // bs
        bound += self.reserved[u] + self.pinned[u] - self.shared_sub[u]
        return bound <= room or self._held(u, k) <= room

    # -- iterations ----------------------------------------------------------------------

    def _decide(self, u: int) -> None:
        if self.partial[u]:
            self._start_prefill(u)
            return
        super()._decide(u)

    def _start_prefill(self, u: int) -> None:
        """Run one mixed iteration on ``u`` (see the module notes)."""
        unit = self.units[u]
        run = self.running[u]
        if run:
            self._preempt_for_next_step(u)
        q = self.queues[u]
        partial = self.partial[u]
        budget = self.max_batched_tokens - len(run)
        chunks: list[tuple[int, int, int]] = []  # (rid, tokens, cached before)
        for entry in partial:
            if budget <= 0:
                break
            rid, done = entry[0], entry[1]
            c = min(self.plen[rid] - done, budget)
            chunks.append((rid, c, done))
            budget -= c
        while q and budget > 0 and self._can_admit(u, q[0], 0):
            rid = q.popleft()
            done = 0
            if self.pfx_blocks[rid] > 0 and self.prefix_caching:
                self.prefix_lookups += 1
                if self._hit(u, rid):
                    done = self.pfx_blocks[rid] * self.bs
                    self.prefix_hits += 1
                    self.prefill_tokens_saved += done
                    self.uses_shared[rid] = True
            blocks = self._blocks(u, rid)
            self.reserved[u] += blocks
            partial.append([rid, done, blocks])
            c = min(self.plen[rid] - done, budget)
            chunks.append((rid, c, done))
            budget -= c
        b = len(run)
        if not chunks:
            raise AssertionError("a mixed iteration with no prompt chunk")
        kv = self.sum_off[u] + b * self.S[u]
        cost = unit.chunk_cost(b, kv, tuple((c, o) for _, c, o in chunks))
        now = self.now
        end = now + cost.seconds
        label = chunks[0][0] if b == 0 and len(chunks) == 1 else -1
        unit.occupy(now, end, cost.joules, PREFILL, label, b + len(chunks))
        unit.prefill_tokens += sum(c for _, c, _ in chunks)
        unit.decode_tokens += b
        self.mixed_iterations += 1
        self._note_peak(u, 1 if b else 0)
        self.mode[u] = PREFILL
        self.run_plan[u] = None
        self.check_at[u] = None
        unit.version += 1
        self.at(end, self._prefill_end, u, unit.version, chunks)

    def _prefill_end(self, u: int, version: int, batch: list[int]) -> None:
        chunks: list[tuple[int, int, int]] = batch  # type: ignore[assignment]
        now = self.now
        unit = self.units[u]
        run = self.running[u]
        if run:
            self.S[u] += 1  # every running sequence decoded one token
        s = self.S[u]
        partial = self.partial[u]
        finished: set[int] = set()
        for rid, c, o in chunks:
            if o + c < self.plen[rid]:
                continue
            finished.add(rid)
            off = self.plen[rid] - s
            run[rid] = off
            self.on_unit[rid] = u
            self.sum_off[u] += off
            self.generated[rid] += 1
            self.first_token(rid, now)
            fin = s + self.output[rid] - self.generated[rid]
            self.fin_step[rid] = fin
            heapq.heappush(self.fin[u], (fin, rid))
            unit.prefill_outputs += 1
            if (
                self.prefix_caching
                and not self.uses_shared[rid]
                and self.pfx_blocks[rid] == self.prefix_blocks > 0
                and self.pinned[u] == 0
            ):
                # Its first blocks hold the prefix now: cached from here on.
                self.pinned[u] = self.prefix_blocks
                self.uses_shared[rid] = True
            if self.uses_shared[rid]:
                self.shared_sub[u] += self.pfx_blocks[rid]
        kept: list[list[int]] = []
        advanced = {rid: c for rid, c, _ in chunks}
        for entry in partial:
            rid = entry[0]
            if rid in finished:
                self.reserved[u] -= entry[2]
                continue
            entry[1] += advanced.get(rid, 0)
            kept.append(entry)
        self.partial[u] = kept
        self._complete_due(u)
        self._decide(u)
        self._offer(u)

    # -- bookkeeping of the shared prefix ------------------------------------------------

    def _complete_due(self, u: int) -> None:
        fin = self.fin[u]
        s = self.S[u]
        run = self.running[u]
        while fin and fin[0][0] <= s:
            s_fin, rid = heapq.heappop(fin)
            if self.on_unit[rid] != u or self.fin_step[rid] != s_fin:
                continue
            self.sum_off[u] -= run.pop(rid)
            self._unshare(u, rid)
            self.on_unit[rid] = -1
            self.generated[rid] = self.output[rid]
            self.complete(rid, self.now, u)

    def _preempt_for_next_step(self, u: int) -> None:
        run = self.running[u]
        while run and not self._fits_after(u, 1):
            victim = next(reversed(run))
            self.sum_off[u] -= run.pop(victim)
            self._unshare(u, victim)
            g = self.output[victim] - (self.fin_step[victim] - self.S[u])
            self.generated[victim] = g
            self.plen[victim] = self.prompt[victim] + g
            self.on_unit[victim] = -1
            self.preemptions[victim] += 1
            self.total_preemptions += 1
            self.queues[u].appendleft(victim)

    def _unshare(self, u: int, rid: int) -> None:
        if self.uses_shared[rid]:
            self.uses_shared[rid] = False
            self.shared_sub[u] -= self.pfx_blocks[rid]

    def run(self) -> SimOutput:
        """Run, then report the mixed iterations and the prefix cache's figures."""
        out = super().run()
        out.extra["chunked_prefill"] = True
        out.extra["mixed_iterations"] = self.mixed_iterations
        if self.prefix_caching:
            out.extra["prefix_lookups"] = self.prefix_lookups
            out.extra["prefix_hits"] = self.prefix_hits
            out.extra["prefix_hit_rate"] = (
                self.prefix_hits / self.prefix_lookups if self.prefix_lookups else 0.0
            )
            out.extra["prefill_tokens_saved"] = self.prefill_tokens_saved
            out.extra["prefix_kv_blocks"] = list(self.pinned)
        return out
