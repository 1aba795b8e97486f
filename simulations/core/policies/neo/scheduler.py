"""Neo's load-aware scheduler (§3.2): one decision per iteration.

The six steps of §3.2, on the runqueues of :class:`~.sim.NeoSim`:

1. *Initialise* two empty sub-batches: batch-0 (prefills, GPU decodes, a few CPU decodes)
   and batch-1 (CPU decodes only).
2. *GPU decodes*: every GPU-resident request joins batch-0; while their KV cache for this
   step does not fit the GPU cache (or the batch budget), the most recently admitted one is
   swapped out to the CPU cache (front of the CPU runqueue); otherwise CPU requests are
   swapped in from the head of the CPU runqueue while there is ample room (the request's
   blocks plus one block of growth per GPU request).
3. *Prefills*: pop the prefill waitqueue (FCFS) into batch-0 while the iteration's token
   and batch budgets hold ("until the GPU cannot hold the activations"); each prompt's KV
   stays in the GPU cache if it fits there, else it is swapped out layer by layer to the
   CPU cache; when neither cache has room, stop. At most ``max_batch`` requests are
   resident in the two caches together (the rows of the engine's block table: SwiftLLM's
   ``max_seqs_in_block_table``, which the evaluation harness of a public SwiftLLM fork
   implementing Neo sets to the batch limit — github SwiftSeal03/swiftLLM,
   evaluation/server.py).
4. *CPU decodes*: scan the CPU runqueue and put each request into batch-1 or batch-0 (the
   one with more slack when both would do) if ``T_ca0 ≤ T_l1 + T_ga0`` and
   ``T_ca1 ≤ T_l0`` still hold, else skip it for this iteration.
5. *Reduce prefills*: drop the last prefills that would be swapped out, as long as the
   inequalities still hold (when CPU decodes were placed: there is a CPU to balance) and
   batch-0 keeps at least the linear stage's saturation width in tokens (the ridge point
   of its GEMMs, :attr:`~.costs.StageCosts.saturation_tokens`). The paper's text states no
   such floor; without one, a lightly loaded CPU makes step 5 drop every swap-out prefill,
   the CPU runqueue never grows and Neo never offloads (a fixed point of the literal
   rules). That fork's scheduler (swiftllm/server/scheduler.py) keeps batch-0 at
   ``linr_S_threshold`` = 128 tokens for the same reason; the ridge point is that
   threshold derived from the device model (≈ 100–150 tokens for T4, A10G, H100).
6. *Decide*: the GPU-only schedule is batch-0 without step 4's CPU decodes; pick whichever
   of the two has the higher estimated requests per second, ``x / T`` (each request in an
   iteration yields one token), with ``T ≈ L × (max{T_l0, T_ca1} + max{T_l1 + T_ga0,
   T_ca0})`` for the two-batch schedule and ``L × (T_l + T_ga)`` for the GPU-only one.

All times are the :class:`~.costs.ProfileTable`'s estimates. Modes: ``neo``; ``gpu``
(offloading disabled — GPU-only Neo: the CPU cache only holds swapped-out requests);
``fastdecode`` (FastDecode+, Neo §5.1: every request's KV and decode attention on the CPU,
same pipelining and scheduler).

Progress rule (not in the paper, which does not say what happens when nothing can run):
when no prefill, GPU decode or balanced CPU decode can be scheduled but CPU requests wait,
the scheduler *forces* CPU batches — the CPU runqueue's head requests split over the two
sub-batches with balanced CPU time, regardless of the inequalities (§5.3: "FastDecode+
would have no choice but to launch CPU batches to make progress"). Such schedules are
marked ``forced``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING

from .costs import interp

if TYPE_CHECKING:
    from .sim import NeoSim

NEO = "neo"
GPU_ONLY = "gpu"
FASTDECODE = "fastdecode"
MODES = (NEO, GPU_ONLY, FASTDECODE)


@dataclass(slots=True)
class Schedule:
    """One iteration's decision: who runs where, what moves over PCIe, and the estimates.

    ``t_l0 … t_ca1`` are the per-layer estimates of §3.2 for the chosen composition
    (two-batch schedules); ``rate_two`` and ``rate_gpu`` the step-6 comparison. ``trace``
    records every decision of steps 3–6 (admissions, each scanned CPU request's preferred
    sub-batch and outcome, step-5 removals, the step-6 choice) so two plans can be
    compared decision by decision.
    """

    prefill_gpu: list[int] = field(default_factory=list)
    prefill_cpu: list[int] = field(default_factory=list)
    gpu_dec: list[int] = field(default_factory=list)
    cpu0: list[int] = field(default_factory=list)
    cpu1: list[int] = field(default_factory=list)
    swap_in: list[int] = field(default_factory=list)
    swap_out: list[int] = field(default_factory=list)
    recompute: list[int] = field(default_factory=list)
    two_batch: bool = False
    forced: bool = False
    t_l0: float = 0.0
    t_l1: float = 0.0
    t_ga0: float = 0.0
    t_ca0: float = 0.0
    t_ca1: float = 0.0
    rate_two: float = 0.0
    rate_gpu: float = 0.0
    trace: list[int] = field(default_factory=list)
    admission_blocked: bool = False

    @property
    def empty(self) -> bool:
        """Nothing to compute (swaps alone are not an iteration)."""
        return not (self.prefill_gpu or self.prefill_cpu or self.gpu_dec or self.cpu0 or self.cpu1)

    def inequalities_hold(self, slack: float = 1e-12) -> bool:
        """``T_ca0 ≤ T_l1 + T_ga0`` and ``T_ca1 ≤ T_l0`` on the schedule's estimates."""
        tol = slack * max(1.0, self.t_l0 + self.t_l1 + self.t_ga0)
        return self.t_ca0 <= self.t_l1 + self.t_ga0 + tol and self.t_ca1 <= self.t_l0 + tol


