"""Memory tiers and links: transfer times, capacity checks, and memory shared inside a SoC.

Three mechanisms live here, each used by several device models and policies:

* **Links and paths.** A transfer over one link takes ``latency + bytes / bandwidth``
  (:meth:`~simulations.core.spec.LinkSpec.transfer_s`). A :class:`LinkPath` chains links
  (GPU → host → FPGA over PCIe is two hops, GLITCHES §V / Fig. 8): by default each hop
  completes before the next starts (store-and-forward through a host bounce buffer); with
  ``chunk_bytes`` the hops pipeline chunk by chunk, so the slowest hop sets the pace.
  :func:`pcie_link` and :func:`nvlink_c2c_link` build links from their standards' figures.
* **Capacity.** :func:`require_fits` raises :class:`~simulations.core.errors.CapacityError`
  naming the field when bytes do not fit a memory.
* **Shared SoC memory** (HeteroLLM §3.3). On a phone SoC the CPU, GPU and NPU share one
  LPDDR memory, yet *no single processor saturates it*: the GPU alone reaches 43.3 GB/s of
  the 68 GB/s peak in decode, GPU and NPU together about 59–60 GB/s. :class:`SharedMemoryBus`
  models why: a processor alone keeps the DRAM busy only a fraction ``u = alone / peak`` of
  the time (it cannot keep enough requests in flight); independent processors leave the DRAM
  idle only when all of them are idle, so together they reach
  ``peak · (1 − Π (1 − u_i))``. The per-processor "alone" rates are runtime-profile values
  (``bw_eff`` × the SoC's peak, cited from the paper), the peak is the SoC's; nothing is
  fitted to the combined figure. :class:`UnifiedMemorySync` holds the synchronisation costs
  of unified memory (HeteroLLM §3.1, §4.2) that a GPU–NPU schedule pays per hand-over.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import CapacityError, SpecError
from .spec import (
    DeviceSpec,
    LinkKind,
    LinkSpec,
    MemoryTier,
    RuntimeProfile,
    check_count,
    check_fraction,
    check_positive,
)

# --- links -----------------------------------------------------------------------------------

#: Per-lane signalling rate (GT/s) and line-code efficiency of each PCIe generation, from the
#: PCI Express Base Specifications (Gen3: 8 GT/s, 128b/130b; Gen4: 16 GT/s; Gen5: 32 GT/s).
PCIE_GENERATIONS: Mapping[int, tuple[float, float]] = {
    3: (8.0, 128 / 130),
    4: (16.0, 128 / 130),
    5: (32.0, 128 / 130),
}
PCIE_SOURCE = (
    "PCI Express Base Specification 3.0/4.0/5.0: 8/16/32 GT/s per lane, 128b/130b encoding; "
    "bandwidth per direction = lanes × GT/s × 128/130 / 8 bits"
)

#: NVLink-C2C (Grace Hopper): 900 GB/s bidirectional, i.e. 450 GB/s each way.
NVLINK_C2C_BIDIR_GBPS = 900.0
NVLINK_C2C_SOURCE = (
    "datasheets.json spec_GH200_nvlink_c2c: 900 GB/s bidirectional "
    "(https://spheron.network/blog/nvidia-gh200-guide); 450 GB/s per direction"
)


def pcie_bw_gbps(gen: int, lanes: int = 16) -> float:
    """Raw PCIe bandwidth per direction in GB/s for a generation and lane count."""
    if gen not in PCIE_GENERATIONS:
        raise SpecError("link.pcie_gen", f"unknown PCIe generation {gen!r} (known: 3, 4, 5)")
    check_count("link.lanes", lanes, maximum=32)
    rate, code = PCIE_GENERATIONS[gen]
    return lanes * rate * code / 8.0


def pcie_link(gen: int, lanes: int = 16, *, latency_us: float = 0.0) -> LinkSpec:
    """A PCIe link at its standard's raw bandwidth per direction (achieved bandwidth and DMA
    setup latency are software behaviour: pass them via the caller's runtime profile)."""
    return LinkSpec(
        LinkKind.PCIE, pcie_bw_gbps(gen, lanes), latency_us=latency_us, pcie_gen=gen, lanes=lanes
    )


