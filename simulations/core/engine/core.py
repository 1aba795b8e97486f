"""Discrete-event core shared by the schedulers: units (device instances), timelines, links,
per-request records and the event loop.

Time is simulated only. Events are ``(time, sequence, handler, args)`` in a heap; the
sequence number (per simulator, never global) makes the order deterministic for equal times.
Arrivals are not pushed on the heap: they are merged in from the sorted request arrays, all
requests with the same timestamp together, after any event due at or before that time.

A :class:`Unit` is one physical device. Its *compute lane* runs one thing at a time
(prefill, decode, or nothing) — :meth:`Unit.occupy` refuses overlaps — while its PCIe link
lanes (``in``/``out``) carry transfers concurrently with compute, as DMA engines do.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulations.core.devices.base import DeviceModel, PhaseCost
from simulations.core.errors import CapacityError
from simulations.core.spec import (
    DevicePlacement,
    DeviceSpec,
    LinkSpec,
    ModelSpec,
    RuntimeProfile,
)

from .curve import DecodeCurve
from .requests import RequestSet

PREFILL = "prefill"
DECODE = "decode"
TRANSFER = "transfer"
IDLE = "idle"

#: Default number of intervals kept per device timeline (the first ones; later are counted).
DEFAULT_TIMELINE_CAP = 400

#: Slack for comparing simulated times (seconds); times are sums of float costs.
TIME_EPS = 1e-9

ProgressFn = Callable[[float], None]


class Timeline:
    """Intervals ``(start_s, end_s, kind, request, batch)`` of one lane of one device.

    Contiguous intervals of the same kind, request and batch are merged (so a decode that
    the engine happened to split at an event reads as one bar). Only the first ``cap``
    intervals are stored; ``dropped`` counts the rest. ``request`` is the request index for
    single-request work and -1 for a batch.
    """

    __slots__ = ("cap", "dropped", "items")

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.items: list[list[Any]] = []
        self.dropped = 0

    def add(self, start: float, end: float, kind: str, request: int, batch: int) -> None:
        """Record an interval (merged with the previous one when it continues it)."""
        if end <= start:
            return
        if self.items:
            last = self.items[-1]
            if (
                last[2] == kind
                and last[3] == request
                and last[4] == batch
                and abs(last[1] - start) <= TIME_EPS
            ):
                last[1] = end
                return
        if self.cap is not None and len(self.items) >= self.cap:
            self.dropped += 1
            return
        self.items.append([start, end, kind, request, batch])


class Link:
    """One direction of a device's host link: a FIFO resource with a transfer-time model."""

    __slots__ = ("free_at", "spec", "timeline")

    def __init__(self, spec: LinkSpec | None, cap: int | None) -> None:
        self.spec = spec
        self.free_at = 0.0
        self.timeline = Timeline(cap)

    def seconds(self, nbytes: float) -> float:
        """Time to move ``nbytes`` (latency plus bytes over bandwidth)."""
        if self.spec is None:
            raise CapacityError("host_link", "this device has no host link to transfer over")
        return self.spec.transfer_s(nbytes)

    def book(self, start: float, end: float, request: int) -> None:
        """Occupy the link over ``[start, end]`` (FIFO: the caller started at ``free_at``)."""
        self.free_at = max(self.free_at, end)
        self.timeline.add(start, end, TRANSFER, request, 1)