class NeoScheduler:
    """The §3.2 scheduler over a :class:`~.sim.NeoSim`'s queues (read-only: the simulator
    applies the returned :class:`Schedule`)."""

    def __init__(self, sim: NeoSim, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown Neo mode {mode!r}")
        self.sim = sim
        self.mode = mode
        #: Settle step 4's shortest-request checks by bounds where they decide (off: always
        #: scan; the schedules are the same, the tests compare the two).
        self.bounds = True
        #: Checks the bounds settled in this scheduler's plans (their reach, for the tests).
        self.settled = 0

    def plan(self) -> Schedule:
        """The next iteration's schedule (all six steps)."""
        sim = self.sim
        tab = sim.table
        bs = sim.block_size
        ctx = sim.ctx
        plen = sim.plen
        max_batch = sim.max_batch
        max_tokens = sim.max_tokens
        gpu_pool = sim.gpu_pool
        cpu_pool = sim.cpu_pool
        n_layers = sim.n_layers
        sch = Schedule()

        # Step 2: GPU decodes, swap-out / swap-in.
        gpu_q = sim.gpu_q
        keep = len(gpu_q)
        need = sim.gpu_blocks  # blocks after this step's token: Σ ceil((c + 1) / bs)
        while keep and (need > gpu_pool or keep > max_batch or keep > max_tokens):
            keep -= 1
            victim = gpu_q[keep]
            need -= (ctx[victim] + bs) // bs
            sch.swap_out.append(victim)
        cpu_q = sim.cpu_q
        cpu_need = sim.cpu_blocks
        n_cpu = len(cpu_q)
        while n_cpu and cpu_need > cpu_pool:
            # The host cache overflows: the latest CPU request is recomputed later.
            n_cpu -= 1
            victim = cpu_q[n_cpu]
            cpu_need -= (ctx[victim] + bs) // bs
            sch.recompute.append(victim)
        out_blocks = 0
        for v in sch.swap_out:
            out_blocks += (ctx[v] + bs) // bs
        if cpu_need + out_blocks > cpu_pool:
            # No room on the host either: swapped-out victims are recomputed later.
            sch.recompute.extend(sch.swap_out)
            sch.swap_out = []
            out_blocks = 0
        gpu_dec = gpu_q[:keep]
        # The CPU runqueue in scan order (read only: the runqueue itself when nothing moves).
        if sch.swap_out or n_cpu < len(cpu_q):
            cpu_order: list[int] = list(reversed(sch.swap_out)) + cpu_q[:n_cpu]
        else:
            cpu_order = cpu_q
        if not sch.swap_out and self.mode != FASTDECODE and n_cpu:
            reserve = keep
            n_in = 0
            for r in cpu_order:
                b = (ctx[r] + bs) // bs
                if need + b > gpu_pool - reserve - 1 or keep + n_in >= max_batch:
                    break
                need += b
                reserve += 1
                n_in += 1
                sch.swap_in.append(r)
            if n_in:
                gpu_dec = gpu_dec + sch.swap_in
                cpu_order = cpu_order[n_in:]
                for r in sch.swap_in:
                    cpu_need -= (ctx[r] + bs) // bs
        cpu_need += out_blocks
        sch.gpu_dec = gpu_dec
        n_gdec = len(gpu_dec)

        # Step 3: prefills.
        batch_left = max_batch - n_gdec
        tokens_left = max_tokens - n_gdec
        cpu_reserve = len(cpu_order)
        pref_tokens = 0
        t_pref = 0.0
        # The block table has max_batch rows: requests resident in either cache, at most.
        resident_left = max_batch - (len(gpu_q) + len(cpu_q) - len(sch.recompute))
        for r in sim.waitq:
            sch.admission_blocked = True
            if batch_left < 1 or resident_left < 1:
                break
            p = plen[r]
            # A prompt longer than the whole budget runs as its iteration's only prefill.
            if p > tokens_left and (pref_tokens or p <= max_tokens):
                break
            b = -(-p // bs)
            if self.mode != FASTDECODE and need + b <= gpu_pool:
                need += b
                sch.prefill_gpu.append(r)
            elif self.mode != GPU_ONLY and cpu_need + b <= cpu_pool - cpu_reserve:
                cpu_need += b
                cpu_reserve += 1
                sch.prefill_cpu.append(r)
            else:
                break
            batch_left -= 1
            resident_left -= 1
            tokens_left -= p
            pref_tokens += p
            t_pref += tab.prefill_attn(p)
            sch.admission_blocked = False

        # Σ (c + 1) over gpu_dec: the GPU runqueue's running sum less the swap-out victims
        # (its tail) plus the swapped-in requests.
        n_g_att = sim.gpu_ctx + keep
        for r in gpu_q[keep:]:
            n_g_att -= ctx[r]
        for r in sch.swap_in:
            n_g_att += ctx[r] + 1
        t_ga0 = t_pref + tab.gpu_decode_attn(n_g_att)
        s0 = pref_tokens + n_gdec
        t_l0 = tab.linear(s0)
        t_l1 = 0.0
        x0 = x1 = 0
        t_ca0 = t_ca1 = 0.0

        trace = sch.trace
        trace.append(len(sch.prefill_gpu))
        trace.append(len(sch.prefill_cpu))

        # Step 4: CPU decodes into batch-1 / batch-0 under the two inequalities.
        if self.mode != GPU_ONLY and cpu_order:
            cs = tab.cdec_c
            line_of = tab.cdec_line
            lin = tab.linear
            # The precomputed T_l widths and cached CPU rows, read inline (the same values
            # as ``lin`` and ``line_of``; this loop runs ~30 times per plan).
            lin_at = tab._lin_at
            n_lin = len(lin_at)
            rows = tab._cdec_rows
            # Estimates of each sub-batch with one more CPU decode (updated on placement):
            # T_l with one more token, and the CPU-attention row for one more request over
            # the cached tokens (a line a + b·cached unless the table bends).
            nl0, nl1 = lin(s0 + 1), lin(1)
            a0, b0, row0 = line_of(1)
            a1, b1, row1 = a0, b0, row0
            # Cached tokens (attended minus one per request) of each sub-batch's CPU decodes.
            c0 = c1 = 0
            # The halves of the two inequalities that do not depend on the candidate (they
            # change only on a placement): batch-1 keeps T_ca0 ≤ T_l1 + T_ga0 with one more
            # token, batch-0 keeps T_ca1 ≤ T_l0 with one more token.
            ok1 = t_ca0 <= nl1 + t_ga0
            ok0 = t_ca1 <= nl0
            # Requests as long as a failed one are skipped: costs grow with length and slack
            # only shrank since then.
            c_fail = math.inf
            # The shortest context still to come after a failure and the first position
            # holding it (valid for every later failure before that position).
            m = 0
            m_pos = -1
            lo = -1
            room = min(batch_left, tokens_left)
            last = len(cpu_order) - 1
            for pos, c in enumerate(map(ctx.__getitem__, cpu_order)):
                if room < 1:
                    break
                if c >= c_fail:
                    # (Not traced: skipped and failed requests do not advance, so the
                    # failures recorded before this one imply the skip.)
                    continue
                if ok1:
                    nt_ca1 = a1 + b1 * (c1 + c) if row1 is None else interp(cs, row1, c1 + c)
                    fit1 = nt_ca1 <= t_l0
                else:
                    fit1 = False
                if ok0:
                    nt_ca0 = a0 + b0 * (c0 + c) if row0 is None else interp(cs, row0, c0 + c)
                    fit0 = nt_ca0 <= t_l1 + t_ga0
                else:
                    fit0 = False
                if fit1 and (not fit0 or (t_l0 - t_ca1) >= (t_l1 + t_ga0 - t_ca0)):
                    # Batch-1 alone fits, or both do and batch-1 has more slack.
                    trace.append(5 if fit0 else 3)
                    x1 += 1
                    c1 += c
                    t_l1, t_ca1 = nl1, nt_ca1
                    nl1 = lin_at[x1 + 1] if x1 + 1 < n_lin else lin(x1 + 1)
                    a1, b1, row1 = rows.get(x1 + 1) or line_of(x1 + 1)
                    sch.cpu1.append(cpu_order[pos])
                elif fit0:
                    trace.append(4 if fit1 else 2)
                    s0 += 1
                    x0 += 1
                    c0 += c
                    t_l0, t_ca0 = nl0, nt_ca0
                    nl0 = lin_at[s0 + 1] if s0 + 1 < n_lin else lin(s0 + 1)
                    a0, b0, row0 = rows.get(x0 + 1) or line_of(x0 + 1)
                    sch.cpu0.append(cpu_order[pos])
                else:
                    c_fail = c
                    trace.append(1)
                    # Costs grow with length: when the shortest request still to come fits
                    # neither sub-batch, no later request does.
                    if pos >= last:
                        break
                    if pos >= m_pos and (ok1 or ok0):
                        # Bounds on the shortest context to come settle most checks without
                        # scanning the rest, when both estimates are monotone in it (a line
                        # of non-negative slope, or a sub-batch that takes nothing): below,
                        # the simulator's floor under every CPU-resident context (and the
                        # swapped-out requests' contexts); above, the next and the last.
                        if (
                            self.bounds
                            and (not ok1 or (row1 is None and b1 >= 0))
                            and (not ok0 or (row0 is None and b0 >= 0))
                        ):
                            if lo < 0:
                                lo = sim.cpu_floor
                                if sch.swap_out:
                                    lo = min(lo, min(map(ctx.__getitem__, sch.swap_out)))
                            if not (ok1 and a1 + b1 * (c1 + lo) <= t_l0) and not (
                                ok0 and a0 + b0 * (c0 + lo) <= t_l1 + t_ga0
                            ):
                                self.settled += 1
                                break
                            hi = min(ctx[cpu_order[pos + 1]], ctx[cpu_order[last]])
                            if (ok1 and a1 + b1 * (c1 + hi) <= t_l0) or (
                                ok0 and a0 + b0 * (c0 + hi) <= t_l1 + t_ga0
                            ):
                                self.settled += 1
                                continue
                        # One scan of the rest (not a suffix minimum of the whole runqueue):
                        # later failures before m_pos share its minimum.
                        rest = list(map(ctx.__getitem__, islice(cpu_order, pos + 1, None)))
                        m = min(rest)
                        m_pos = pos + 1 + rest.index(m)
                    if not (
                        ok1
                        and (a1 + b1 * (c1 + m) if row1 is None else interp(cs, row1, c1 + m))
                        <= t_l0
                    ) and not (
                        ok0
                        and (a0 + b0 * (c0 + m) if row0 is None else interp(cs, row0, c0 + m))
                        <= t_l1 + t_ga0
                    ):
                        break
                    continue
                room -= 1
                ok1 = t_ca0 <= nl1 + t_ga0
                ok0 = t_ca1 <= nl0

            # Step 5: drop swap-out prefills while the inequalities still hold and batch-0
            # keeps enough tokens to saturate the GPU's linear stage.
            if x0 + x1:
                floor = sim.costs.saturation_tokens
                while sch.prefill_cpu:
                    p = plen[sch.prefill_cpu[-1]]
                    if s0 - p < floor:
                        break
                    nt_l0 = tab.linear(s0 - p)
                    nt_ga0 = t_ga0 - tab.prefill_attn(p)
                    if t_ca1 <= nt_l0 and t_ca0 <= t_l1 + nt_ga0:
                        trace.append(-1)
                        sch.prefill_cpu.pop()
                        s0 -= p
                        pref_tokens -= p
                        t_l0, t_ga0 = nt_l0, nt_ga0
                    else:
                        break

        # Step 6: two-batch against GPU-only, by estimated requests per second.
        x_gpu = len(sch.prefill_gpu) + len(sch.prefill_cpu) + n_gdec
        t_gpu = n_layers * (tab.linear(s0 - x0) + t_ga0)
        sch.rate_gpu = x_gpu / t_gpu if x_gpu and t_gpu > 0 else 0.0
        if x0 + x1:
            t_two = n_layers * (max(t_l0, t_ca1) + max(t_l1 + t_ga0, t_ca0))
            sch.rate_two = (x_gpu + x0 + x1) / t_two
        trace.append(len(sch.prefill_gpu))
        trace.append(len(sch.prefill_cpu))
        if x0 + x1 and sch.rate_two > sch.rate_gpu:
            trace.append(-2)
            sch.two_batch = True
            sch.t_l0, sch.t_l1, sch.t_ga0, sch.t_ca0, sch.t_ca1 = t_l0, t_l1, t_ga0, t_ca0, t_ca1
        else:
            sch.cpu0 = []
            sch.cpu1 = []
            sch.t_l0, sch.t_ga0 = tab.linear(s0 - x0), t_ga0

        if sch.empty and cpu_order and self.mode != GPU_ONLY:
            self._force_cpu(sch, cpu_order)
        return sch

    def _force_cpu(self, sch: Schedule, cpu_order: list[int]) -> None:
        """Launch CPU batches to make progress (see the module notes): the runqueue's head
        requests, each into the sub-batch with less estimated CPU time."""
        sim = self.sim
        tab = sim.table
        ctx = sim.ctx
        x = [0, 0]
        n = [0, 0]
        t = [0.0, 0.0]
        for r in cpu_order[: min(sim.max_batch, sim.max_tokens)]:
            j = 0 if t[0] <= t[1] else 1
            sch.trace.append(10 + j)
            x[j] += 1
            n[j] += ctx[r] + 1
            t[j] = tab.cpu_attn(x[j], n[j])
            (sch.cpu0 if j == 0 else sch.cpu1).append(r)
        sch.two_batch = True
        sch.forced = True
        sch.t_l0 = tab.linear(x[0])
        sch.t_l1 = tab.linear(x[1])
        sch.t_ga0 = 0.0
        sch.t_ca0, sch.t_ca1 = t[0], t[1]
