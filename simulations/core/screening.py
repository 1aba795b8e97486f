"""What a policy tells the capacity planner's analytic screen, and what the screen gives it.

The screen (:mod:`simulations.core.planner.screen`) holds the generic bound-and-verdict
code; every searchable policy contributes, through the methods its
:class:`~simulations.core.policies.base.Policy` class declares (``screen_fit`` and
``screen_bounds``), the two things only it knows: whether the engine's constructors accept
one of its systems (memory fit) and the per-request floors and work bounds of its schedule
(:class:`Bounds`), or a finished verdict every count shares (:class:`SharedVerdict`). This
module is the vocabulary both sides use, so the policies never import the planner
(``docs/architecture.md``).

Every bound is *optimistic for feasibility*: whatever the screen rules out, the engine
would find infeasible too. Floating-point slack (:data:`SLACK`) is applied in the
optimistic direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from simulations.core.engine.core import Unit
    from simulations.core.engine.requests import RequestSet
    from simulations.core.spec import DevicePlacement, DeviceSpec, ModelSpec, RuntimeProfile

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
#: The index of each reason in :data:`REASONS`.
REASON_CODE = {name: i for i, name in enumerate(REASONS)}


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
    included where the device samples on the host), ``prefill_j``/``decode_j`` their
    joules; ``prefill_compute_s`` the compute-only floor of a request's share of a packed
    prefill (its FLOPs at the device model's :meth:`compute_rate_bound`); ``decode_kv_s``
    plus ``steps × weights_s / B`` the memory-traffic floor of its share of batched decode
    steps with at most ``B`` sequences (from the model's :meth:`decode_stream_floor`; zero
    where it states none). A phase the device model refuses (its memory check) costs +inf:
    the engine raises whenever it runs it there.
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


# --- what a policy's screen returns ----------------------------------------------------------


@dataclass(frozen=True)
class LateCheck:
    """Infeasible when ``late[capacity] > allowed``; capacity is the sum of the count
    columns ``cols`` (devices that can do the work)."""

    reason: str
    allowed: int
    late: np.ndarray
    cols: tuple[int, ...]


@dataclass
class Bounds:
    """A policy's bounds on one signature, for the count-level evaluation: per-request
    floors, late-request checks per capacity, total work per device set, and the energy
    floor's terms. Count columns are the signature's filled roles, in order (a
    tensor-parallel server is one column of count 1)."""

    ttft_req: np.ndarray  # per-request TTFT floor (s)
    tpot_req: np.ndarray  # per-request TPOT floor (s), multi-token requests only
    finish_req: np.ndarray  # per-request arrival-to-finish floor (s)
    checks: list[LateCheck] = field(default_factory=list)
    # (total work in device-seconds, count columns that can do it): span ≥ work / devices
    work: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    # Energy ≥ Σ_col counts × power[col] × span + excess (J)
    power_w: tuple[float, ...] = ()
    excess_j: float = 0.0


@dataclass(frozen=True)
class SharedVerdict:
    """A verdict every configuration of a signature shares (its counts change none of the
    bounds): ``reason`` is a name of :data:`REASONS` (``""``: possibly feasible)."""

    reason: str
    ttft_ms: float
    tpot_ms: float
    throughput_ub: float
    energy_lb: float = 0.0
    late_lb: int = 0
    utilisation: float = math.nan


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
            np.full(n, REASON_CODE[code], dtype=np.int64),
            nan,
            nan.copy(),
            nan.copy(),
            nan.copy(),
            np.zeros(n, dtype=np.int64),
            nan.copy(),
            detail,
        )

    @classmethod
    def shared(cls, n: int, v: SharedVerdict) -> GroupScreen:
        """``n`` configurations with the verdict ``v``."""
        return cls(
            reason=np.full(n, REASON_CODE[v.reason], dtype=np.int64),
            ttft_ms=np.full(n, v.ttft_ms),
            tpot_ms=np.full(n, v.tpot_ms),
            throughput_ub=np.full(n, v.throughput_ub),
            energy_lb=np.full(n, v.energy_lb),
            late_lb=np.full(n, v.late_lb, dtype=np.int64),
            utilisation=np.full(n, v.utilisation),
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


# --- what the screen offers a policy ---------------------------------------------------------

#: ``work(request indices, end of their window)``: the device-seconds each must get.
WorkFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


class SignatureLike(Protocol):
    """One group of the search space as a policy's screen sees it: the policy, its option
    values (as the space's key holds them) and the device entry playing each filled role."""

    @property
    def policy(self) -> str: ...

    @property
    def options(self) -> tuple[tuple[str, Any], ...]: ...

    @property
    def roles(self) -> tuple[tuple[str, int], ...]: ...

    def role_entry(self, role: str) -> int | None: ...


class TargetsLike(Protocol):
    """The plan's latency and throughput targets (percentile, limit) pairs."""

    @property
    def min_throughput_tok_s(self) -> float | None: ...

    def ttft(self) -> list[tuple[float, float]]: ...

    def tpot(self) -> list[tuple[float, float]]: ...


class FitContext(Protocol):
    """What a policy's ``screen_fit`` may ask the planner: the plan's model and request set
    (lengths: the fit does not depend on arrivals), the placements of a signature (one
    device per role, or ``tp`` of the tensor-parallel role), one device entry's spec and
    runtime, and the engine unit of an entry as the policies build it."""

    @property
    def model(self) -> ModelSpec: ...

    @property
    def requests(self) -> RequestSet: ...

    def placements(
        self, sig: SignatureLike, tp: int | None = None
    ) -> tuple[DevicePlacement, ...]: ...

    def device(self, entry: int) -> tuple[DeviceSpec, RuntimeProfile]: ...

    def unit(self, entry: int, settings: Mapping[str, Any] | None = None) -> Unit: ...


class BoundContext(FitContext, Protocol):
    """What a policy's ``screen_bounds`` may ask: :class:`FitContext`, the request arrays
    and targets of this load level, cost tables, and the generic bound helpers."""

    @property
    def req(self) -> Requests: ...

    @property
    def targets(self) -> TargetsLike: ...

    def table(self, entry: int, settings: Mapping[str, Any] | None = None) -> CostTable: ...

    def table_of(self, key: tuple[Any, ...], make_unit: Callable[[], Unit]) -> CostTable: ...

    def late(
        self,
        memo_key: tuple[Any, ...],
        h: np.ndarray,
        work: WorkFn,
        candidate: np.ndarray,
        cmax: int,
    ) -> np.ndarray: ...

    def both_checks(
        self,
        b: Bounds,
        key: tuple[Any, ...],
        prefill_s: np.ndarray,
        per_step_s: np.ndarray,
        work_s: np.ndarray,
        cols: tuple[int, ...],
        cmax: int,
    ) -> None: ...

    def per_step(self, decode_s: np.ndarray) -> np.ndarray: ...

    def whole_requests(
        self, t: CostTable, max_batch: int, key: tuple[Any, ...], cmax: int
    ) -> Bounds | None: ...


__all__ = [
    "REASONS",
    "REASON_CODE",
    "REASON_TEXT",
    "SLACK",
    "BoundContext",
    "Bounds",
    "CostTable",
    "FitContext",
    "GroupScreen",
    "LateCheck",
    "Requests",
    "SharedVerdict",
    "SignatureLike",
    "TargetsLike",
    "WorkFn",
    "allowed_late",
]
