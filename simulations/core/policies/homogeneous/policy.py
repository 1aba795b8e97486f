"""Homogeneous serving: every device serves whole requests (prefill and decode).

The baseline every paper compares against; see :class:`HomogeneousPolicy`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from simulations.core.devices.base import DeviceModel
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.chunked import ChunkedSim
from simulations.core.engine.core import ProgressFn, SimOutput, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import SpecError
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

    With ``chunked_prefill`` (GPUs; vLLM's default scheduler today, Sarathi-Serve, Agrawal
    et al., OSDI'24) every iteration has a budget of ``max_batched_tokens`` tokens: the
    running sequences decode one token each and prompts are prefilled in chunks within the
    rest, so decodes never pause for a long prompt; ``prefix_caching`` keeps a workload's
    shared prefix cached once per device (:mod:`simulations.core.engine.chunked`).
    A system created in the builder or the API starts with :attr:`new_system_options`.

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
            "most prompt tokens in one prefill iteration (a longer single prompt still "
            "runs); with chunked_prefill the token budget of every iteration, decode tokens "
            "included (vLLM max_num_batched_tokens)",
            minimum=1,
            maximum=1_000_000,
        ),
        OptionSpec(
            "chunked_prefill",
            bool,
            False,
            "chunked prefill (Sarathi-Serve, vLLM's default): every iteration decodes the "
            "running sequences and prefills prompt chunks within max_batched_tokens; off = "
            "prefill iterations pause decoding (vLLM v0). GPUs only",
        ),
        OptionSpec(
            "prefix_caching",
            bool,
            False,
            "cache the workload's shared prefix (its full KV blocks) once per device and skip "
            "its prefill for the requests that carry it; needs chunked_prefill",
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

    #: What a homogeneous system created in the builder or through the API starts with:
    #: continuous batching as vLLM runs today (V1's defaults on an A100-class GPU behind its
    #: OpenAI server: max_num_seqs 256, max_num_batched_tokens 2048, chunked prefill and
    #: prefix caching on). Stored scenarios keep the option defaults above (batch-1, the
    #: papers' baselines).
    new_system_options: ClassVar[dict[str, Any]] = {
        "max_batch": 256,
        "max_batched_tokens": 2048,
        "chunked_prefill": True,
        "prefix_caching": True,
    }

    @classmethod
    def resolve_options(cls, given: Any, path: str = "options") -> dict[str, Any]:
        """The declared options, checked together: prefix caching runs on the chunked
        scheduler, whose token budget must hold a decode token of every running sequence."""
        opts = super().resolve_options(given, path)
        if opts["prefix_caching"] and not opts["chunked_prefill"]:
            raise SpecError(f"{path}.prefix_caching", "needs chunked_prefill")
        if opts["chunked_prefill"] and opts["max_batched_tokens"] < opts["max_batch"]:
            raise SpecError(
                f"{path}.max_batched_tokens",
                f"with chunked_prefill must be at least max_batch ({opts['max_batch']})",
            )
        return opts

    @staticmethod
    def _scheduler(
        requests: RequestSet, units: list[Any], opts: dict[str, Any], **engine: Any
    ) -> BatchingSim:
        """The engine scheduler the options ask for."""
        common: dict[str, Any] = {
            "max_batch": int(opts["max_batch"]),
            "block_size": int(opts["block_size"]),
            "memory_utilization": float(opts["memory_utilization"]),
            "max_batched_tokens": int(opts["max_batched_tokens"]),
        }
        if opts["chunked_prefill"]:
            return ChunkedSim(
                requests, units, prefix_caching=bool(opts["prefix_caching"]), **common, **engine
            )
        return BatchingSim(requests, units, **common, **engine)

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """Build the engine's batching on one device (its constructor checks the memory)."""
        opts = cls.resolve_options(options)
        cls._scheduler(
            ctx.requests,
            [ctx.unit(sig.roles[0][1], {"prefetch_ratio": int(options["prefetch_ratio"])})],
            opts,
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

        shared_kv = bool(opts["prefix_caching"])

        def factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            dm = self.device_models(device, runtime).with_settings({"prefetch_ratio": prefetch})
            # Shared prefix blocks are counted once by the scheduler's KV pool.
            return dm.with_shared_kv() if shared_kv else dm

        def overhead(p: Any, dm: DeviceModel) -> float:
            return dm.host_sampling_s(model)

        units = build_units(
            system.devices,
            model,
            factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=overhead,
            # The chunked scheduler is new: its decode curves verify their pieces at the
            # ends only (for families with convex decode costs); the existing scheduler
            # keeps the learning its recorded results came from.
            convex=bool(opts["chunked_prefill"]),
        )
        if opts["chunked_prefill"]:
            for unit in units:
                # A family that cannot cost a mixed iteration refuses here, naming the option.
                unit.chunk_cost(0, 0, ((1, 0),))
        sim = self._scheduler(
            requests,
            units,
            opts,
            reference=self.reference,
            audit=self.audit,
            progress=progress,
        )
        out = sim.run()
        out.extra["options"] = opts
        return out
