"""The ``moe-offload`` policy: a mixture of experts on GPUs too small for all its experts,
the cold experts in host memory (see :mod:`.offload` for the cost of each GPU)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.cpu import CpuModel
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import ProgressFn, SimOutput, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies.base import OptionSpec, RoleSpec, register, resolve_link
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.spec import DeviceSpec, LinkSpec, ModelSpec, RuntimeProfile, SystemSpec

from .offload import MODES, OffloadedGpu, resident_model
from .tiered import TIER_MODES, SideModel, TieredBoard, board_hardware, lpddr_only_report

GPU_ROLE = RoleSpec(
    "gpu",
    "GPUs (or, with cold_tier lpddr / lpddr-only, HBM+LPDDR boards), each serving whole "
    "requests with its resident experts",
    ("gpu", "memory-accel"),
)
HOST_ROLE = RoleSpec(
    "host",
    "the host CPU holding the offloaded experts (one per GPU: its own socket or NUMA node; "
    "none with cold_tier lpddr / lpddr-only)",
    ("cpu",),
    required=False,
)
#: Where the cold experts live: host memory, or the LPDDR tier of a two-tier board
#: (:mod:`.tiered`); ``lpddr-only`` is that board holding everything in LPDDR.
COLD_TIERS = ("host", "lpddr", "lpddr-only")


@register
class MoeOffloadPolicy(EnginePolicy):
    """Expert offloading: each GPU keeps attention, the KV cache, the
    dense layers, the shared experts and its ``gpu_experts`` hottest routed experts per MoE
    layer; the other experts sit in the host CPU's memory and run, per layer and pass, on
    the host CPU or streamed to the GPU over its PCIe link — whichever the rule of
    :mod:`.offload` finds faster (``offload_mode`` ``auto``; ``cpu`` / ``stream`` force one).
    The host CPU's cost is Neo's CPU model (§2.2, :class:`~simulations.core.devices.cpu.
    CpuModel`: DRAM bandwidth and FMA roofline). Requests are served as the ``homogeneous``
    policy serves them (continuous batching when ``max_batch`` > 1, no chunked prefill);
    compare with ``homogeneous`` on more GPUs holding every expert.

    ``gpu_experts`` 0 (the default) keeps as many experts as fit in ``memory_utilization``
    of the GPU's memory while leaving ``kv_memory_fraction`` of it to the KV cache. "Hot"
    experts are the most popular under ``moe_routing_zipf`` (uniform routing: any).

    ``cold_tier`` ``lpddr`` asks the same placement question on a board with an HBM and an
    LPDDR tier and a chip beside each (H2M2's hardware, Hwang et al. §4.1, Tables 1–2; the
    ``gpu`` role then holds ``memory-accel`` boards and there is no ``host``): attention,
    the KV cache, the shared and the ``gpu_experts`` hottest experts in HBM, the rest in
    LPDDR, computed by the LPDDR chip or streamed across the board's interconnect, per layer
    (:mod:`.tiered`, ``offload_mode`` ``auto`` / ``lpddr`` / ``stream``). ``lpddr-only`` is
    the same board holding everything in LPDDR (H2M2's baseline). An option of this policy
    rather than of ``h2m2``: the hot/cold split, its sizing, the per-layer rule and the
    serving engine are this policy's; ``h2m2``'s head-aware mapping and static batcher are
    for dense decoder layers.

    Deviations: see :mod:`.offload` (no overlap of host and GPU work, no caching of
    streamed experts) and :mod:`.tiered`; one host per GPU (``host`` count = ``gpu``
    count), its energy counted into the GPU's while it computes; not searched by the
    planner yet.
    """

    name: ClassVar[str] = "moe-offload"
    summary: ClassVar[str] = (
        "Mixture of experts with cold experts in host memory, run on the host CPU or streamed"
    )
    roles: ClassVar[tuple[RoleSpec, ...]] = (GPU_ROLE, HOST_ROLE)
    unscreened_why: ClassVar[str] = "the planner does not search expert offloading yet"
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec(
            "max_batch",
            int,
            64,
            "most requests a GPU decodes together (continuous batching)",
            minimum=1,
            maximum=4096,
        ),
        OptionSpec("block_size", int, 16, "tokens per KV-cache block", minimum=1, maximum=1024),
        OptionSpec(
            "memory_utilization",
            float,
            0.9,
            "fraction of GPU memory for weights and KV cache",
            minimum=0.05,
            maximum=1.0,
        ),
        OptionSpec(
            "max_batched_tokens",
            int,
            4096,
            "most prompt tokens in one prefill iteration",
            minimum=1,
            maximum=1_000_000,
        ),
        OptionSpec(
            "gpu_experts",
            int,
            0,
            "routed experts per MoE layer kept on the GPU (the most popular); 0 = as many "
            "as fit leaving kv_memory_fraction of the memory to the KV cache",
            minimum=0,
            maximum=4096,
        ),
        OptionSpec(
            "kv_memory_fraction",
            float,
            0.2,
            "with gpu_experts 0: share of the GPU's memory kept for the KV cache",
            minimum=0.01,
            maximum=0.9,
        ),
        OptionSpec(
            "offload_mode",
            str,
            "auto",
            "where the offloaded experts run: auto (per layer and pass, the faster of "
            "computing them beside their memory and streaming them), cpu (host tier), lpddr "
            "(the LPDDR tier's chip), stream (over PCIe or the board's interconnect)",
            choices=tuple(dict.fromkeys(MODES + TIER_MODES)),
        ),
        OptionSpec(
            "expert_overlap",
            bool,
            False,
            "with cold_tier lpddr: the LPDDR chip computes the cold experts while the HBM "
            "chip computes the hot ones (H2M2 §3.1's parallel granularity applied to "
            "experts); off: the layer waits for them (conservative)",
        ),
        OptionSpec(
            "cold_tier",
            str,
            "host",
            "where the cold experts live: host (host CPU memory beside a GPU), lpddr (the "
            "LPDDR tier of an HBM+LPDDR board, H2M2's hardware), lpddr-only (that board "
            "holding every weight and the KV cache in LPDDR: the comparison)",
            choices=COLD_TIERS,
        ),
        OptionSpec(
            "moe_routing_zipf",
            float,
            0.0,
            "Zipf exponent of the experts' popularity (0 = uniform routing)",
            minimum=0.0,
            maximum=10.0,
        ),
        OptionSpec(
            "link",
            str,
            "",
            "the catalog link between GPU and host (default: the GPU's own host link)",
            catalog="links",
        ),
    )

    @classmethod
    def _link(cls, system: SystemSpec, opts: Mapping[str, Any], gpu: DeviceSpec) -> LinkSpec:
        link = resolve_link(system, opts) if opts["link"] else None
        link = link or gpu.host_link
        if link is None:
            raise SpecError("options.link", f"{gpu.slug} has no host link: name one")
        return link

    @classmethod
    def resident_experts(cls, model: ModelSpec, gpu: DeviceModel, opts: Mapping[str, Any]) -> int:
        """The routed experts per MoE layer the GPU keeps (CapacityError naming
        ``options.gpu_experts`` when not even one fits)."""
        moe = model.moe
        assert moe is not None
        asked = int(opts["gpu_experts"])
        cap = gpu.memory_capacity_bytes * float(opts["memory_utilization"])
        if asked:
            if asked > moe.n_experts:
                raise SpecError("options.gpu_experts", f"{model.slug} has {moe.n_experts} experts")
            need = gpu.weights_bytes(resident_model(model, asked))
            if need >= cap:
                raise CapacityError(
                    "options.gpu_experts",
                    f"{asked} experts per layer need {need / 1e9:.1f} GB of weights; "
                    f"{gpu.device.slug} offers {cap / 1e9:.1f} GB",
                )
            return asked
        budget = cap - gpu.memory_capacity_bytes * float(opts["kv_memory_fraction"])
        best = 0
        lo, hi = 1, moe.n_experts
        while lo <= hi:  # weights grow with the experts kept: the largest that fits
            mid = (lo + hi) // 2
            if gpu.weights_bytes(resident_model(model, mid)) <= budget:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if not best:
            raise CapacityError(
                "options.gpu_experts",
                f"{model.slug}'s resident part does not fit {gpu.device.slug} even with one "
                "expert per layer",
            )
        return best

    @classmethod
    def check_system(cls, system: SystemSpec, model: ModelSpec) -> None:
        """A mixture of experts without expert parallelism; ``cold_tier`` host: GPUs, one
        host per GPU, a link and a resident part that fits; lpddr / lpddr-only: HBM+LPDDR
        boards alone, their parts fitting their tiers."""
        opts = cls.resolve_options(system.options)
        if model.moe is None:
            raise SpecError("model", f"{model.slug} is not a mixture of experts")
        if model.moe.expert_parallel > 1:
            raise SpecError("options", "expert offloading runs without expert parallelism")
        gpus, hosts = system.by_role("gpu"), system.by_role("host")
        tier = str(opts["cold_tier"])
        if tier != "host":
            cls._check_board(system, model, opts)
            return
        if opts["offload_mode"] not in MODES:
            raise SpecError("options.offload_mode", f"must be one of {', '.join(MODES)}")
        if opts["expert_overlap"]:
            raise SpecError("options.expert_overlap", "applies to cold_tier lpddr only")
        n_gpu = sum(p.count for p in gpus)
        for p in gpus:
            if p.device.kind != "gpu":
                raise SpecError(
                    "devices", f"{p.device.slug} is not a GPU: name cold_tier lpddr for a board"
                )
        if sum(p.count for p in hosts) != n_gpu:
            raise SpecError("devices", f"give one host CPU per GPU ({n_gpu})")
        for p in gpus:
            cls._link(system, opts, p.device)
            cls.resident_experts(model, build_device_model(p.device, p.runtime), opts)

    @classmethod
    def _check_board(cls, system: SystemSpec, model: ModelSpec, opts: Mapping[str, Any]) -> None:
        """``cold_tier`` lpddr / lpddr-only: HBM+LPDDR boards only, no host, and the parts
        fit their tiers."""
        tier = str(opts["cold_tier"])
        if system.by_role("host"):
            raise SpecError("devices", f"cold_tier {tier} runs on the board alone: no host role")
        if opts["offload_mode"] not in TIER_MODES:
            raise SpecError(
                "options.offload_mode",
                f"with cold_tier {tier} must be one of {', '.join(TIER_MODES)}",
            )
        if tier == "lpddr-only" and opts["expert_overlap"]:
            raise SpecError("options.expert_overlap", "applies to cold_tier lpddr only")
        assert model.moe is not None
        for p in system.by_role("gpu"):
            hw = board_hardware(p.device)  # SpecError naming devices without both tiers
            if tier == "lpddr-only":
                side = SideModel(p.device, p.runtime, hw.lpddr_only())
                need = side.weights_bytes(model)
                cap = side.memory_capacity_bytes * float(opts["memory_utilization"])
                if need >= cap:
                    raise CapacityError(
                        "devices",
                        f"{model.slug}'s weights ({need / 1e9:.1f} GB) do not fit "
                        f"{p.device.slug}'s LPDDR ({cap / 1e9:.1f} GB usable)",
                    )
                continue
            hbm = SideModel(p.device, p.runtime, hw.hbm)
            resident = cls.resident_experts(model, hbm, opts)
            board = TieredBoard(p.device, p.runtime, resident, str(opts["offload_mode"]))
            cold = board.lpddr_weights_bytes(model)
            if cold > hw.lpddr.capacity_bytes:
                raise CapacityError(
                    "options.gpu_experts",
                    f"the cold experts ({cold / 1e9:.1f} GB) do not fit {p.device.slug}'s "
                    f"LPDDR ({hw.lpddr.capacity_gb:g} GB)",
                )

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run every GPU (with its host) as one engine unit of continuous batching."""
        self.check_system(system, model)
        opts = self.resolve_options(system.options)
        model = model.with_routing_zipf(float(opts["moe_routing_zipf"]))
        if opts["cold_tier"] != "host":
            return self._simulate_board(system, model, requests, opts, progress)
        hosts = system.by_role("host")
        host = hosts[0]
        cpu = self.device_models(host.device, host.runtime)
        if not isinstance(cpu, CpuModel):
            raise SpecError("devices", "the host role needs a CPU device")
        index = [i for i, p in enumerate(system.devices) if p.role == "gpu"]
        gpus = [system.devices[i] for i in index]
        made: list[OffloadedGpu] = []

        def factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            gpu = self.device_models(device, runtime)
            resident = self.resident_experts(model, gpu, opts)
            dm = OffloadedGpu(
                gpu, cpu, self._link(system, opts, device), resident, str(opts["offload_mode"])
            )
            made.append(dm)
            return dm

        units = build_units(
            gpus,
            model,
            factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=lambda p, dm: dm.host_sampling_s(model),
            placement_index=index,
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
        prompt = round(float(requests.input_tokens.mean())) if len(requests.input_tokens) else 1
        out.extra["options"] = opts
        out.extra["expert_offload"] = made[0].report(model, int(opts["max_batch"]), max(1, prompt))
        return out

    def _simulate_board(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        opts: Mapping[str, Any],
        progress: ProgressFn | None,
    ) -> SimOutput:
        """``cold_tier`` lpddr / lpddr-only: every board one engine unit (see :mod:`.tiered`)."""
        tier = str(opts["cold_tier"])
        index = [i for i, p in enumerate(system.devices) if p.role == "gpu"]
        boards = [system.devices[i] for i in index]
        made: list[SideModel | TieredBoard] = []

        def factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            hw = board_hardware(device)
            dm: SideModel | TieredBoard
            if tier == "lpddr-only":
                dm = SideModel(device, runtime, hw.lpddr_only())
            else:
                resident = self.resident_experts(model, SideModel(device, runtime, hw.hbm), opts)
                dm = TieredBoard(
                    device,
                    runtime,
                    resident,
                    str(opts["offload_mode"]),
                    bool(opts["expert_overlap"]),
                )
            made.append(dm)
            return dm

        units = build_units(
            boards,
            model,
            factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=lambda p, dm: dm.host_sampling_s(model),
            placement_index=index,
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
        prompt = round(float(requests.input_tokens.mean())) if len(requests.input_tokens) else 1
        out.extra["options"] = opts
        first = made[0]
        out.extra["expert_offload"] = (
            first.report(model, int(opts["max_batch"]), max(1, prompt))
            if isinstance(first, TieredBoard)
            else lpddr_only_report(model, first)
        )
        return out