def nvlink_c2c_link(*, latency_us: float = 0.0) -> LinkSpec:
    """NVLink-C2C between a Grace CPU and a Hopper GPU, per direction."""
    return LinkSpec(LinkKind.C2C, NVLINK_C2C_BIDIR_GBPS / 2, latency_us=latency_us)


def _check_bytes(nbytes: float, path: str = "nbytes") -> float:
    return check_positive(path, nbytes, allow_zero=True)


def transfer_s(link: LinkSpec, nbytes: float) -> float:
    """Seconds to move ``nbytes`` over ``link``: latency + bytes / bandwidth (0 bytes: 0 s)."""
    n = _check_bytes(nbytes)
    return link.transfer_s(n) if n > 0 else 0.0


@dataclass(frozen=True)
class LinkPath:
    """Links traversed one after the other (e.g. GPU → host over PCIe, host → FPGA over PCIe).

    Deviation: hops share no bandwidth with other traffic; a host bounce buffer is assumed
    between hops (no peer-to-peer DMA).
    """

    hops: tuple[LinkSpec, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "hops", tuple(self.hops))
        if not self.hops:
            raise SpecError("path.hops", "a link path needs at least one link")
        for i, hop in enumerate(self.hops):
            if not isinstance(hop, LinkSpec):
                raise SpecError(f"path.hops[{i}]", "must be a LinkSpec")

    @property
    def bottleneck_gbps(self) -> float:
        """Bandwidth of the slowest hop."""
        return min(h.bw_gbps for h in self.hops)

    @property
    def latency_s(self) -> float:
        """Sum of the hops' latencies."""
        return sum(h.latency_us for h in self.hops) * 1e-6

    def transfer_s(self, nbytes: float, *, chunk_bytes: float | None = None) -> float:
        """Seconds to move ``nbytes`` end to end.

        Without ``chunk_bytes`` every hop finishes before the next begins (store and forward):
        ``Σ (latency_i + bytes / bw_i)``. With ``chunk_bytes`` the payload moves in equal
        chunks that pipeline through the hops: the first chunk crosses every hop, the rest
        follow at the slowest hop's pace (per-chunk latency is paid once per hop, as DMA
        engines queue the chunks).
        """
        n = _check_bytes(nbytes)
        if n == 0:
            return 0.0
        if chunk_bytes is None:
            return sum(h.transfer_s(n) for h in self.hops)
        c = check_positive("chunk_bytes", chunk_bytes)
        chunks = max(1, math.ceil(n / c))
        piece = n / chunks
        first = sum(piece / (h.bw_gbps * 1e9) for h in self.hops)
        rest = (chunks - 1) * piece / (self.bottleneck_gbps * 1e9)
        return self.latency_s + first + rest


# --- capacity --------------------------------------------------------------------------------


def require_fits(field_path: str, need_bytes: float, capacity_bytes: float, what: str) -> None:
    """Raise CapacityError at ``field_path`` when ``need_bytes`` exceed ``capacity_bytes``."""
    need = check_positive(f"{field_path}.need_bytes", need_bytes, allow_zero=True)
    cap = check_positive(f"{field_path}.capacity_bytes", capacity_bytes)
    if need > cap:
        raise CapacityError(
            field_path,
            f"{what} needs {need / 1e9:.2f} GB but only {cap / 1e9:.2f} GB of memory is available",
        )


def tier_read_s(tier: MemoryTier, nbytes: float, bw_eff: float = 1.0) -> float:
    """Seconds to stream ``nbytes`` from ``tier`` at ``bw_eff`` of its peak bandwidth."""
    n = _check_bytes(nbytes)
    eff = check_fraction("bw_eff", bw_eff)
    return n / (tier.bw_gbps * 1e9 * eff)


