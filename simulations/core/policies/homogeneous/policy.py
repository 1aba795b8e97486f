"""Homogeneous serving: every device serves whole requests (prefill and decode).

The baseline every paper compares against; see :class:`HomogeneousPolicy`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from simulations.core.devices.base import DeviceModel
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import ProgressFn, SimOutput, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.policies.base import OptionSpec, RoleSpec, register
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
from simulations.core.spec import (
    DeviceSpec,
    ModelSpec,
    RuntimeProfile,
    SystemSpec,
)


@register
class HomogeneousPolicy(EnginePolicy):
    """Every device serves whole requests (prefill and decode).

    Two modes, by ``max_batch``:

    - ``max_batch = 1`` (the default): each device prefills and then decodes one request
      at a time, taking the oldest waiting request of one shared FCFS queue whenever it
      frees up — the latency-sensitive batch-1 baseline of GLITCHES §I/§V ("a small batch
      or even one batch is usually required"), which its 8×A100, 8×V100S and 8×U280
      systems run.
    - ``max_batch > 1``: the devices are data-parallel replicas behind a router that sends
      each request on arrival to the device with the fewest outstanding requests; each
      runs iteration-level continuous batching with a paged KV cache bounded by its
      memory, like vLLM v0 without chunked prefill (Kwon et al., SOSP'23, cited by
      GLITCHES [10]): prefill iterations have priority, the KV pool is
      ``memory_utilization`` × memory − weights in blocks of ``block_size`` tokens, a
      request is admitted when its prompt's blocks plus a 1 % watermark are free, and when
      a decode step runs out of blocks the latest admitted sequence is preempted and later
      recomputed. See :mod:`simulations.core.engine.batching` for the exact rules.

    Accelerators that sample on the host (FPGAs) add the per-token logits round trip over
    PCIe to each decode iteration (as in GLITCHES §III); FPGAs use the §IV prefetch model
    with ``prefetch_ratio`` (the GLITCHES all-FPGA baseline runs the same prefetching
    FlightLLM design as its heterogeneous system, §V-A).

    Deviations/assumptions: the same paged-memory bound is applied with ``max_batch = 1``
    (it only matters for contexts near the memory limit); data-parallel replicas only (no
    tensor parallelism); the router does not move queued requests between replicas.
    """

    name: ClassVar[str] = "homogeneous"
    summary: ClassVar[str] = (
        "Every device serves whole requests: batch-1 FCFS or vLLM-like continuous batching"
    )
    roles: ClassVar[tuple[RoleSpec, ...]] = (
        RoleSpec("", "any device; each one prefills and decodes whole requests"),
    )
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec(
            "max_batch",
            int,
            1,
            "most requests a device decodes together; 1 = one request at a time per "
            "device (batch-1 FCFS), more = continuous batching",
            minimum=1,
            maximum=4096,
        ),
        OptionSpec(
            "block_size",
            int,
            16,
            "tokens per KV-cache block of the paged cache",
            minimum=1,
            maximum=1024,
        ),
        OptionSpec(
            "memory_utilization",
            float,
            0.9,
            "fraction of device memory for weights and KV cache (vLLM gpu_memory_utilization)",
            minimum=0.05,
            maximum=1.0,
        ),
        OptionSpec(
            "max_batched_tokens",
            int,
            4096,
            "most prompt tokens in one prefill iteration (a longer single prompt still runs)",
            minimum=1,
            maximum=1_000_000,
        ),
        OptionSpec(
            "prefetch_ratio",
            int,
            4,
            "FPGA data-prefetch ratio M (GLITCHES §IV); ignored for other devices",
            minimum=1,
            maximum=64,
        ),
    )

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """Build the engine's batching on one device (its constructor checks the memory)."""
        BatchingSim(
            ctx.requests,
            [ctx.unit(sig.roles[0][1], {"prefetch_ratio": int(options["prefetch_ratio"])})],
            max_batch=int(options["max_batch"]),
            block_size=int(options["block_size"]),
            memory_utilization=float(options["memory_utilization"]),
            max_batched_tokens=int(options["max_batched_tokens"]),
        )

    @classmethod
    def screen_bounds(
        cls,
        ctx: BoundContext,
        sig: SignatureLike,
        options: dict[str, Any],
        fitted: Any,
        cmax: int,
        tp: int | None,
    ) -> Bounds | None:
        """Every device serves whole requests (one entry, count column 0): the screen's
        bounds of units that serve whole requests."""
        entry = sig.roles[0][1]
        t = ctx.table(entry, {"prefetch_ratio": int(options["prefetch_ratio"])})
        return ctx.whole_requests(t, int(options["max_batch"]), (entry, sig.options), cmax)

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run the scheduler on ``requests`` and return the raw outcome."""
        opts = self.resolve_options(system.options)
        prefetch = int(opts["prefetch_ratio"])

        def factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            return self.device_models(device, runtime).with_settings({"prefetch_ratio": prefetch})

        def overhead(p: Any, dm: DeviceModel) -> float:
            return dm.host_sampling_s(model)

        units = build_units(
            system.devices,
            model,
            factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=overhead,
        )
        sim = BatchingSim(
            requests,
            units,
            max_batch=int(opts["max_batch"]),
            block_size=int(opts["block_size"]),
            memory_utilization=float(opts["memory_utilization"]),
            max_batched_tokens=int(opts["max_batched_tokens"]),
            reference=self.reference,
            audit=self.audit,
            progress=progress,
        )
        out = sim.run()
        out.extra["options"] = opts
        return out
