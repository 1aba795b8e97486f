"""The analytic screen: necessary conditions for a configuration to meet the targets.

The screen never simulates. From the device cost models it computes, once per device
entry, each request's service times (batch-1 prefill ``P``, batch-1 decode run ``D`` of its
``o - 1`` steps including any per-step host round trip, a compute-only prefill bound and a
memory-traffic decode bound for batched serving, and their energies) — exactly the
quantities the engine charges, from the same :class:`~simulations.core.engine.core.Unit`
curves. From these it derives, for every count combination of a signature at once
(numpy), bounds that the request-level engine can never beat on the *same finite request
set*:

* **Memory fit.** The engine's own constructors (``BatchingSim``, ``GlitchesSim``) are
  run on one device of each entry: if they raise ``CapacityError``, so would every
  simulation using that entry.
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

For reporting and ordering only (never for pruning), a steady-state utilisation estimate
(mean work per second over the devices' capacity) is computed too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.gpu import GpuModel
from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.shapes import LayerShapes
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import Unit, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies import get_policy
from simulations.core.policies.glitches import (
    GlitchesPolicy,
)
from simulations.core.policies.h2m2 import H2M2Policy
from simulations.core.policies.h2m2.mapping import MULTI_HBM_DEVICES
from simulations.core.policies.neo.costs import StageCosts
from simulations.core.policies.neo.policy import NeoBasePolicy, engine_memory_utilization
from simulations.core.policies.neo.tp import TensorParallelGpu, shard_model
from simulations.core.spec import DevicePlacement, SystemSpec

from .space import Config, Group, Signature
from .spec import PlanSpec, policy_traits

#: Relative slack applied to every bound in the optimistic direction (float rounding).
SLACK = 1e-6

#: Why the screen ruled a configuration out (index 0: it did not).
REASONS = (
    "",
    "invalid",
    "memory",
    "ttft_alone",
    "tpot_alone",
    "ttft_queue",
    "decode_queue",
    "throughput",
)
REASON_TEXT = {
    "invalid": "not a valid system for its policy",
    "memory": "does not fit device memory (weights, or the longest request's KV cache)",
    "ttft_alone": "misses the TTFT target even without queueing (prefill time alone)",
    "tpot_alone": "misses the TPOT target even without queueing (decode step time alone)",
    "ttft_queue": "too little prefill capacity: too many requests must wait past the TTFT "
    "target (finite-horizon work bound)",
    "decode_queue": "too little decode capacity: the work of the requests that must meet "
    "both latency targets exceeds the devices' time (finite-horizon work bound)",
    "throughput": "cannot reach the minimum throughput",
}
_CODE = {name: i for i, name in enumerate(REASONS)}

#: Most dyadic levels of windows the queueing bound tries.
MAX_LEVELS = 9


def allowed_late(n: int, q: float) -> int:
    """Most values above a target that still let numpy's linear ``q``-th percentile of
    ``n`` values stay at or below it: more than this many puts the order statistic the
    percentile starts from above the target. (One more may still pass, by interpolation;
    the screen stays optimistic.)"""
    if n <= 0:
        return 0
    h = (n - 1) * q / 100.0
    return n - math.floor(h - 1e-9) - 1


# --- per-request costs -----------------------------------------------------------------------


@dataclass
class CostTable:
    """Service times and energies of every request on one device entry.

    Arrays are over the plan's requests: ``prefill_s`` batch-1 prefill seconds,
    ``decode_s`` batch-1 decode seconds of the ``o - 1`` decode steps (host round trip
    included where the policies add it), ``prefill_j``/``decode_j`` their joules;
    ``prefill_compute_s`` the compute-only floor of a request's share of a packed prefill
    (its FLOPs at the achieved compute rate); ``decode_kv_s`` plus ``steps × weights_s / B``
    the memory-traffic floor of its share of batched decode steps with at most ``B``
    sequences (GPUs; zero where no such floor is modelled). A phase the device model
    refuses (its memory check) costs +inf: the engine raises whenever it runs it there.
    """

    prefill_s: np.ndarray
    decode_s: np.ndarray
    prefill_j: np.ndarray
    decode_j: np.ndarray
    prefill_compute_s: np.ndarray
    decode_kv_s: np.ndarray
    weights_s: float
    idle_w: float
    floor_w: float

    def decode_memory_s(self, steps: np.ndarray, max_batch: int) -> np.ndarray:
        """Floor of each request's share of batched decode time (≤ ``max_batch`` per step)."""
        return self.decode_kv_s + steps * (self.weights_s / max_batch)

    @property
    def finite(self) -> bool:
        """Whether the device model accepts every request's prefill and decode."""
        return bool(np.all(np.isfinite(self.prefill_s)) and np.all(np.isfinite(self.decode_s)))


