"""Homogeneous serving: every device serves whole requests (prefill and decode).

The baseline every paper compares against; see :class:`HomogeneousPolicy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from simulations.core.devices import build_device_model, model_parallel_kinds
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.parallel import (
    ParallelGroup,
    check_expert_parallel,
    shard_model,
    stage_model,
)
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.chunked import ChunkedSim
from simulations.core.engine.core import ProgressFn, SimOutput, Unit, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies.base import OptionSpec, RoleSpec, group_link, register
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
from simulations.core.spec import (
    DevicePlacement,
    DeviceSpec,
    ModelSpec,
    RuntimeProfile,
    SystemSpec,
)

#: The parallelism options (the planner searches tensor_parallel and link, not the pipeline).
PARALLEL_OPTIONS = ("tensor_parallel", "pipeline_parallel", "micro_batches", "link")


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

    *Parallelism* (devices whose family is ``model_parallel``: GPUs): ``tensor_parallel``
    × ``pipeline_parallel`` devices of a placement form one model replica
    (:class:`~simulations.core.devices.parallel.ParallelGroup`: heads, KV heads and FFN
    widths split ``tensor_parallel`` ways with two all-reduces per layer, layers split into
    ``pipeline_parallel`` stages run with ``micro_batches`` micro-batches), communicating
    over the catalog ``link``; the placement's ``count / (tp × pp)`` replicas are
    data-parallel behind the router, each one engine unit. Degrees 1 and 1 are exactly the
    single-device model. A degree that does not divide the model's heads, KV heads, FFN
    width or layers, a count it does not divide, or a model whose share of the weights does
    not fit one device's memory is refused when the scenario is parsed, naming the option.

    Deviations/assumptions: the same paged-memory bound is applied with ``max_batch = 1``
    (it only matters for contexts near the memory limit); the router does not move queued
    requests between replicas; a replica's KV pool is its devices' memory together (see
    :mod:`simulations.core.devices.parallel` for the cost model's own deviations).
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
        OptionSpec(
            "tensor_parallel",
            int,
            1,
            "GPUs one model replica's heads, KV heads and FFN widths are split across "
            "(two all-reduces per layer over the link)",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "expert_parallel",
            int,
            1,
            "mixture-of-experts models: GPUs a replica's experts are spread over, whole "
            "experts each — equal to tensor_parallel (attention tensor-parallel on the same "
            "GPUs) or, with tensor_parallel 1, data-parallel attention and two all-to-alls "
            "per MoE layer over the link",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "moe_routing_zipf",
            float,
            0.0,
            "mixture-of-experts models: Zipf exponent of the experts' popularity (0 = "
            "uniform routing); skew touches fewer experts and loads one device most",
            minimum=0.0,
            maximum=10.0,
        ),
        OptionSpec(
            "pipeline_parallel",
            int,
            1,
            "pipeline stages one model replica's layers are split into",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "micro_batches",
            int,
            1,
            "micro-batches a pass is cut into through the pipeline stages; the bubble "
            "fraction is (stages - 1) / (micro-batches + stages - 1)",
            minimum=1,
            maximum=1024,
        ),
        OptionSpec(
            "link",
            str,
            "",
            "the catalog interconnect the parallel groups communicate over (nvlink4, "
            "pcie5-x16, …); when tensor_parallel × pipeline_parallel > 1 it is required "
            "unless the devices' records share a peer link (a TPU's ICI), which is the default",
            catalog="links",
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
    def unsearchable_option(cls, name: str, value: Any) -> str | None:
        """The planner searches tensor-parallel degrees (and the link) with data-parallel
        replicas of them, not pipeline parallelism."""
        if name in ("pipeline_parallel", "micro_batches") and value != 1:
            return "the planner does not search pipeline parallelism yet"
        return None

    @classmethod
    def replica_devices(cls, options: Mapping[str, Any]) -> int:
        """``max(tensor_parallel, expert_parallel) × pipeline_parallel`` devices form one
        engine unit."""
        width = max(int(options["tensor_parallel"]), int(options.get("expert_parallel", 1)))
        return width * int(options["pipeline_parallel"])

    @classmethod
    def check_system(cls, system: SystemSpec, model: ModelSpec) -> None:
        """Degrees that divide the model and the counts, a link, and every device's share of
        the weights within its memory (see the class notes)."""
        opts = cls.resolve_options(system.options)
        tp, pp = int(opts["tensor_parallel"]), int(opts["pipeline_parallel"])
        ep = int(opts["expert_parallel"])
        model = model.with_routing_zipf(float(opts["moe_routing_zipf"]))
        check_expert_parallel(model, tp, ep)
        if ep > 1 and pp > 1:
            raise SpecError("options.expert_parallel", "is modelled without pipeline_parallel")
        group = max(tp, ep) * pp
        if group == 1:
            return
        for name, what, value in (
            ("n_heads", "attention heads", tp),
            ("n_kv_heads", "KV heads", tp),
            ("ffn_size", "FFN width", tp),
            ("n_layers", "layers", pp),
        ):
            size = getattr(model, name)
            if size % value:
                option = "tensor_parallel" if name != "n_layers" else "pipeline_parallel"
                raise SpecError(
                    f"options.{option}",
                    f"{value} does not divide {model.slug}'s {size} {what} ({name})",
                )
        if group_link(system, opts) is None:
            raise SpecError(
                "options.link",
                f"name the interconnect of the {group}-device groups (the devices' records "
                "share no peer link)",
            )
        sharded = model_parallel_kinds()
        for j, p in enumerate(system.devices):
            if p.device.kind not in sharded:
                raise SpecError(
                    f"devices[{j}].device",
                    f"tensor and pipeline parallelism are modelled for GPUs, not "
                    f"{p.device.kind} ({p.device.slug})",
                )
            if p.count % group:
                raise SpecError(
                    f"devices[{j}].count",
                    f"{p.count} devices do not form replicas of tensor_parallel × "
                    f"pipeline_parallel = {group}",
                )
            dm = build_device_model(p.device, p.runtime)
            per_device = stage_model(model, tp, pp) if ep == 1 else shard_model(model, tp, ep)
            need = dm.weights_bytes(per_device)
            cap = dm.memory_capacity_bytes * float(opts["memory_utilization"])
            if need >= cap:
                raise CapacityError(
                    "options.tensor_parallel",
                    f"{model.slug} needs {need / 1e9:.1f} GB of weights per device at "
                    f"tensor_parallel {tp} × pipeline_parallel {pp} "
                    f"({p.runtime.weight_bits}-bit) but {p.device.slug} offers "
                    f"{cap / 1e9:.1f} GB (memory × memory_utilization); raise the degrees",
                )

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """Build the engine's scheduler on one unit (its constructor checks the memory): one
        device, or one replica's tensor-parallel group, checked first as the scenario
        parser checks it (degrees that divide the model, a link, weights that fit)."""
        opts = cls.resolve_options(options)
        cls._scheduler(ctx.requests, [_replica_unit(ctx, sig, options)], opts)

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
        settings = {"prefetch_ratio": int(options["prefetch_ratio"])}
        if cls.replica_devices(options) == 1 and not options.get("moe_routing_zipf"):
            t = ctx.table(entry, settings)
        else:
            t = ctx.table_of(
                ("replica", entry, sig.options), lambda: _replica_unit(ctx, sig, options)
            )
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
        tp, pp = int(opts["tensor_parallel"]), int(opts["pipeline_parallel"])
        ep = int(opts["expert_parallel"])
        model = model.with_routing_zipf(float(opts["moe_routing_zipf"]))
        group = max(tp, ep) * pp
        placements = system.devices
        if group > 1:
            self.check_system(system, model)
            link = group_link(system, opts)
            # One engine unit per data-parallel replica of tp × pp devices.
            placements = tuple(replace(p, count=p.count // group) for p in system.devices)

        shared_kv = bool(opts["prefix_caching"])

        def factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            dm = self.device_models(device, runtime).with_settings({"prefetch_ratio": prefetch})
            if group > 1:
                dm = ParallelGroup(
                    dm, tp, pp, micro_batches=int(opts["micro_batches"]), link=link, ep=ep
                )
            # Shared prefix blocks are counted once by the scheduler's KV pool.
            return dm.with_shared_kv() if shared_kv else dm

        def overhead(p: Any, dm: DeviceModel) -> float:
            return dm.host_sampling_s(model)

        units = build_units(
            placements,
            model,
            factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=overhead,
            # Families with convex decode costs (GPUs, tensor-parallel groups of them)
            # verify their curves' pieces at the ends only and learn each batch size up to
            # the KV pool at once, with or without chunked prefill: the same sums to
            # rounding (checked against the step-by-step reference in the engine's tests).
            convex=True,
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
        if model.moe is not None:
            out.extra["experts"] = expert_layout(model, tp, ep)
        return out

    @classmethod
    def explain(cls, entry: Mapping[str, Any]) -> list[str]:
        """For a mixture of experts, the layout the recommended system runs (its
        ``scheduler.experts``): ``expert_parallel × tensor_parallel``, the replicas, how the
        routed experts and attention are split over a replica's GPUs, the share of their
        busy time spent communicating and the routing. Dense models: none."""
        layout = (entry.get("scheduler") or {}).get("experts")
        if not isinstance(layout, Mapping):
            return []
        ep, tp = int(layout["expert_parallel"]), int(layout["tensor_parallel"])
        n, held = int(layout["n_experts"]), int(layout["experts_per_device"])
        devices = list(entry.get("devices") or ())
        par = devices[0].get("parallel") if devices else None
        if isinstance(par, Mapping):
            replicas, width = int(par["replicas"]), int(par["devices_per_replica"])
        else:
            replicas, width = int(devices[0]["count"]) if devices else 1, 1
        if ep > 1 and tp == 1:
            split = (
                f"each GPU holds {held} of the {n} routed experts of every MoE layer and runs "
                "attention for its own sequences (data-parallel), with two all-to-alls per "
                "MoE layer"
            )
        elif ep > 1:
            split = (
                f"each GPU holds {held} of the {n} routed experts of every MoE layer whole "
                f"and a 1/{tp} slice of attention (tensor-parallel)"
            )
        elif tp > 1:
            split = f"each GPU holds a 1/{tp} slice of all {n} routed experts and of attention"
        else:
            split = f"each GPU holds all {n} routed experts"
        comm = ""
        if isinstance(par, Mapping) and par.get("link"):
            comm = (
                f"; {float(par['comm_share']):.1%} of the GPUs' busy time is spent "
                f"communicating over {par['link']}"
            )
        zipf = float(layout["routing_zipf"])
        routing = f"expert popularity Zipf {zipf:g}" if zipf > 0 else "uniform routing"
        plural = "s" if replicas != 1 else ""
        return [
            f"Mixture of experts, expert_parallel {ep} × tensor_parallel {tp}: {replicas} "
            f"replica{plural} of {width} GPU{'s' if width != 1 else ''}; {split}{comm} "
            f"({routing})."
        ]


def expert_layout(model: ModelSpec, tp: int, ep: int) -> dict[str, Any]:
    """How a replica splits a mixture of experts (a result's ``scheduler.experts``): the
    degrees, the routed experts and how many one device holds, how attention runs and the
    routing's Zipf exponent."""
    moe = model.moe
    if moe is None:
        raise ValueError(f"{model.slug} is not a mixture of experts")
    attention = "data-parallel" if ep > tp else ("tensor-parallel" if tp > 1 else "whole")
    return {
        "expert_parallel": ep,
        "tensor_parallel": tp,
        "n_experts": moe.n_experts,
        "experts_per_device": moe.n_experts // ep,
        "attention": attention,
        "routing_zipf": moe.routing_zipf,
    }


def _replica_unit(ctx: FitContext, sig: SignatureLike, options: dict[str, Any]) -> Unit:
    """The engine unit :meth:`HomogeneousPolicy.simulate` builds for one replica of the
    signature's device entry: one device, or its ``tensor_parallel × pipeline_parallel``
    group over the ``link`` (SpecError or CapacityError as the scenario parser would
    refuse the system)."""
    entry = sig.roles[0][1]
    prefetch = {"prefetch_ratio": int(options["prefetch_ratio"])}
    tp, pp = int(options["tensor_parallel"]), int(options["pipeline_parallel"])
    ep = int(options.get("expert_parallel", 1))
    group = max(tp, ep) * pp
    model = ctx.model.with_routing_zipf(float(options.get("moe_routing_zipf", 0.0)))
    if group == 1 and model is ctx.model:
        return ctx.unit(entry, prefetch)
    device, runtime = ctx.device(entry)
    system = SystemSpec(
        name=sig.policy,
        policy=sig.policy,
        devices=(DevicePlacement(device, group, runtime, ""),),
        options=options,
    )
    HomogeneousPolicy.check_system(system, model)
    link = group_link(system, options) if group > 1 else None

    shared_kv = bool(options["prefix_caching"])

    def factory(d: DeviceSpec, r: RuntimeProfile) -> DeviceModel:
        dm = build_device_model(d, r).with_settings(prefetch)
        if group > 1:
            dm = ParallelGroup(
                dm, tp, pp, micro_batches=int(options["micro_batches"]), link=link, ep=ep
            )
        return dm.with_shared_kv() if shared_kv else dm

    def overhead(p: Any, dm: DeviceModel) -> float:
        return dm.host_sampling_s(model)

    placement = DevicePlacement(device, 1, runtime, "")
    return build_units(
        [placement],
        model,
        factory,
        step_overhead_s=overhead,
        timeline_cap=0,
        convex=True,
    )[0]
