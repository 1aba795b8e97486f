"""The analytic screen: necessary conditions for a configuration to meet the targets.

The screen never simulates. From the device cost models it computes, once per device
entry, each request's service times (batch-1 prefill ``P``, batch-1 decode run ``D`` of its
``o - 1`` steps including any per-step host round trip, a compute-only prefill bound and a
memory-traffic decode bound for batched serving, and their energies) — exactly the
quantities the engine charges, from the same :class:`~simulations.core.engine.core.Unit`
curves. From these it derives, for every count combination of a signature at once
(numpy), bounds that the request-level engine can never beat on the *same finite request
set*:

* **Memory fit.** Each policy runs the engine's own constructors on one device of each
  entry (its ``screen_fit``): if they raise ``CapacityError``, so would every simulation
  using that entry.
* **Per-request latency floors.** A request's TTFT is at least its batch-1 prefill on the
  fastest prefill device of the configuration and its TPOT at least its batch-1 decode
  step time on the fastest decode device (prefill and decode costs are monotone in batch
  and context, so batching only adds). The percentile of these floors bounds the
  percentile the engine reports (numpy percentiles are monotone in every value).
* **Finite-horizon queueing bound** (a deterministic, network-calculus style work bound).
  Cut time into windows ``E_j``. A request arriving in ``E_j`` that meets the TTFT target
  ``T`` does its prefill inside ``[a_i, a_i + T]`` — inside ``E_j`` when ``a_i + T`` is —
  so the work of the on-time requests of a window cannot exceed the devices' time in it,
  ``c × |E_j|``. At most the cheapest-first prefix of the window's works fits; the rest is
  late. Summed over the disjoint windows of a partition (the maximum over several
  partitions), this counts requests that are late in *every* schedule; more than the
  percentile allows means infeasible. Works: batch-1 serving holds a device for the whole
  request, so an on-time request occupies at least ``min(P + D, end - a_i - T + P)`` of
  the window (it starts by ``a_i + T - P``); GLITCHES prefill occupies a GPU for ``P``;
  batched prefill needs at least its FLOPs at the achieved compute rate.
* **Decode capacity.** A request that meets both the TTFT and the TPOT target finishes by
  ``a_i + T + (o_i - 1) τ``; the same window argument over prefill plus decode work, with
  the late budget being the TTFT and the TPOT allowances together, bounds how many
  requests can meet both.
* **Throughput and energy.** The run lasts at least until the latest arrival plus its
  service floor, and at least the total work over the device count; energy is at least
  every device's idle (or lowest) power over that span plus each request's cheapest
  energy above idle.

Every bound is *optimistic for feasibility*: whatever the screen rules out, the engine
would find infeasible too (``tests/core/planner`` checks this against exhaustive engine
runs). Floating-point slack (:data:`SLACK`) is applied in the optimistic direction.

This module holds the generic code: request costs per device entry (:class:`CostCache`),
the late-request work bound (:func:`late_by_capacity`), the bounds of units that serve whole
requests (``homogeneous``, ``gpu-only``) and the count-level verdict. What is specific to a
policy — its memory fit and the floors of its schedule — is the policy's own
(``screen_fit`` / ``screen_bounds`` on its class, in its package), spoken in the vocabulary
of :mod:`simulations.core.screening`; nothing here knows a policy by name.

For reporting and ordering only (never for pruning), a steady-state utilisation estimate
(mean work per second over the devices' capacity) is computed too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.engine.core import Unit, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies import get_policy
from simulations.core.screening import (
    REASON_CODE,
    REASON_TEXT,
    REASONS,
    SLACK,
    Bounds,
    CostTable,
    GroupScreen,
    LateCheck,
    Requests,
    SharedVerdict,
    SignatureLike,
    WorkFn,
    allowed_late,
)
from simulations.core.spec import DevicePlacement, DeviceSpec, ModelSpec, RuntimeProfile

from .document import PlanSpec, Targets, policy_traits
from .space import Config, Group, Signature, replica_devices

#: Most dyadic levels of windows the queueing bound tries.
MAX_LEVELS = 9


class CostCache:
    """Cost tables and memory-fit verdicts, shared by every screen of one plan (they depend
    on the request lengths only, not on arrivals). It is the :class:`~simulations.core.
    screening.FitContext` a policy's ``screen_fit`` sees."""

    def __init__(self, plan: PlanSpec, requests: RequestSet) -> None:
        self.plan = plan
        self.requests = requests
        self.req = Requests.of(requests)
        self._tables: dict[tuple[Any, ...], CostTable] = {}
        self._fits: dict[tuple[Any, ...], tuple[str | None, Any]] = {}
        self.seconds = 0.0

    @property
    def model(self) -> ModelSpec:
        """The plan's model."""
        return self.plan.model

    def device(self, entry: int) -> tuple[DeviceSpec, RuntimeProfile]:
        """The device and runtime of device entry ``entry``."""
        choice = self.plan.devices[entry]
        return choice.device, choice.runtime

    def unit(self, entry: int, settings: Mapping[str, Any] | None = None) -> Unit:
        """One engine unit of ``entry`` built as the policies build it (the device model's
        ``settings``, e.g. an FPGA's prefetch ratio, and its host sampling per decode step);
        CapacityError when the weights do not fit."""
        choice = self.plan.devices[entry]
        model = self.plan.model
        placement = DevicePlacement(choice.device, 1, choice.runtime, "")

        def factory(device: Any, runtime: Any) -> DeviceModel:
            return build_device_model(device, runtime).with_settings(settings or {})

        def overhead(p: DevicePlacement, dm: DeviceModel) -> float:
            return dm.host_sampling_s(model)

        return build_units([placement], model, factory, step_overhead_s=overhead, timeline_cap=0)[0]

    def table(self, entry: int, settings: Mapping[str, Any] | None = None) -> CostTable:
        """Costs of every request on one unit of ``entry`` with ``settings`` applied (tables
        are shared by the settings the device model does not read)."""
        choice = self.plan.devices[entry]
        dm = build_device_model(choice.device, choice.runtime)
        read = {s.name for s in dm.settings}
        key = (
            "entry",
            entry,
            tuple(sorted((k, v) for k, v in (settings or {}).items() if k in read)),
        )
        return self.table_of(key, lambda: self.unit(entry, settings))

    def table_of(self, key: tuple[Any, ...], make_unit: Callable[[], Unit]) -> CostTable:
        """Costs of every request on the unit ``make_unit`` builds (once per ``key``): a
        policy's own unit, e.g. ``gpu-only``'s tensor-parallel group."""
        hit = self._tables.get(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        unit = make_unit()
        r = self.req
        lens, inverse = np.unique(r.p, return_inverse=True)
        pre = np.full((len(lens), 3), np.inf)
        for k, x in enumerate(lens):
            try:
                c = unit.prefill_cost([int(x)])
            except CapacityError:
                continue
            pre[k] = (c.seconds, c.joules, c.flops)
        rate = unit.dm.compute_rate_bound()
        dec = np.zeros((r.n, 2))
        for i in range(r.n):
            steps = int(r.o[i]) - 1
            if steps > 0:
                try:
                    dec[i] = unit.curve.run_cost(1, int(r.p[i]), steps)
                except CapacityError:
                    dec[i] = np.inf
        decode_kv_s = np.zeros(r.n)
        weights_s = 0.0
        floor = unit.dm.decode_stream_floor(self.plan.model)
        if floor is not None:
            steps_f = r.steps
            # A step reads the sequence's cache and its new token: Σ_{k=p}^{p+o-2} (k + 1).
            positions = steps_f * (r.p + 1) + steps_f * (steps_f - 1) / 2.0
            decode_kv_s = positions * floor.kv_bytes_per_token / floor.bw_bytes_per_s
            weights_s = floor.shared_weight_bytes / floor.bw_bytes_per_s
        table = CostTable(
            prefill_s=pre[inverse, 0],
            decode_s=dec[:, 0],
            prefill_j=pre[inverse, 1],
            decode_j=dec[:, 1],
            prefill_compute_s=pre[inverse, 2] / rate if rate else np.zeros(r.n),
            decode_kv_s=decode_kv_s,
            weights_s=weights_s,
            idle_w=float(unit.idle_w),
            floor_w=unit.dm.floor_power_w(),
        )
        self._tables[key] = table
        self.seconds += time.perf_counter() - t0
        return table

    def placements(self, sig: SignatureLike, tp: int | None = None) -> tuple[DevicePlacement, ...]:
        """One placement per filled role of ``sig`` (count 1; ``tp`` for the policy's
        tensor-parallel role)."""
        tp_role = policy_traits(sig.policy).tensor_parallel_role
        return tuple(
            DevicePlacement(
                self.plan.devices[e].device,
                tp if tp is not None and role == tp_role else 1,
                self.plan.devices[e].runtime,
                role,
            )
            for role, e in sig.roles
        )

    def fit(self, sig: Signature, tp: int | None = None) -> str | None:
        """Why the engine's constructors reject this signature (None if they accept it);
        ``tp``: the GPU count of a tensor-parallel policy."""
        return self._fit(sig, tp)[0]

    def fitted(self, sig: Signature, tp: int | None = None) -> Any:
        """What the policy's ``screen_fit`` returned for an accepted signature (the state its
        ``screen_bounds`` needs, e.g. Neo's stage costs)."""
        why, state = self._fit(sig, tp)
        if why is not None:
            raise SpecError("policy", "the configuration does not fit; it has no fitted state")
        return state

    def _fit(self, sig: Signature, tp: int | None) -> tuple[str | None, Any]:
        key = (sig.policy, sig.options, sig.roles, tp)
        hit = self._fits.get(key)
        if hit is None:
            cls = get_policy(sig.policy)
            opts = cls.resolve_options(dict(sig.options))
            try:
                hit = (None, cls.screen_fit(self, sig, opts, tp))
            except CapacityError as exc:
                hit = (f"memory: {exc.message}", None)
            except SpecError as exc:
                hit = (f"invalid: {exc.field}: {exc.message}", None)
            self._fits[key] = hit
        return hit


_NO_ROOM = "memory: a request's prefill or decode exceeds the device memory"


# --- the queueing bound ----------------------------------------------------------------------


def _partitions(a: np.ndarray, horizon: float) -> list[np.ndarray]:
    """Window boundaries of several partitions of ``[a_0, a_last + horizon]``: dyadic
    levels down to windows of about twice the horizon, each also shifted by half a window."""
    lo = float(a[0])
    span = float(a[-1]) - lo + horizon
    if not span > 0:
        return [np.array([lo, lo + max(horizon, 1e-9)])]
    levels = 0
    if horizon > 0:
        levels = int(min(MAX_LEVELS, max(0, math.floor(math.log2(span / (2 * horizon))))))
    out = []
    for level in range(levels + 1):
        k = 2**level
        b = lo + span * np.arange(k + 1) / k
        out.append(b)
        if level:
            half = span / k / 2
            out.append(np.concatenate(([lo], b[:-1] + half, [lo + span])))
    return out


def late_by_capacity(
    a: np.ndarray,
    h: np.ndarray,
    work: WorkFn,
    candidate: np.ndarray,
    cmax: int,
    partitions: Sequence[np.ndarray],
) -> np.ndarray:
    """Fewest late requests with ``c`` devices of capacity, for ``c = 0 .. cmax``.

    A request ``i`` that is on time must have ``work(i, end of its window)`` done inside
    ``[a_i, a_i + h_i]``. Windows of a partition are disjoint, so per window at most the
    cheapest works that fit ``c × |E_j|`` are on time; the window's other candidates are
    late whatever the schedule. Returns the maximum over ``partitions`` of the late count
    among ``candidate`` requests (requests late anyway are the caller's to add).
    """
    idx_all = np.flatnonzero(candidate)
    best = np.zeros(cmax + 1, dtype=np.int64)
    if idx_all.size == 0:
        return best
    ai = a[idx_all]
    hi = h[idx_all]
    for b in partitions:
        nw = len(b) - 1
        j = np.searchsorted(b, ai, side="right") - 1
        inside = (j >= 0) & (j < nw)
        j = np.where(inside, j, 0)
        end = b[j + 1]
        member = inside & (ai + hi <= end)
        if not np.any(member):
            continue
        jj = j[member]
        w = work(idx_all[member], end[member]) * (1.0 - SLACK)
        length = (b[jj + 1] - b[jj]) * (1.0 + SLACK)
        order = np.lexsort((w, jj))
        ws = w[order]
        gs = jj[order]
        cs = np.cumsum(ws)
        first = np.empty(len(gs), dtype=bool)
        first[0] = True
        first[1:] = gs[1:] != gs[:-1]
        start = np.maximum.accumulate(np.where(first, np.arange(len(gs)), 0))
        within = cs - (cs - ws)[start]
        need = np.clip(np.ceil(within / length[order]), 0, cmax + 1).astype(np.int64)
        on_time = np.cumsum(np.bincount(need, minlength=cmax + 2))[: cmax + 1]
        best = np.maximum(best, len(ws) - on_time)
    return best


# --- the screen ------------------------------------------------------------------------------


class Screen:
    """The analytic screen of one plan on one request set (one load level). It is the
    :class:`~simulations.core.screening.BoundContext` a policy's ``screen_bounds`` sees."""

    def __init__(self, plan: PlanSpec, requests: RequestSet, cache: CostCache) -> None:
        self.plan = plan
        self.cache = cache
        self.requests = requests
        self.req = Requests.of(requests)
        self._memo: dict[tuple[Any, ...], np.ndarray] = {}
        self._policy = ""
        self.duration = float(self.req.a[-1] - self.req.a[0])

    # -- what a policy's bounds may use ------------------------------------------------

    @property
    def model(self) -> ModelSpec:
        """The plan's model."""
        return self.plan.model

    @property
    def targets(self) -> Targets:
        """The plan's targets."""
        return self.plan.targets

    def device(self, entry: int) -> tuple[DeviceSpec, RuntimeProfile]:
        """The device and runtime of device entry ``entry``."""
        return self.cache.device(entry)

    def unit(self, entry: int, settings: Mapping[str, Any] | None = None) -> Unit:
        """See :meth:`CostCache.unit`."""
        return self.cache.unit(entry, settings)

    def placements(self, sig: SignatureLike, tp: int | None = None) -> tuple[DevicePlacement, ...]:
        """See :meth:`CostCache.placements`."""
        return self.cache.placements(sig, tp)

    def table(self, entry: int, settings: Mapping[str, Any] | None = None) -> CostTable:
        """See :meth:`CostCache.table`."""
        return self.cache.table(entry, settings)

    def table_of(self, key: tuple[Any, ...], make_unit: Callable[[], Unit]) -> CostTable:
        """See :meth:`CostCache.table_of` (``key`` is the policy's own)."""
        return self.cache.table_of(("policy", self._policy, *key), make_unit)

    def late(
        self,
        memo_key: tuple[Any, ...],
        h: np.ndarray,
        work: WorkFn,
        candidate: np.ndarray,
        cmax: int,
    ) -> np.ndarray:
        """Fewest late requests for each capacity ``0 .. cmax`` (non-candidates are late
        anyway): :func:`late_by_capacity` over this load level's partitions, memoised per
        policy under ``memo_key``."""
        key = (self._policy, *memo_key, cmax)
        hit = self._memo.get(key)
        if hit is None:
            horizon = float(np.median(h[candidate])) if np.any(candidate) else 0.0
            parts = _partitions(self.req.a, horizon)
            hit = late_by_capacity(self.req.a, h, work, candidate, cmax, parts)
            hit = hit + int(np.count_nonzero(~candidate))
            self._memo[key] = hit
        return hit

    def both_checks(
        self,
        b: Bounds,
        key: tuple[Any, ...],
        prefill_s: np.ndarray,
        per_step_s: np.ndarray,
        work_s: np.ndarray,
        cols: tuple[int, ...],
        cmax: int,
    ) -> None:
        """Requests meeting a TTFT and a TPOT target finish by ``a + T + (o - 1) τ``: their
        ``work_s`` must fit the devices ``cols`` in time (late budget: both allowances)."""
        r = self.req
        for q, ttft_ms in self.targets.ttft():
            ttft_s = ttft_ms / 1e3
            for q2, tpot_ms in self.targets.tpot():
                tpot_s = tpot_ms / 1e3
                cand = (prefill_s <= ttft_s * (1 + SLACK)) & (per_step_s <= tpot_s * (1 + SLACK))
                late = self.late(
                    (*key, ttft_s, tpot_s),
                    ttft_s + r.steps * tpot_s,
                    lambda idx, end: work_s[idx],
                    cand,
                    cmax,
                )
                allowed = allowed_late(r.n, q) + allowed_late(int(r.multi.sum()), q2)
                b.checks.append(LateCheck("decode_queue", allowed, late, cols))

    def per_step(self, decode_s: np.ndarray) -> np.ndarray:
        """Each request's mean decode-step time (0 for single-token requests)."""
        steps = self.req.steps
        return np.divide(decode_s, steps, out=np.zeros(len(steps)), where=steps > 0)

    def whole_requests(
        self, t: CostTable, max_batch: int, key: tuple[Any, ...], cmax: int
    ) -> Bounds | None:
        """Bounds of units that each prefill and decode whole requests with the engine's
        batching (count column 0, at most ``cmax`` units; None when a request does not fit)."""
        if not t.finite:
            return None
        r = self.req
        per_step = self.per_step(t.decode_s)
        b = Bounds(
            ttft_req=t.prefill_s,
            tpot_req=per_step[r.multi],
            finish_req=t.prefill_s + t.decode_s,
        )
        if max_batch == 1:
            serve = t.prefill_s + t.decode_s
            for q, ttft_ms in self.targets.ttft():
                ttft_s = ttft_ms / 1e3

                def work(idx: np.ndarray, end: np.ndarray, ttft_s: float = ttft_s) -> np.ndarray:
                    # An on-time request starts by a + T − P and then holds its device.
                    return np.minimum(serve[idx], end - r.a[idx] - ttft_s + t.prefill_s[idx])

                late = self.late(
                    ("h1", *key, ttft_s),
                    np.full(r.n, ttft_s),
                    work,
                    t.prefill_s <= ttft_s * (1 + SLACK),
                    cmax,
                )
                b.checks.append(LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
            b.work.append((float(serve.sum()), (0,)))
            # Energy = Σ devices idle × span + Σ phases (joules − idle × seconds), exactly;
            # batch-1 phases are each request's own prefill and decode steps.
            b.power_w = (t.idle_w,)
            b.excess_j = float(
                np.sum(t.prefill_j - t.idle_w * t.prefill_s + t.decode_j - t.idle_w * t.decode_s)
            )
            return b
        work_s = t.prefill_compute_s + t.decode_memory_s(r.steps, max_batch)
        for q, ttft_ms in self.targets.ttft():
            ttft_s = ttft_ms / 1e3
            late = self.late(
                ("hb", *key, ttft_s),
                np.full(r.n, ttft_s),
                lambda idx, end: t.prefill_compute_s[idx],
                t.prefill_s <= ttft_s * (1 + SLACK),
                cmax,
            )
            b.checks.append(LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
        self.both_checks(b, ("hb", *key), t.prefill_s, per_step, work_s, (0,), cmax)
        b.work.append((float(work_s.sum()), (0,)))
        b.power_w = (t.floor_w,)
        return b

    def _util(self, work: float, capacity: np.ndarray) -> np.ndarray:
        if self.duration <= 0:
            return np.full(len(capacity), math.nan)
        return work / self.duration / capacity

    # -- evaluation ------------------------------------------------------------------

    def evaluate(self, group: Group) -> GroupScreen:
        """The verdict on every configuration of ``group``."""
        sig = group.signature
        self._policy = sig.policy
        tp_role = policy_traits(sig.policy).tensor_parallel_role
        if tp_role is not None:
            return self._evaluate_tensor_parallel(group, tp_role)
        n_cfg = len(group)
        fit = self.cache.fit(sig)
        if fit is not None:
            return GroupScreen.rejected(
                n_cfg, "memory" if fit.startswith("memory") else "invalid", fit
            )
        # the bounds are the policy's per engine unit: a data-parallel replica of
        # ``step`` devices (the space holds only whole replicas)
        step = replica_devices(sig)
        units = group.counts // step
        cmax = int(units.sum(axis=1).max())
        b = self._bounds(sig, None, cmax)
        if b is None:
            return GroupScreen.rejected(n_cfg, "memory", _NO_ROOM)
        if isinstance(b, SharedVerdict):
            return GroupScreen.shared(n_cfg, b)
        return self._verdict(b, units)

    def _bounds(self, sig: Signature, tp: int | None, cmax: int) -> Bounds | SharedVerdict | None:
        cls = get_policy(sig.policy)
        opts = cls.resolve_options(dict(sig.options))
        return cls.screen_bounds(self, sig, opts, self.cache.fitted(sig, tp), cmax, tp)

    def _evaluate_tensor_parallel(self, group: Group, tp_role: str) -> GroupScreen:
        """Systems whose tensor-parallel role's count (its GPUs) is the tensor-parallel
        degree of one server, which changes every per-request cost: each configuration is
        bounded on its own (one server each, count column 0 is 1)."""
        sig = group.signature
        col = [r for r, _ in sig.roles].index(tp_role)
        parts = []
        for i in range(len(group)):
            tp = int(group.counts[i, col])
            fit = self.cache.fit(sig, tp)
            if fit is not None:
                code = "memory" if fit.startswith("memory") else "invalid"
                parts.append(GroupScreen.rejected(1, code, fit))
                continue
            b = self._bounds(sig, tp, 1)
            if b is None:
                parts.append(GroupScreen.rejected(1, "memory", _NO_ROOM))
            elif isinstance(b, SharedVerdict):
                parts.append(GroupScreen.shared(1, b))
            else:
                parts.append(self._verdict(b, np.ones((1, 1), dtype=np.int64)))
        return GroupScreen.concat(parts)

    def _verdict(self, b: Bounds, counts: np.ndarray) -> GroupScreen:
        """Every configuration's verdict from the policy's bounds; ``counts`` are the
        configurations' servers per count column of the bounds."""
        n_cfg = len(counts)
        r = self.req
        targets = self.plan.targets
        reason = np.zeros(n_cfg, dtype=np.int64)

        def mark(mask: np.ndarray | bool, name: str) -> None:
            reason[(reason == 0) & mask] = REASON_CODE[name]

        def pct(values: np.ndarray, q: float) -> float:
            if not values.size:
                return math.nan
            return float(np.percentile(values, q)) * 1e3 * (1 - SLACK)

        ttft_ms = tpot_ms = math.nan
        for i, (q, limit) in enumerate(targets.ttft()):
            v = pct(b.ttft_req, q)
            ttft_ms = v if i == 0 else ttft_ms
            mark(v > limit, "ttft_alone")
        for i, (q, limit) in enumerate(targets.tpot()):
            v = pct(b.tpot_req, q)
            tpot_ms = v if i == 0 else tpot_ms
            mark(v > limit, "tpot_alone")
        late_first = np.zeros(n_cfg, dtype=np.int64)
        for k, chk in enumerate(b.checks):
            late = chk.late[counts[:, list(chk.cols)].sum(axis=1)]
            if k == 0 and chk.reason == "ttft_queue":
                late_first = late
            mark(late > chk.allowed, chk.reason)
        span = np.full(n_cfg, float(np.max(r.a + b.finish_req) - r.a[0]))
        util = np.zeros(n_cfg)
        for total, cols in b.work:
            devices = counts[:, list(cols)].sum(axis=1)
            span = np.maximum(span, total / devices)
            util = np.maximum(util, self._util(total, devices))
        span = span * (1 - SLACK)
        thr = r.tokens / np.maximum(span, 1e-300)
        if targets.min_throughput_tok_s is not None:
            mark(thr < targets.min_throughput_tok_s, "throughput")
        power = counts @ np.array(b.power_w, dtype=np.float64)
        energy = (power * span + b.excess_j) * (1 - SLACK)
        return GroupScreen(
            reason=reason,
            ttft_ms=np.full(n_cfg, ttft_ms),
            tpot_ms=np.full(n_cfg, tpot_ms),
            throughput_ub=thr,
            energy_lb=np.maximum(energy, 0.0) / r.tokens,
            late_lb=late_first,
            utilisation=util,
        )

    def evaluate_config(self, config: Config) -> dict[str, Any]:
        """The screen's figures for one configuration."""
        group = Group(
            config.signature,
            np.array([config.counts], dtype=np.int64),
            np.array([config.capex_usd]),
            np.array([config.power_w]),
        )
        return self.evaluate(group).row(0)


__all__ = [
    "REASONS",
    "REASON_TEXT",
    "SLACK",
    "CostCache",
    "CostTable",
    "GroupScreen",
    "Requests",
    "Screen",
    "allowed_late",
    "late_by_capacity",
]