@dataclass
class Requests:
    """The plan's requests as arrays (lengths after context clipping)."""

    a: np.ndarray
    p: np.ndarray
    o: np.ndarray
    multi: np.ndarray
    tokens: int

    @classmethod
    def of(cls, rs: RequestSet) -> Requests:
        """Arrays of a drawn request set."""
        p = np.asarray(rs.input_tokens, dtype=np.int64)
        o = np.asarray(rs.output_tokens, dtype=np.int64)
        return cls(np.asarray(rs.arrival_s, dtype=np.float64), p, o, o > 1, int(o.sum()))

    @property
    def n(self) -> int:
        """Number of requests."""
        return len(self.a)

    @property
    def steps(self) -> np.ndarray:
        """Decode steps of each request (``o - 1``), as floats."""
        return (self.o - 1).astype(np.float64)


class CostCache:
    """Cost tables and memory-fit verdicts, shared by every screen of one plan (they depend
    on the request lengths only, not on arrivals)."""

    def __init__(self, plan: PlanSpec, requests: RequestSet) -> None:
        self.plan = plan
        self.requests = requests
        self.req = Requests.of(requests)
        self._tables: dict[tuple[int, int | None, int | None], CostTable] = {}
        self._stages: dict[tuple[Any, ...], tuple[StageCosts, int]] = {}
        self._fits: dict[tuple[Any, ...], str | None] = {}
        self.seconds = 0.0

    def unit(self, entry: int, prefetch: int | None, tp: int | None = None) -> Unit:
        """One engine unit of ``entry`` built as the policies build it (the device model's
        settings, e.g. an FPGA's prefetch ratio, and its host sampling per decode step;
        with ``tp``, the ``gpu-only`` policy's tensor-parallel group of ``tp`` GPUs);
        CapacityError when the weights do not fit."""
        choice = self.plan.devices[entry]
        model = self.plan.model
        if tp is not None:
            inner = build_device_model(choice.device, choice.runtime)
            if not isinstance(inner, GpuModel):
                raise SpecError("devices", "a tensor-parallel group needs the GPU model")
            shard_model(model, tp)  # SpecError when the heads do not divide
            dm: DeviceModel = inner if tp == 1 else TensorParallelGpu(inner, tp)
            return Unit(0, 0, choice.device, choice.runtime, "gpu", dm, model, timeline_cap=0)
        placement = DevicePlacement(choice.device, 1, choice.runtime, "")
        settings = {} if prefetch is None else {"prefetch_ratio": prefetch}

        def factory(device: Any, runtime: Any) -> DeviceModel:
            return build_device_model(device, runtime).with_settings(settings)

        def overhead(p: DevicePlacement, dm: DeviceModel) -> float:
            return dm.host_sampling_s(model)

        return build_units([placement], model, factory, step_overhead_s=overhead, timeline_cap=0)[0]

    def table(self, entry: int, prefetch: int | None, tp: int | None = None) -> CostTable:
        """Costs of every request on ``entry`` (``prefetch``: FPGA prefetch ratio; ``tp``:
        a tensor-parallel group of that many GPUs as one unit)."""
        key = (entry, self._setting_key(entry, prefetch), tp)
        hit = self._tables.get(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        unit = self.unit(entry, prefetch, tp)
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

    def _setting_key(self, entry: int, prefetch: int | None) -> int | None:
        """The prefetch ratio as far as ``entry``'s device model reads it (tables of models
        that declare no such setting are shared)."""
        choice = self.plan.devices[entry]
        dm = build_device_model(choice.device, choice.runtime)
        return prefetch if any(s.name == "prefetch_ratio" for s in dm.settings) else None

    def fit(self, sig: Signature, tp: int | None = None) -> str | None:
        """Why the engine's constructors reject this signature (None if they accept it);
        ``tp``: the GPU count of a tensor-parallel policy."""
        key = (sig.policy, sig.options, sig.roles, tp)
        if key not in self._fits:
            self._fits[key] = self._fit(sig, tp)
        return self._fits[key]

    def stages(self, sig: Signature, tp: int) -> tuple[StageCosts, int]:
        """The exact stage costs of a Neo-style node and its ``max_batch`` (after
        :meth:`fit` accepted it)."""
        if self.fit(sig, tp) is not None:
            raise SpecError("policy", "the node does not fit; it has no stage costs")
        return self._stages[(sig.policy, sig.options, sig.roles, tp)]

    def _placements(self, sig: Signature, tp: int | None) -> tuple[DevicePlacement, ...]:
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

    def h2m2_hardware(self, sig: Signature) -> tuple[H2M2Hardware, LayerShapes]:
        """The H2M2 memory system of a signature as the policy builds it, and the layer
        shapes at its runtime's precisions (chips do not enter the screen's bounds)."""
        placements = self._placements(sig, None)
        hw = H2M2Hardware.from_placements(placements)
        return hw, LayerShapes.of(self.plan.model, placements[0].runtime)

    def _h2m2_fit(self, sig: Signature, opts: dict[str, Any]) -> None:
        """CapacityError when the weights alone exceed every memory the mapping may use
        (both tiers, the ``hierarchical`` system's HBM caching the LPDDR included; §5.5's
        8-HBM: eight HBM stacks): no mapping fits at any batch."""
        hw, shapes = self.h2m2_hardware(sig)
        weights = shapes.n_layers * shapes.weight_bytes_per_layer
        if opts["mapping"] == "8-hbm":
            room = hw.hbm.capacity_bytes * MULTI_HBM_DEVICES
        else:
            room = hw.hbm.capacity_bytes + hw.lpddr.capacity_bytes
        if weights > room:
            raise CapacityError(
                "devices",
                f"{weights / 1e9:.1f} GB of weights exceed the {room / 1e9:.1f} GB the "
                f"{opts['mapping']} mapping can use",
            )

    def _fit(self, sig: Signature, tp: int | None) -> str | None:
        opts = get_policy(sig.policy).resolve_options(dict(sig.options))
        try:
            if sig.policy in ("neo", "fastdecode+"):
                assert tp is not None
                policy = get_policy(sig.policy)()
                assert isinstance(policy, NeoBasePolicy)
                system = SystemSpec("fit", sig.policy, self._placements(sig, tp), opts)
                sim = policy.build(system, self.plan.model, self.requests)
                key = (sig.policy, sig.options, sig.roles, tp)
                self._stages[key] = (sim.costs, int(opts["max_batch"]))
            elif sig.policy == "gpu-only":
                assert tp is not None
                # The construction GpuOnlyPolicy.simulate runs before simulating.
                entry = sig.roles[0][1]
                unit = self.unit(entry, None, tp)
                dm = unit.dm
                inner = dm.inner if isinstance(dm, TensorParallelGpu) else dm
                assert isinstance(inner, GpuModel)
                shard = shard_model(self.plan.model, tp)
                BatchingSim(
                    self.requests,
                    [unit],
                    max_batch=int(opts["max_batch"]),
                    block_size=int(opts["block_size"]),
                    memory_utilization=engine_memory_utilization(inner, shard, opts),
                    max_batched_tokens=int(opts["max_batched_tokens"]),
                )
            elif sig.policy == "h2m2":
                self._h2m2_fit(sig, opts)
            elif sig.policy == "homogeneous":
                BatchingSim(
                    self.requests,
                    [self.unit(sig.roles[0][1], int(opts["prefetch_ratio"]))],
                    max_batch=int(opts["max_batch"]),
                    block_size=int(opts["block_size"]),
                    memory_utilization=float(opts["memory_utilization"]),
                    max_batched_tokens=int(opts["max_batched_tokens"]),
                )
            elif sig.policy == "glitches":
                placements = tuple(
                    DevicePlacement(
                        self.plan.devices[e].device, 1, self.plan.devices[e].runtime, role
                    )
                    for role, e in sig.roles
                )
                system = SystemSpec("fit", "glitches", placements, opts)
                GlitchesPolicy().build_sim(system, self.plan.model, self.requests)
            else:  # pragma: no cover - parse_plan admits screened policies only
                raise SpecError("policy", f"no screen for {sig.policy!r}")
        except CapacityError as exc:
            return f"memory: {exc.message}"
        except SpecError as exc:
            return f"invalid: {exc.field}: {exc.message}"
        return None


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


WorkFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


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


# --- results ---------------------------------------------------------------------------------


@dataclass
class GroupScreen:
    """The screen's verdict on every configuration of a group.

    ``reason`` indexes :data:`REASONS` (0: possibly feasible). Per configuration:
    ``ttft_ms``/``tpot_ms`` floors of the first TTFT/TPOT target's percentile (``nan``
    without one), ``throughput_ub`` (tokens/s), ``energy_lb`` (J per generated token),
    ``late_lb`` (fewest requests missing the first TTFT target), ``utilisation`` (a
    steady-state estimate of the busiest resource, for reporting only).
    """

    reason: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    throughput_ub: np.ndarray
    energy_lb: np.ndarray
    late_lb: np.ndarray
    utilisation: np.ndarray
    detail: str = ""
    #: Per-configuration details (when they differ within the group), else ``detail``.
    details: tuple[str, ...] = ()

    @classmethod
    def concat(cls, parts: Sequence[GroupScreen]) -> GroupScreen:
        """The verdicts of consecutive configurations, in order (details joined)."""
        details = list(dict.fromkeys(p.detail for p in parts if p.detail))
        return cls(
            np.concatenate([p.reason for p in parts]),
            np.concatenate([p.ttft_ms for p in parts]),
            np.concatenate([p.tpot_ms for p in parts]),
            np.concatenate([p.throughput_ub for p in parts]),
            np.concatenate([p.energy_lb for p in parts]),
            np.concatenate([p.late_lb for p in parts]),
            np.concatenate([p.utilisation for p in parts]),
            "; ".join(details),
            tuple(
                p.details[i] if p.details else p.detail for p in parts for i in range(len(p.reason))
            ),
        )

    @classmethod
    def rejected(cls, n: int, code: str, detail: str) -> GroupScreen:
        """Every configuration ruled out for the same reason."""
        nan = np.full(n, math.nan)
        return cls(
            np.full(n, _CODE[code], dtype=np.int64),
            nan,
            nan.copy(),
            nan.copy(),
            nan.copy(),
            np.zeros(n, dtype=np.int64),
            nan.copy(),
            detail,
        )

    @property
    def possible(self) -> np.ndarray:
        """Mask of configurations the screen lets through."""
        return self.reason == 0

    def row(self, i: int) -> dict[str, Any]:
        """The screen's figures for configuration ``i`` (JSON-friendly)."""

        def num(x: Any) -> float | None:
            v = float(x)
            return v if math.isfinite(v) else None

        code = REASONS[int(self.reason[i])]
        out: dict[str, Any] = {
            "verdict": code or "possible",
            "ttft_floor_ms": num(self.ttft_ms[i]),
            "tpot_floor_ms": num(self.tpot_ms[i]),
            "throughput_ceiling_tok_s": num(self.throughput_ub[i]),
            "energy_floor_j_per_token": num(self.energy_lb[i]),
            "late_requests_floor": int(self.late_lb[i]),
            "utilisation_estimate": num(self.utilisation[i]),
        }
        if code in ("memory", "invalid"):
            out["detail"] = self.details[i] if self.details else self.detail
        return out


@dataclass(frozen=True)
class _LateCheck:
    """Infeasible when ``late[capacity] > allowed``; capacity is the sum of the count
    columns ``cols`` (devices that can do the work)."""

    reason: str
    allowed: int
    late: np.ndarray
    cols: tuple[int, ...]


@dataclass
class _Bounds:
    """What a policy's model hands to the count-level evaluation."""

    ttft_req: np.ndarray  # per-request TTFT floor (s)
    tpot_req: np.ndarray  # per-request TPOT floor (s), multi-token requests only
    finish_req: np.ndarray  # per-request arrival-to-finish floor (s)
    checks: list[_LateCheck] = field(default_factory=list)
    # (total work in device-seconds, count columns that can do it): span ≥ work / devices
    work: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    # Energy ≥ Σ_col counts × power[col] × span + excess (J)
    power_w: tuple[float, ...] = ()
    excess_j: float = 0.0


def _static_batch_starts(a: np.ndarray, hold: np.ndarray, bmax: int) -> np.ndarray:
    """A floor on when the static batch of each request starts, for an FCFS batcher taking
    at most ``bmax`` arrived requests (``a`` sorted) into a batch that lasts at least
    ``hold[k]`` for each request ``k`` it holds: ``B_i = max(a_i, B_{i-1}, max_{k ≤ i -
    bmax} B_k + hold_k)`` (the requests ``k..i`` cannot share one batch)."""
    n = len(a)
    start = np.empty(n)
    done = -math.inf  # latest B_k + hold_k over k ≤ i - bmax
    prev = -math.inf
    for i in range(n):
        k = i - bmax
        if k >= 0:
            done = max(done, float(start[k] + hold[k]))
        prev = max(float(a[i]), prev, done)
        start[i] = prev
    return start


class Screen:
    """The analytic screen of one plan on one request set (one load level)."""

    def __init__(self, plan: PlanSpec, requests: RequestSet, cache: CostCache) -> None:
        self.plan = plan
        self.cache = cache
        self.req = Requests.of(requests)
        self._memo: dict[tuple[Any, ...], np.ndarray] = {}
        self.duration = float(self.req.a[-1] - self.req.a[0])

    def _late(
        self,
        memo_key: tuple[Any, ...],
        h: np.ndarray,
        work: WorkFn,
        candidate: np.ndarray,
        cmax: int,
    ) -> np.ndarray:
        """Fewest late requests for each capacity (non-candidates are late anyway)."""
        key = (*memo_key, cmax)
        hit = self._memo.get(key)
        if hit is None:
            horizon = float(np.median(h[candidate])) if np.any(candidate) else 0.0
            parts = _partitions(self.req.a, horizon)
            hit = late_by_capacity(self.req.a, h, work, candidate, cmax, parts)
            hit = hit + int(np.count_nonzero(~candidate))
            self._memo[key] = hit
        return hit

    def _both_checks(
        self,
        b: _Bounds,
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
        for q, ttft_ms in self.plan.targets.ttft():
            ttft_s = ttft_ms / 1e3
            for q2, tpot_ms in self.plan.targets.tpot():
                tpot_s = tpot_ms / 1e3
                cand = (prefill_s <= ttft_s * (1 + SLACK)) & (per_step_s <= tpot_s * (1 + SLACK))
                late = self._late(
                    (*key, ttft_s, tpot_s),
                    ttft_s + r.steps * tpot_s,
                    lambda idx, end: work_s[idx],
                    cand,
                    cmax,
                )
                allowed = allowed_late(r.n, q) + allowed_late(int(r.multi.sum()), q2)
                b.checks.append(_LateCheck("decode_queue", allowed, late, cols))

    def _per_step(self, decode_s: np.ndarray) -> np.ndarray:
        steps = self.req.steps
        return np.divide(decode_s, steps, out=np.zeros(len(steps)), where=steps > 0)

    # -- policies --------------------------------------------------------------------

    def _homogeneous(self, sig: Signature, cmax: int) -> _Bounds | None:
        """Every device serves whole requests (one entry, count column 0)."""
        opts = get_policy("homogeneous").resolve_options(dict(sig.options))
        entry = sig.roles[0][1]
        t = self.cache.table(entry, int(opts["prefetch_ratio"]))
        return self._whole_requests(t, int(opts["max_batch"]), (entry, sig.options), cmax)

    def _gpu_only(self, sig: Signature, tp: int) -> _Bounds | None:
        """``gpu-only``: the engine's continuous batching on one unit, the tensor-parallel
        group of ``tp`` GPUs (one server: capacity column 0 is 1)."""
        opts = get_policy("gpu-only").resolve_options(dict(sig.options))
        entry = sig.role_entry("gpu")
        assert entry is not None
        t = self.cache.table(entry, None, tp)
        return self._whole_requests(t, int(opts["max_batch"]), ("tp", entry, sig.options, tp), 1)

    def _whole_requests(
        self, t: CostTable, max_batch: int, key: tuple[Any, ...], cmax: int
    ) -> _Bounds | None:
        """Units that each prefill and decode whole requests (the engine's batching)."""
        if not t.finite:
            return None
        r = self.req
        per_step = self._per_step(t.decode_s)
        b = _Bounds(
            ttft_req=t.prefill_s,
            tpot_req=per_step[r.multi],
            finish_req=t.prefill_s + t.decode_s,
        )
        if max_batch == 1:
            serve = t.prefill_s + t.decode_s
            for q, ttft_ms in self.plan.targets.ttft():
                ttft_s = ttft_ms / 1e3

                def work(idx: np.ndarray, end: np.ndarray, ttft_s: float = ttft_s) -> np.ndarray:
                    # An on-time request starts by a + T − P and then holds its device.
                    return np.minimum(serve[idx], end - r.a[idx] - ttft_s + t.prefill_s[idx])

                late = self._late(
                    ("h1", *key, ttft_s),
                    np.full(r.n, ttft_s),
                    work,
                    t.prefill_s <= ttft_s * (1 + SLACK),
                    cmax,
                )
                b.checks.append(_LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
            b.work.append((float(serve.sum()), (0,)))
            # Energy = Σ devices idle × span + Σ phases (joules − idle × seconds), exactly;
            # batch-1 phases are each request's own prefill and decode steps.
            b.power_w = (t.idle_w,)
            b.excess_j = float(
                np.sum(t.prefill_j - t.idle_w * t.prefill_s + t.decode_j - t.idle_w * t.decode_s)
            )
            return b
        work_s = t.prefill_compute_s + t.decode_memory_s(r.steps, max_batch)
        for q, ttft_ms in self.plan.targets.ttft():
            ttft_s = ttft_ms / 1e3
            late = self._late(
                ("hb", *key, ttft_s),
                np.full(r.n, ttft_s),
                lambda idx, end: t.prefill_compute_s[idx],
                t.prefill_s <= ttft_s * (1 + SLACK),
                cmax,
            )
            b.checks.append(_LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
        self._both_checks(b, ("hb", *key), t.prefill_s, per_step, work_s, (0,), cmax)
        b.work.append((float(work_s.sum()), (0,)))
        b.power_w = (t.floor_w,)
        return b

    def _glitches(self, sig: Signature, cmax: int) -> _Bounds | None:
        """GPU prefill (count column 0), FPGA decode (column 1, optional)."""
        opts = get_policy("glitches").resolve_options(dict(sig.options))
        prefetch = int(opts["prefetch_ratio"])
        g_entry = sig.role_entry("prefill")
        f_entry = sig.role_entry("decode")
        assert g_entry is not None
        g = self.cache.table(g_entry, None)
        f = self.cache.table(f_entry, prefetch) if f_entry is not None else None
        gpu_decode = bool(opts["gpu_decode"]) or f is None
        decoders = [x for x in (f, g if gpu_decode else None) if x is not None]
        decode_min = np.min(np.stack([x.decode_s for x in decoders]), axis=0)
        if not (np.all(np.isfinite(g.prefill_s)) and np.all(np.isfinite(decode_min))):
            return None
        r = self.req
        per_step = self._per_step(decode_min)
        b = _Bounds(
            ttft_req=g.prefill_s,
            tpot_req=per_step[r.multi],
            finish_req=g.prefill_s + decode_min,
        )
        cols_all = (0, 1) if f is not None else (0,)
        for q, ttft_ms in self.plan.targets.ttft():
            ttft_s = ttft_ms / 1e3
            late = self._late(
                ("g", g_entry, ttft_s),
                np.full(r.n, ttft_s),
                lambda idx, end: g.prefill_s[idx],
                g.prefill_s <= ttft_s * (1 + SLACK),
                cmax,
            )
            b.checks.append(_LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
        key = ("g", g_entry, f_entry, prefetch, gpu_decode)
        work_s = g.prefill_s + decode_min
        self._both_checks(b, (*key, "all"), g.prefill_s, per_step, work_s, cols_all, cmax)
        if f is not None and not gpu_decode:
            # Only the FPGAs decode: their time alone must hold the decodes.
            per_f = self._per_step(f.decode_s)
            self._both_checks(b, (*key, "fpga"), g.prefill_s, per_f, f.decode_s, (1,), cmax)
        b.work.append((float(g.prefill_s.sum()), (0,)))
        b.work.append((float(work_s.sum()), cols_all))
        # Energy = Σ devices idle × span + Σ phases (joules − idle × seconds), exactly: each
        # request is prefilled once on a GPU and decoded step by step on one device.
        excess_d = np.min(
            np.stack(
                [
                    np.where(np.isfinite(x.decode_s), x.decode_j - x.idle_w * x.decode_s, np.inf)
                    for x in decoders
                ]
            ),
            axis=0,
        )
        b.power_w = (g.idle_w,) + ((f.idle_w,) if f is not None else ())
        b.excess_j = float(np.sum(g.prefill_j - g.idle_w * g.prefill_s + excess_d))
        return b

    def _neo(self, sig: Signature, tp: int) -> _Bounds:
        """``neo`` and ``fastdecode+``: one node whose iterations run back to back (one
        server: capacity column 0 is 1), each lasting at least its GPU linear stage.

        From :class:`~simulations.core.policies.neo.sim.NeoSim`: an iteration lasts at least
        ``L × (T_l0 + T_ga0)`` plus its pre/post-layer (two-batch: ``max{T_l0, T_ca1} +
        max{T_l1 + T_ga0, T_ca0}`` per layer is at least that, and at least ``T_l + T_ca``
        of the sub-batch holding a CPU decode). Stage times are monotone in tokens,
        sequences and attended positions, so:

        * a request's TTFT is at least the iteration holding its prompt alone,
          ``L × (T_l(p) + T_pa(p)) + pre_post(p, 1)``;
        * each of its decode tokens comes from a later iteration of at least
          ``L × (T_l(1) + min(decode attention on GPU or CPU, a re-prefill's attention at
          the prompt's length)) + pre_post(1, 1)``;
        * work per iteration: its prompts' compute (the linear and prefill-attention
          FLOPs at the GPU's achieved rate, additive over packed prompts) fits in it, and so
          does a share ``1 / max_batch`` of the weight-streaming floor ``L × T_l(1) +
          pre_post(1, 1)`` per decode token (at most ``max_batch`` requests are resident).
          The two are separate bounds (each alone fits the iteration).
        """
        costs, max_batch = self.cache.stages(sig, tp)
        r = self.req
        n_layers = costs.n_layers
        lens, inverse = np.unique(r.p, return_inverse=True)
        pre = np.empty(len(lens))
        step = np.empty(len(lens))
        comp = np.empty(len(lens))
        floor1 = n_layers * costs.linear_layer_s(1) + costs.pre_post_s(1, 1)
        for k, x in enumerate(lens):
            p = int(x)
            pa = costs.prefill_attn_layer_s([p])
            pre[k] = n_layers * (costs.linear_layer_s(p) + pa) + costs.pre_post_s(p, 1)
            # FastDecode+ keeps no KV cache on the GPU: its decodes attend on the CPU.
            attn = (
                pa if sig.policy == "fastdecode+" else min(pa, costs.gpu_decode_attn_layer_s(1, p))
            )
            if costs.cpu is not None:
                attn = min(attn, costs.cpu_attn_layer_s(1, p))
            step[k] = floor1 + n_layers * attn
            comp[k] = n_layers * costs.prompt_compute_layer_s(p)
        prefill_s = pre[inverse]
        per_step = np.where(r.multi, step[inverse], 0.0)
        decode_s = per_step * r.steps
        b = _Bounds(
            ttft_req=prefill_s,
            tpot_req=per_step[r.multi],
            finish_req=prefill_s + decode_s,
        )
        compute_s = comp[inverse]
        key = ("neo", sig.policy, sig.options, sig.roles, tp)
        for q, ttft_ms in self.plan.targets.ttft():
            ttft_s = ttft_ms / 1e3
            late = self._late(
                (*key, ttft_s),
                np.full(r.n, ttft_s),
                lambda idx, end: compute_s[idx],
                prefill_s <= ttft_s * (1 + SLACK),
                1,
            )
            b.checks.append(_LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
        share_s = r.steps * (floor1 / max_batch)
        self._both_checks(b, key, prefill_s, per_step, share_s, (0,), 1)
        b.work.append((float(compute_s.sum()), (0,)))
        b.work.append((float(share_s.sum()), (0,)))
        gpu = costs.gpu
        b.power_w = (tp * gpu.floor_power_w(),)
        return b

    def _util(self, work: float, capacity: np.ndarray) -> np.ndarray:
        if self.duration <= 0:
            return np.full(len(capacity), math.nan)
        return work / self.duration / capacity

    # -- evaluation ------------------------------------------------------------------

    def evaluate(self, group: Group) -> GroupScreen:
        """The verdict on every configuration of ``group``."""
        sig = group.signature
        tp_role = policy_traits(sig.policy).tensor_parallel_role
        if tp_role is not None:
            return self._evaluate_tensor_parallel(group, tp_role)
        if sig.policy == "h2m2":
            return self._evaluate_h2m2(group)
        n_cfg = len(group)
        fit = self.cache.fit(sig)
        if fit is not None:
            return GroupScreen.rejected(
                n_cfg, "memory" if fit.startswith("memory") else "invalid", fit
            )
        cmax = int(group.counts.sum(axis=1).max())
        b: _Bounds | None
        if sig.policy == "homogeneous":
            b = self._homogeneous(sig, cmax)
        elif sig.policy == "glitches":
            b = self._glitches(sig, cmax)
        else:  # pragma: no cover - parse_plan admits screened policies only
            raise SpecError("policy", f"no screen for {sig.policy!r}")
        if b is None:
            return GroupScreen.rejected(n_cfg, "memory", _NO_ROOM)
        return self._verdict(b, group.counts)

    def _evaluate_tensor_parallel(self, group: Group, tp_role: str) -> GroupScreen:
        """Neo-style nodes: the count of the policy's tensor-parallel role (its GPUs) is the
        tensor-parallel degree, which changes every per-request cost, so each configuration
        is bounded on its own (one server each)."""
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
            b = self._gpu_only(sig, tp) if sig.policy == "gpu-only" else self._neo(sig, tp)
            if b is None:
                parts.append(GroupScreen.rejected(1, "memory", _NO_ROOM))
            else:
                parts.append(self._verdict(b, np.ones((1, 1), dtype=np.int64)))
        return GroupScreen.concat(parts)

    def _evaluate_h2m2(self, group: Group) -> GroupScreen:
        """``h2m2``: floors from the weights' streaming time, on the plan's request set.

        The policy (:class:`~simulations.core.policies.h2m2.H2M2Policy`) serves the plan's
        requests in static batches: when free it takes the arrived requests, FCFS, up to
        ``max_batch``; a batch prefills, then decodes until its longest request ends. Every
        decode iteration streams all weights, each kernel taking at least its bytes over its
        side's bandwidth, so an iteration lasts at least ``τ = weights / (HBM + LPDDR
        bandwidth)`` (8-HBM: eight HBM stacks), and a prefill at least ``π = weights / (HBM
        + LPDDR bandwidth)`` (the prefill roofline's memory term). The prefill emits a
        request's first token and each of its other ``o_k - 1`` takes an iteration, so a
        batch holding request ``k`` lasts at least ``π + (o_k - 1) τ``. Hence:

        * TPOT ≥ τ for every request with two tokens or more (others have no TPOT).
        * Request ``i``'s batch starts no earlier than its arrival, than the batch of
          ``i - 1`` (FCFS), nor than the end of the batch of any ``k ≤ i - max_batch``
          (which holds fewer than ``i - k + 1`` requests, so is an earlier one): a start
          floor ``B_i = max(a_i, B_{i-1}, max_{k ≤ i - max_batch} B_k + π + (o_k - 1) τ)``,
          and TTFT_i ≥ ``B_i + π - a_i``.
        * The span (first arrival to last finish) is at least every ``B_i + π + (o_i - 1) τ
          - a_0``, and at least the boards' busy time, which all falls in it: at least
          ``⌈n / max_batch⌉`` prefills and, a batch of ``s`` steps decoding at most
          ``min(n, max_batch) s`` tokens, ``Σ(o_k - 1) / min(n, max_batch)`` steps.

        Chips (the count) speed up compute only, so every count shares the verdict. Energy
        (memory access only in this model) is bounded by 0.
        """
        sig = group.signature
        n_cfg = len(group)
        fit = self.cache.fit(sig)
        if fit is not None:
            return GroupScreen.rejected(
                n_cfg, "memory" if fit.startswith("memory") else "invalid", fit
            )
        opts = H2M2Policy.resolve_options(dict(sig.options))
        hw, shapes = self.cache.h2m2_hardware(sig)
        weights = shapes.n_layers * shapes.weight_bytes_per_layer
        both = hw.hbm.bw_bytes_per_s + hw.lpddr.bw_bytes_per_s
        bw = hw.hbm.bw_bytes_per_s * MULTI_HBM_DEVICES if opts["mapping"] == "8-hbm" else both
        tau = weights / bw
        pre = weights / both
        r = self.req
        n = r.n
        bmax = int(opts["max_batch"])
        steps = r.o - 1  # the prefill emits the first token
        start = _static_batch_starts(r.a, pre + steps * tau, bmax)
        ttft_req = start + pre - r.a
        span = float(np.max(start + pre + steps * tau) - r.a[0])
        span = max(span, -(-n // bmax) * pre + float(steps.sum()) / min(n, bmax) * tau)
        targets = self.plan.targets
        reason = 0

        def pct(values: np.ndarray, q: float) -> float:
            return float(np.percentile(values, q)) * 1e3 * (1 - SLACK)

        ttft_ms = tpot_ms = math.nan
        for i, (q, limit) in enumerate(targets.ttft()):
            v = pct(ttft_req, q)
            ttft_ms = v if i == 0 else ttft_ms
            if v > limit and not reason:
                reason = _CODE["ttft_alone"]
        for i, (_, limit) in enumerate(targets.tpot() if bool(np.any(steps > 0)) else ()):
            v = tau * 1e3 * (1 - SLACK)
            tpot_ms = v if i == 0 else tpot_ms
            if v > limit and not reason:
                reason = _CODE["tpot_alone"]
        thr = r.tokens / (span * (1 - SLACK))
        if targets.min_throughput_tok_s is not None and thr < targets.min_throughput_tok_s:
            reason = reason or _CODE["throughput"]
        return GroupScreen(
            reason=np.full(n_cfg, reason, dtype=np.int64),
            ttft_ms=np.full(n_cfg, ttft_ms),
            tpot_ms=np.full(n_cfg, tpot_ms),
            throughput_ub=np.full(n_cfg, thr),
            energy_lb=np.zeros(n_cfg),
            late_lb=np.zeros(n_cfg, dtype=np.int64),
            utilisation=np.full(n_cfg, math.nan),
        )

    def _verdict(self, b: _Bounds, counts: np.ndarray) -> GroupScreen:
        """Every configuration's verdict from the policy's bounds; ``counts`` are the
        configurations' servers per count column of the bounds."""
        n_cfg = len(counts)
        r = self.req
        targets = self.plan.targets
        reason = np.zeros(n_cfg, dtype=np.int64)

        def mark(mask: np.ndarray | bool, name: str) -> None:
            reason[(reason == 0) & mask] = _CODE[name]

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