# --- memory shared by the processors of a SoC ------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamResult:
    """Outcome of concurrent streams on a shared memory: makespan and each finish time."""

    seconds: float
    finish_s: Mapping[str, float]
    bytes: float

    @property
    def achieved_gbps(self) -> float:
        """Average bandwidth over the makespan."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class SharedMemoryBus:
    """A memory whose bandwidth the processors of a SoC share (HeteroLLM §3.3).

    ``peak_gbps`` is the memory's peak (68 GB/s on the Snapdragon 8 Gen 3, as HeteroLLM
    states). Each processor's *alone* rate is what it reaches when it streams by itself
    (its software stack's ``bw_eff`` × peak). When several stream at once, each keeps the
    DRAM busy a fraction ``u_i = alone_i / peak`` of the time independently of the others,
    so the memory is idle a fraction ``Π (1 − u_i)`` and the total is
    ``peak · (1 − Π (1 − u_i))``: below the peak, above any single processor, and never the
    plain sum. The total is split in proportion to the alone rates (each processor is slowed
    by the same factor, since they contend for the same banks).

    Deviations: no bank- or row-level DRAM timing; processors are assumed to issue requests
    independently (HeteroLLM's GPU/NPU row-cutting kernels do).
    """

    peak_gbps: float
    name: str = "soc-memory"

    def __post_init__(self) -> None:
        check_positive(f"{self.name}.peak_gbps", self.peak_gbps)

    @classmethod
    def of(cls, device: DeviceSpec) -> SharedMemoryBus:
        """The shared memory of a SoC (or of one of its components): its primary tier."""
        return cls(device.mem_bw_gbps, name=f"{device.slug}.memory")

    @staticmethod
    def alone_gbps(device: DeviceSpec, runtime: RuntimeProfile) -> float:
        """What ``device`` reaches alone on its memory with ``runtime``: ``bw_eff`` × peak."""
        return device.mem_bw_gbps * runtime.bw_eff

    def _utilisations(self, alone_gbps: Mapping[str, float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, rate in alone_gbps.items():
            r = check_positive(f"{self.name}.alone_gbps.{key}", rate)
            if r > self.peak_gbps * (1 + 1e-12):
                raise SpecError(
                    f"{self.name}.alone_gbps.{key}",
                    f"{r:g} GB/s exceeds the shared peak of {self.peak_gbps:g} GB/s",
                )
            out[key] = min(r / self.peak_gbps, 1.0)
        return out

    def combined_gbps(self, alone_gbps: Iterable[float]) -> float:
        """Total bandwidth when processors with these alone rates stream concurrently."""
        rates = {str(i): r for i, r in enumerate(alone_gbps)}
        if not rates:
            return 0.0
        idle = math.prod(1.0 - u for u in self._utilisations(rates).values())
        return self.peak_gbps * (1.0 - idle)

    def shares_gbps(self, alone_gbps: Mapping[str, float]) -> dict[str, float]:
        """Bandwidth each processor gets while all of ``alone_gbps`` stream together."""
        if not alone_gbps:
            return {}
        util = self._utilisations(alone_gbps)
        total = self.peak_gbps * (1.0 - math.prod(1.0 - u for u in util.values()))
        scale = total / sum(alone_gbps.values())
        return {k: alone_gbps[k] * scale for k in alone_gbps}

    def stream(self, work: Mapping[str, tuple[float, float]]) -> StreamResult:
        """Concurrent streams: ``work[name] = (bytes, alone_gbps)``, all starting at t = 0.

        While several streams are active they share the bus (:meth:`shares_gbps`); when one
        finishes, the others continue at their new shares. Returns the makespan and each
        stream's finish time.
        """
        left: dict[str, float] = {}
        alone: dict[str, float] = {}
        for key, (nbytes, rate) in work.items():
            left[key] = _check_bytes(nbytes, f"{self.name}.work.{key}.bytes")
            alone[key] = rate
        self._utilisations(alone)  # validates every rate, even of empty streams
        finish: dict[str, float] = {k: 0.0 for k, b in left.items() if b == 0}
        active = {k for k, b in left.items() if b > 0}
        t = 0.0
        while active:
            shares = self.shares_gbps({k: alone[k] for k in active})
            dt = min(left[k] / (shares[k] * 1e9) for k in active)
            t += dt
            done = set()
            for k in active:
                left[k] -= shares[k] * 1e9 * dt
                if left[k] <= 1e-9 * max(1.0, work[k][0]):
                    done.add(k)
            for k in done:
                finish[k] = t
            active -= done
        total = sum(b for b, _ in work.values())
        return StreamResult(t, finish, total)

    def balanced_fraction(self, alone_a_gbps: float, alone_b_gbps: float) -> float:
        """Share of bytes to give processor A so that A and B, streaming together, finish
        at the same time (HeteroLLM §4.1.2 decode row-cutting): ``a / (a + b)``, since both
        are slowed by the same factor."""
        self._utilisations({"a": alone_a_gbps, "b": alone_b_gbps})
        return alone_a_gbps / (alone_a_gbps + alone_b_gbps)


# --- synchronisation on unified memory -------------------------------------------------------


@dataclass(frozen=True)
class UnifiedMemorySync:
    """What a hand-over between the GPU and the NPU of a SoC costs (HeteroLLM §3.1, §4.2).

    * *conventional* synchronisation copies the tensor into the GPU's buffer
      (``clEnqueueWriteBuffer``: a fixed ``copy_latency_us`` whatever the size, §3.1) and
      then refills the GPU queue that the wait drained (``empty_queue_submit_us``, §3.1);
    * *fast* synchronisation maps one buffer into both address spaces (no copy) and polls a
      flag after a predicted sleep (§4.2). When the GPU dominates (decode) the next GPU
      kernel is already queued, so the hand-over adds nothing; when the NPU dominates
      (prefill) the next GPU kernel is submitted to an empty queue after the NPU finishes.

    Values come from a runtime profile's ``params`` (:meth:`from_runtime`); the keys are
    ``sync_copy_latency_us``, ``sync_empty_queue_submit_us`` and ``sync_queued_submit_us``.
    """

    copy_latency_us: float
    empty_queue_submit_us: float
    queued_submit_us: float = 0.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    PARAM_KEYS = ("sync_copy_latency_us", "sync_empty_queue_submit_us", "sync_queued_submit_us")

    def __post_init__(self) -> None:
        check_positive("sync.copy_latency_us", self.copy_latency_us, allow_zero=True)
        check_positive("sync.empty_queue_submit_us", self.empty_queue_submit_us, allow_zero=True)
        check_positive("sync.queued_submit_us", self.queued_submit_us, allow_zero=True)

    @classmethod
    def from_runtime(cls, runtime: RuntimeProfile) -> UnifiedMemorySync:
        """Read the synchronisation costs from a runtime profile's params (SpecError naming the
        missing key)."""
        return cls(
            copy_latency_us=runtime.param("sync_copy_latency_us"),
            empty_queue_submit_us=runtime.param("sync_empty_queue_submit_us"),
            queued_submit_us=runtime.param("sync_queued_submit_us", 0.0),
            sources={k: runtime.sources.get(k, "") for k in cls.PARAM_KEYS},
        )

    def conventional_s(self) -> float:
        """One conventional hand-over: copy, then refill the drained GPU queue."""
        return (self.copy_latency_us + self.empty_queue_submit_us) * 1e-6

    def fast_s(self, *, gpu_dominant: bool) -> float:
        """One hand-over with fast synchronisation (shared buffers, predicted-wait polling)."""
        return 0.0 if gpu_dominant else self.empty_queue_submit_us * 1e-6

    def submit_s(self) -> float:
        """Submitting a kernel to a non-empty GPU queue (hidden behind the running kernel)."""
        return self.queued_submit_us * 1e-6