class Unit:
    """One device instance in a system: cost model, memory, compute lane and links."""

    def __init__(
        self,
        index: int,
        placement: int,
        device: DeviceSpec,
        runtime: RuntimeProfile,
        role: str,
        dm: DeviceModel,
        model: ModelSpec,
        *,
        exact: bool = False,
        timeline_cap: int | None = DEFAULT_TIMELINE_CAP,
        step_overhead_s: float = 0.0,
        share_with: Unit | None = None,
        convex: bool = False,
    ) -> None:
        self.index = index
        self.placement = placement
        self.device = device
        self.runtime = runtime
        self.role = role
        self.dm = dm
        self.model = model
        self.capacity = float(dm.memory_capacity_bytes)
        self.weights = float(dm.weights_bytes(model))
        self.kv_per_token = float(dm.kv_bytes_per_token(model))
        self.idle_w = float(dm.idle_power_w)
        #: Devices this unit stands for (a parallel group's ``tp × pp``) and the seconds
        #: each of them spent in collectives (the policies' schedulers add them up).
        self.group_size = int(dm.group_size)
        self.parallel = dm.parallel_info()
        self.comm_s = 0.0
        #: Collective seconds of one decode step by batch size (the unit's model is fixed,
        #: and a loaded unit books tens of thousands of runs over a few dozen batch sizes).
        self.decode_comm_s: dict[int, float] = {}
        if self.weights >= self.capacity:
            raise CapacityError(
                f"devices[{placement}]",
                f"{model.slug} weights ({self.weights / 1e9:.1f} GB at "
                f"{runtime.weight_bits}-bit) do not fit {device.slug} memory "
                f"({self.capacity / 1e9:.1f} GB)",
            )
        self.step_overhead_s = step_overhead_s
        self.curve: DecodeCurve
        self._prefill_cache: dict[tuple[int, ...], PhaseCost]
        if share_with is not None:
            # Identical devices of one placement share what is learned about their costs.
            self.curve = share_with.curve
            self._prefill_cache = share_with._prefill_cache
        else:
            overhead_j = step_overhead_s * self.idle_w

            def step_fn(batch: int, kv: int) -> tuple[float, float]:
                c = dm.decode_step(model, batch, kv)
                return c.seconds + step_overhead_s, c.joules + overhead_j

            def steps_fn(batch: int, kv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                secs, joules = dm.decode_steps(model, batch, kv)
                return secs + step_overhead_s, joules + overhead_j

            self.curve = DecodeCurve(
                step_fn,
                exact=exact,
                steps_fn=steps_fn,
                # a sliding window caps the windowed layers' attention: a concave kink
                convex=convex and dm.decode_convex_in_kv and model.sliding_window is None,
            )
            self._prefill_cache = {}
        self.mem_used = self.weights
        self.mem_peak = self.weights
        self.free_at = 0.0
        self.busy_s = 0.0
        self.busy_j = 0.0
        self.prefill_s = 0.0
        self.decode_s = 0.0
        self.prefill_tokens = 0
        self.prefill_outputs = 0
        self.decode_tokens = 0
        self.timeline = Timeline(timeline_cap)
        self.link_in = Link(device.host_link, timeline_cap)
        self.link_out = Link(device.host_link, timeline_cap)
        self.version = 0

    @property
    def slug(self) -> str:
        """The device's catalog slug."""
        return self.device.slug

    def prefill_cost(self, seq_lens: Sequence[int]) -> PhaseCost:
        """Cost of prefilling ``seq_lens`` together (cached per length tuple)."""
        key = tuple(seq_lens)
        cost = self._prefill_cache.get(key)
        if cost is None:
            cost = self.dm.prefill(self.model, list(key))
            if not (math.isfinite(cost.seconds) and cost.seconds > 0):
                raise ValueError(f"{self.slug}: prefill cost must be positive, got {cost}")
            self._prefill_cache[key] = cost
        return cost

    def chunk_cost(
        self, batch: int, kv_tokens: int, chunks: tuple[tuple[int, int], ...]
    ) -> PhaseCost:
        """Cost of a chunked-prefill iteration (``DeviceModel.chunked_step``)."""
        cost = self.dm.chunked_step(self.model, batch, kv_tokens, chunks)
        if not (math.isfinite(cost.seconds) and cost.seconds > 0):
            raise ValueError(f"{self.slug}: chunked step cost must be positive, got {cost}")
        return cost

    def occupy(
        self, start: float, end: float, joules: float, kind: str, request: int, batch: int
    ) -> None:
        """Run work on the compute lane over ``[start, end]``; overlaps are a bug."""
        if start < self.free_at - TIME_EPS * max(1.0, abs(start)):
            raise AssertionError(
                f"{self.slug}#{self.index}: {kind} at {start!r} overlaps work "
                f"until {self.free_at!r}"
            )
        self.free_at = end
        dt = end - start
        self.busy_s += dt
        self.busy_j += joules
        if kind == PREFILL:
            self.prefill_s += dt
        else:
            self.decode_s += dt
        self.timeline.add(start, end, kind, request, batch)

    def alloc(self, nbytes: float) -> None:
        """Reserve device memory; exceeding the capacity is a scheduler bug."""
        self.mem_used += nbytes
        if self.mem_used > self.capacity * (1 + 1e-12):
            raise AssertionError(
                f"{self.slug}#{self.index}: memory {self.mem_used:.4g} B exceeds "
                f"capacity {self.capacity:.4g} B"
            )
        self.mem_peak = max(self.mem_peak, self.mem_used)

    def release(self, nbytes: float) -> None:
        """Give back device memory reserved with :meth:`alloc`."""
        self.mem_used -= nbytes

    def fits(self, nbytes: float) -> bool:
        """Whether ``nbytes`` more fit in device memory now."""
        return self.mem_used + nbytes <= self.capacity


@dataclass
class UnitReport:
    """What metrics need of one device instance after a run."""

    index: int
    placement: int
    device: str
    role: str
    idle_w: float
    busy_s: float
    busy_j: float
    prefill_s: float
    decode_s: float
    prefill_tokens: int
    prefill_outputs: int
    decode_tokens: int
    mem_capacity_bytes: float
    mem_peak_bytes: float
    timeline: list[list[Any]]
    link_timeline: list[list[Any]]
    timeline_dropped: int
    group_size: int = 1
    comm_s: float = 0.0
    parallel: dict[str, Any] | None = None


@dataclass
class SimOutput:
    """Raw outcome of one simulated system (turned into the result document by metrics)."""

    requests: RequestSet
    first_token_s: np.ndarray
    finish_s: np.ndarray
    generated: np.ndarray
    preemptions: np.ndarray
    finished_on: np.ndarray
    units: list[UnitReport]
    events: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def t_start(self) -> float:
        """First arrival."""
        return float(self.requests.arrival_s[0])

    @property
    def t_end(self) -> float:
        """Last completion."""
        return float(np.max(self.finish_s))


class Simulator:
    """Event loop and per-request bookkeeping; schedulers subclass it.

    Subclasses implement :meth:`on_arrivals` (called with the indices of the requests that
    arrive at one instant) and schedule their own events with :meth:`at`. They call
    :meth:`first_token` and :meth:`complete` so every request finishes exactly once.
    """

    def __init__(
        self,
        requests: RequestSet,
        units: list[Unit],
        *,
        reference: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        self.requests = requests
        self.units = units
        self.reference = reference
        self.progress = progress
        n = len(requests)
        self.arrival: list[float] = requests.arrival_s.tolist()
        self.prompt: list[int] = requests.input_tokens.tolist()
        self.output: list[int] = requests.output_tokens.tolist()
        self.first: list[float] = [math.nan] * n
        self.finish: list[float] = [math.nan] * n
        self.generated: list[int] = [0] * n
        self.preemptions: list[int] = [0] * n
        self.finished_on: list[int] = [-1] * n
        self.done = 0
        self.now = 0.0
        self.events = 0
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._progress_every = max(1, n // 100)
        self.extra: dict[str, Any] = {}

    # -- events --------------------------------------------------------------------------

    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        """Call ``fn(*args)`` at simulated time ``t`` (never in the past)."""
        if t < self.now:
            t = self.now
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn, args))

    def on_arrivals(self, ids: list[int]) -> None:
        """Requests ``ids`` arrive at ``self.now``."""
        raise NotImplementedError

    def run(self) -> SimOutput:
        """Play every request through the system and return the raw outcome."""
        n = len(self.arrival)
        i = 0
        heap = self._heap
        arrival = self.arrival
        while True:
            t_arr = arrival[i] if i < n else math.inf
            if heap and heap[0][0] <= t_arr:
                t, _, fn, args = heapq.heappop(heap)
                self.now = t
                self.events += 1
                fn(*args)
                continue
            if i >= n:
                break
            self.now = t_arr
            j = i
            while j < n and arrival[j] == t_arr:
                j += 1
            self.events += 1
            self.on_arrivals(list(range(i, j)))
            i = j
        if self.done != n:
            stuck = [k for k in range(n) if math.isnan(self.finish[k])][:5]
            raise AssertionError(f"{n - self.done} requests never finished (e.g. {stuck})")
        if self.progress is not None:
            self.progress(1.0)
        return self.output_record()

    # -- request bookkeeping -------------------------------------------------------------

    def first_token(self, rid: int, t: float) -> None:
        """The request's first generated token exists at ``t`` (kept if already set)."""
        if math.isnan(self.first[rid]):
            self.first[rid] = t

    def complete(self, rid: int, t: float, unit: int) -> None:
        """The request's last token exists at ``t``; it must not finish twice."""
        if not math.isnan(self.finish[rid]):
            raise AssertionError(f"request {rid} finished twice")
        if self.generated[rid] != self.output[rid]:
            raise AssertionError(
                f"request {rid} finished with {self.generated[rid]} of {self.output[rid]} tokens"
            )
        self.finish[rid] = t
        self.finished_on[rid] = unit
        self.done += 1
        if self.progress is not None and self.done % self._progress_every == 0:
            self.progress(self.done / len(self.arrival))

    def output_record(self) -> SimOutput:
        """Collect the outcome (after :meth:`run`)."""
        units = [
            UnitReport(
                index=u.index,
                placement=u.placement,
                device=u.slug,
                role=u.role,
                idle_w=u.idle_w,
                busy_s=u.busy_s,
                busy_j=u.busy_j,
                prefill_s=u.prefill_s,
                decode_s=u.decode_s,
                prefill_tokens=u.prefill_tokens,
                prefill_outputs=u.prefill_outputs,
                decode_tokens=u.decode_tokens,
                mem_capacity_bytes=u.capacity,
                mem_peak_bytes=u.mem_peak,
                timeline=u.timeline.items,
                link_timeline=sorted(
                    [[*iv, "in"] for iv in u.link_in.timeline.items]
                    + [[*iv, "out"] for iv in u.link_out.timeline.items],
                    key=lambda iv: (iv[0], iv[1]),
                ),
                timeline_dropped=u.timeline.dropped
                + u.link_in.timeline.dropped
                + u.link_out.timeline.dropped,
                group_size=u.group_size,
                comm_s=u.comm_s,
                parallel=u.parallel,
            )
            for u in self.units
        ]
        return SimOutput(
            requests=self.requests,
            first_token_s=np.array(self.first),
            finish_s=np.array(self.finish),
            generated=np.array(self.generated, dtype=np.int64),
            preemptions=np.array(self.preemptions, dtype=np.int64),
            finished_on=np.array(self.finished_on, dtype=np.int64),
            units=units,
            events=self.events,
            extra=dict(self.extra),
        )


DeviceModelFactory = Callable[[DeviceSpec, RuntimeProfile], DeviceModel]


def build_units(
    placements: Sequence[DevicePlacement],
    model: ModelSpec,
    device_models: DeviceModelFactory,
    *,
    exact: bool = False,
    timeline_cap: int | None = DEFAULT_TIMELINE_CAP,
    step_overhead_s: Callable[[DevicePlacement, DeviceModel], float] | None = None,
    first_index: int = 0,
    placement_index: Sequence[int] | None = None,
    convex: bool = False,
) -> list[Unit]:
    """One :class:`Unit` per device instance of ``placements`` (``count`` each), in order.

    ``placement_index[i]`` is the position of ``placements[i]`` in the system's device list
    (for error paths and reports); by default the position in ``placements``.
    ``step_overhead_s`` adds a fixed time to every decode step of a placement (e.g. a host
    round trip for sampling). ``convex`` lets the decode curves of device families that
    declare ``decode_convex_in_kv`` verify their pieces at the ends only (new schedulers
    opt in; the existing ones keep their exact learning path).
    """
    units: list[Unit] = []
    for i, p in enumerate(placements):
        dm = device_models(p.device, p.runtime)
        extra = step_overhead_s(p, dm) if step_overhead_s is not None else 0.0
        pos = placement_index[i] if placement_index is not None else i
        first: Unit | None = None
        for _ in range(p.count):
            unit = Unit(
                first_index + len(units),
                pos,
                p.device,
                p.runtime,
                p.role,
                dm,
                model,
                exact=exact,
                timeline_cap=timeline_cap,
                step_overhead_s=extra,
                share_with=first,
                convex=convex,
            )
            first = first or unit
            units.append(unit)
    return units
