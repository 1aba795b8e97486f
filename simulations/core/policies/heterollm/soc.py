"""The SoC HeteroLLM runs on: a CPU control plane, a GPU and an NPU sharing one memory.

HeteroLLM §2.2, §3 and §4: the CPU only synchronises and schedules (its cost is the
synchronisation cost of :class:`~simulations.core.memory.UnifiedMemorySync`; it computes
nothing), the GPU and the NPU are the core's device models
(:class:`~simulations.core.devices.gpu.GpuModel`,
:class:`~simulations.core.devices.npu.NpuModel`) and both stream from one LPDDR memory
(:class:`~simulations.core.memory.SharedMemoryBus`) that neither saturates alone (§3.3).

This module is also the solver's *profiler in prediction mode* (§4.3): GPU Matmul times come
from the GPU's roofline (a fixed TFLOPS rate when compute-bound, as §4.3 says), NPU Matmul
times from the NPU's weight-stationary model, and concurrent GPU + NPU execution from the
shared-bus model (:func:`corun_s`). No time here is measured or fitted to a HeteroLLM
figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulations.core.devices import build_device_model
from simulations.core.devices.gpu import GpuModel
from simulations.core.devices.npu import NpuModel
from simulations.core.errors import SpecError
from simulations.core.graph import Precision
from simulations.core.memory import SharedMemoryBus, UnifiedMemorySync
from simulations.core.spec import DeviceKind, DevicePlacement, DeviceSpec, RuntimeProfile


@dataclass(frozen=True)
class HeteroSoc:
    """One phone SoC as HeteroLLM sees it (§3, §4).

    ``gpu`` and ``npu`` are the processors' cost models, ``bus`` their shared memory and
    ``sync`` the cost of a GPU↔NPU hand-over (read from the NPU stack's ``sync_*`` runtime
    parameters, HeteroLLM §3.1). ``name`` is the SoC's slug (the components' ``parent``).
    """

    gpu: GpuModel
    npu: NpuModel
    bus: SharedMemoryBus
    sync: UnifiedMemorySync
    name: str

    @classmethod
    def from_specs(
        cls,
        gpu_device: DeviceSpec,
        gpu_runtime: RuntimeProfile,
        npu_device: DeviceSpec,
        npu_runtime: RuntimeProfile,
    ) -> HeteroSoc:
        """Build the SoC from its GPU and NPU (and their stacks).

        Both must belong to the same SoC (equal ``parent`` when either names one) and share
        one memory (equal primary-tier bandwidth): HeteroLLM's unified memory (§2.2).
        """
        if gpu_device.kind is not DeviceKind.GPU:
            raise SpecError("devices.gpu", f"{gpu_device.slug} is not a GPU")
        if npu_device.kind is not DeviceKind.NPU:
            raise SpecError("devices.npu", f"{npu_device.slug} is not an NPU")
        if gpu_device.parent != npu_device.parent:
            raise SpecError(
                "devices",
                f"the GPU ({gpu_device.slug}, SoC {gpu_device.parent}) and the NPU "
                f"({npu_device.slug}, SoC {npu_device.parent}) must belong to the same SoC",
            )
        if gpu_device.mem_bw_gbps != npu_device.mem_bw_gbps:
            raise SpecError(
                "devices",
                "the GPU and the NPU must share one memory (unified memory, HeteroLLM §2.2): "
                f"{gpu_device.mem_bw_gbps:g} vs {npu_device.mem_bw_gbps:g} GB/s",
            )
        gpu = build_device_model(gpu_device, gpu_runtime)
        npu = build_device_model(npu_device, npu_runtime)
        if not isinstance(gpu, GpuModel):
            raise SpecError("devices.gpu", "HeteroLLM needs the roofline GPU model")
        if not isinstance(npu, NpuModel):
            raise SpecError("devices.npu", "HeteroLLM needs the weight-stationary NPU model")
        if Precision.of(gpu_runtime) != Precision.of(npu_runtime):
            raise SpecError(
                "devices.runtime",
                "the GPU and NPU stacks must use the same precision (HeteroLLM runs W4A16 on "
                "both; a partitioned tensor is shared between them): "
                f"{gpu_runtime.slug} is W{gpu_runtime.weight_bits}A{gpu_runtime.act_bits}, "
                f"{npu_runtime.slug} W{npu_runtime.weight_bits}A{npu_runtime.act_bits}",
            )
        bus = SharedMemoryBus(npu_device.mem_bw_gbps, name=f"{npu_device.parent or 'soc'}.memory")
        return cls(
            gpu=gpu,
            npu=npu,
            bus=bus,
            sync=UnifiedMemorySync.from_runtime(npu_runtime),
            name=npu_device.parent or f"{gpu_device.slug}+{npu_device.slug}",
        )

    @classmethod
    def from_placements(cls, placements: Sequence[DevicePlacement]) -> HeteroSoc:
        """The SoC of a system whose placements have roles ``gpu`` and ``npu`` (one each)."""
        by_role: dict[str, DevicePlacement] = {}
        for i, p in enumerate(placements):
            if p.role not in ("gpu", "npu"):
                raise SpecError(
                    f"devices[{i}].role", "HeteroLLM takes one device with role 'gpu' and one 'npu'"
                )
            if p.role in by_role:
                raise SpecError(f"devices[{i}].role", f"more than one {p.role!r} device")
            if p.count != 1:
                raise SpecError(f"devices[{i}].count", "a SoC has one GPU and one NPU (count 1)")
            by_role[p.role] = p
        for role in ("gpu", "npu"):
            if role not in by_role:
                raise SpecError("devices", f"HeteroLLM needs a device with role {role!r}")
        g, n = by_role["gpu"], by_role["npu"]
        return cls.from_specs(g.device, g.runtime, n.device, n.runtime)

    # --- profiler (prediction mode, HeteroLLM §4.3) ------------------------------------------

    @property
    def precision(self) -> Precision:
        """Bit widths shared by both stacks."""
        return self.npu.precision

    @property
    def gpu_alone_gbps(self) -> float:
        """Bandwidth the GPU reaches alone (its stack's ``bw_eff`` × the shared peak)."""
        return float(self.gpu.bw / 1e9)

    @property
    def npu_alone_gbps(self) -> float:
        """Bandwidth the NPU reaches alone."""
        return self.npu.achievable_gbps

    def gpu_gemm(self, tokens: Any, k: int, rows: Any) -> tuple[Any, Any]:
        """(seconds, bytes) of ``[tokens, k] × [k, rows]`` on the GPU: the stack's roofline,
        weights at the weight precision, activations at the activation precision.
        Vectorised over numpy arrays of ``tokens`` and ``rows``; 0 where either is 0."""
        p = self.precision
        t = np.asarray(tokens, dtype=np.float64)
        r = np.asarray(rows, dtype=np.float64)
        flops = 2.0 * t * k * r
        nbytes = k * r * p.w + t * (k + r) * p.a
        seconds = np.maximum(flops / self.gpu.ops_rate, nbytes / self.gpu.bw)
        active = (t > 0) & (r > 0)
        return np.where(active, seconds, 0.0), np.where(active, nbytes, 0.0)

    def npu_gemm(self, graphs: Sequence[int], k: int, rows: int) -> tuple[float, float]:
        """(seconds, bytes) of NPU graphs run one after another, each ``[rows, k] × [k, g]``
        in HeteroLLM's permuted order (§4: the weight streams, the activations stay in the
        array) for ``g`` in ``graphs`` (prepared shapes, padding included)."""
        seconds = nbytes = 0.0
        if rows <= 0:
            return 0.0, 0.0
        for g in graphs:
            c = self.npu.linear_cost(g, k, rows)
            seconds += c.seconds
            nbytes += c.bytes
        return seconds, nbytes


def corun_s(t_gpu: Any, bytes_gpu: Any, t_npu: Any, bytes_npu: Any, peak_gbps: float) -> np.ndarray:
    """Makespan of a GPU kernel and an NPU kernel started together on a shared memory.

    Each processor alone would take ``t`` seconds moving ``bytes``: its average demand is
    ``d = bytes / t``. While both run, the memory serves
    ``peak · (1 − (1 − d_gpu/peak)(1 − d_npu/peak))`` in proportion to the demands
    (:class:`~simulations.core.memory.SharedMemoryBus`), so both progress at the same
    fraction ``f`` of their alone speed; when the shorter finishes the other continues
    alone. Makespan = ``t_short / f + (t_long − t_short)``. With compute-bound kernels
    (small demands) ``f`` ≈ 1 and the makespan is ``max(t_gpu, t_npu)``, the solver's
    ``max`` of §4.3; in decode ``f`` < 1 models the contention of §3.3 / §4.1.2.

    Deviation: a kernel's demand is its average over its run (the NPU's weight stalls
    are spread evenly rather than placed in time).
    """
    tg = np.asarray(t_gpu, dtype=np.float64)
    tn = np.asarray(t_npu, dtype=np.float64)
    peak = peak_gbps * 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        dg = np.where(tg > 0, np.asarray(bytes_gpu, dtype=np.float64) / tg, 0.0)
        dn = np.where(tn > 0, np.asarray(bytes_npu, dtype=np.float64) / tn, 0.0)
        ug = np.minimum(dg / peak, 1.0)
        un = np.minimum(dn / peak, 1.0)
        served = peak * (ug + un - ug * un)
        demand = dg + dn
        f = np.where(demand > 0, np.minimum(served / demand, 1.0), 1.0)
        short = np.minimum(tg, tn)
        long = np.maximum(tg, tn)
        both = (tg > 0) & (tn > 0)
        out = np.where(both, short / f + (long - short), long)
    return np.asarray(out, dtype=np.float64)
