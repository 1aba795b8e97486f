"""The ``moe-offload`` policy: a mixture of experts on GPUs too small for all its experts,
the cold experts in host memory (see :mod:`.offload` for the cost of each GPU)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.cpu import CpuModel
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import ProgressFn, SimOutput, Unit, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies.base import OptionSpec, RoleSpec, register, resolve_link
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
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
#: ``cold_tier`` host: the ``gpu`` role takes the devices the host offload is modelled for
#: (a GPU's own memory and host link; a board's tiers are ``cold_tier`` lpddr's), each
#: with its host CPU.
HOST_TIER_ROLES = (replace(GPU_ROLE, kinds=("gpu",)), replace(HOST_ROLE, required=True))
#: Where the cold experts live: host memory, or the LPDDR tier of a two-tier board
#: (:mod:`.tiered`); ``lpddr-only`` is that board holding everything in LPDDR.
COLD_TIERS = ("host", "lpddr", "lpddr-only")


#: How a recommendation's reasons say where the per-layer rule ran the offloaded experts
#: (streamed ones run where the hot experts do: the GPU, or a board's HBM chip).
_WHERE = {
    "cpu": "computed by the host CPU",
    "lpddr": "computed by the LPDDR chip",
    "stream": "streamed to the {near}",
    "none": "not touched",
}


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
    count), its energy counted into the GPU's while it computes.

    The capacity planner searches it like the other engine policies: list the values of
    ``gpu_experts`` (the offload split), ``offload_mode`` and ``cold_tier`` to try; the host
    count follows the GPU count (:attr:`paired_roles`).
    """

    name: ClassVar[str] = "moe-offload"
    summary: ClassVar[str] = (
        "Mixture of experts with cold experts in host memory, run on the host CPU or streamed"
    )
    roles: ClassVar[tuple[RoleSpec, ...]] = (GPU_ROLE, HOST_ROLE)
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
        offloading = HOST_TIER_ROLES[0].kinds
        for p in gpus:
            if p.device.kind not in offloading:
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

    # --- the capacity planner's screen ------------------------------------------------------

    unscreened_why: ClassVar[str] = ""
    #: One host CPU beside every GPU (``cold_tier`` host): the planner pairs their counts.
    paired_roles: ClassVar[Mapping[str, str]] = {HOST_ROLE.name: GPU_ROLE.name}

    role_options: ClassVar[tuple[str, ...]] = ("cold_tier",)

    @classmethod
    def plan_roles(cls, options: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
        """``cold_tier`` host: GPUs, each with a host CPU (required); lpddr / lpddr-only:
        HBM+LPDDR boards alone (no host role)."""
        if options["cold_tier"] == "host":
            return HOST_TIER_ROLES
        return (replace(GPU_ROLE, kinds=("memory-accel",)),)

    @classmethod
    def plan_model_error(cls, model: ModelSpec) -> str | None:
        """Offloading places routed experts: a dense model has none."""
        if model.moe is None:
            return f"{model.slug} is not a mixture of experts: there are no experts to offload"
        return None

    @classmethod
    def plan_option_error(cls, model: ModelSpec, name: str, value: Any) -> str | None:
        """A ``gpu_experts`` beyond the model's routed experts per layer is no split."""
        if name == "gpu_experts" and model.moe is not None and value > model.moe.n_experts:
            return f"{model.slug} has {model.moe.n_experts} routed experts per MoE layer"
        return None

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> Unit:
        """Build the engine's scheduler on one GPU (with its host) or one board as
        :meth:`simulate` builds it, after the scenario parser's checks (a mixture of
        experts, the roles the ``cold_tier`` needs, a link, a resident part and cold experts
        that fit): its constructor checks the memory. Returns that engine unit."""
        placements = ctx.placements(sig)
        system = SystemSpec("fit", cls.name, placements, cls.resolve_options(options))
        sim = cls(timeline_cap=0).build_sim(system, ctx.model, ctx.requests)
        return sim.units[0]

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
        """Every GPU (with its host) or board serves whole requests with the engine's
        continuous batching, so the bounds are the screen's bounds of units that serve whole
        requests, costed on the unit :meth:`screen_fit` built (count column 0, the
        ``gpu`` role). The per-request floors hold because the offloaded experts' time of a
        pass only grows with its tokens (both ways of running them, and so the faster, are
        monotone in the routed copies and the distinct experts touched). The batched work
        floor is the GPU's compute for prefill and, for decode on a GPU with a host, each
        step's offloaded experts at ``max_batch`` shared by the batch (see the comment);
        a board's decode has none (its chips state no rate): weak there, but sound. Hosts
        draw no power of their own in the engine (their compute is charged into the GPU's
        energy): count column 1 has none."""
        key = ("offload", sig.roles, sig.options)
        t = ctx.table_of(key, lambda: fitted)
        max_batch = int(options["max_batch"])
        dm = fitted.dm
        if isinstance(dm, OffloadedGpu) and max_batch > 1:
            # A decode step of B sequences waits for its offloaded experts, f(B) per MoE
            # layer. Every term of f (routed copies, linear in B; distinct experts touched,
            # concave and 0 at B = 0; a link latency) has f(B) / B non-increasing, and so
            # do their max, sum and min: a sequence's share of a step is at least
            # f(max_batch) / max_batch, charged like a weight stream shared by the batch.
            model = ctx.model.with_routing_zipf(float(options["moe_routing_zipf"]))
            seconds, _host_s, _where = dm.layer_offload(model, max_batch)
            t = replace(t, weights_s=t.weights_s + model.moe_layers * seconds)
        b = ctx.whole_requests(t, max_batch, key, cmax)
        if b is not None:
            b.power_w = (*b.power_w, *(0.0,) * (len(sig.roles) - 1))
        return b

    @classmethod
    def explain(cls, entry: Mapping[str, Any]) -> list[str]:
        """The offload split of the recommended system and which phase binds its GPU (the
        larger of its prefill and decode busy fractions), with where the rule ran the
        offloaded experts for a decode step at ``max_batch`` and for a prefill."""
        block = (entry.get("scheduler") or {}).get("expert_offload")
        if not isinstance(block, Mapping):
            return []
        devices = [d for d in entry.get("devices", ()) if d.get("role") == "gpu"]
        phase = ""
        if devices:
            pre = float(devices[0].get("prefill_fraction") or 0.0)
            dec = float(devices[0].get("decode_fraction") or 0.0)
            busy = float(devices[0].get("busy_fraction") or 0.0)
            binds = "decode" if dec >= pre else "prefill"
            unit = "GPU" if block.get("cold_tier", "host") == "host" else "board"
            phase = (
                f" Each {unit} is {busy:.0%} busy ({pre:.0%} prefilling, {dec:.0%} "
                f"decoding): {binds} binds."
            )
        if block.get("cold_tier") == "lpddr-only":
            return [
                "Expert offloading, cold_tier lpddr-only: every weight and the KV cache in the "
                f"board's LPDDR ({block['lpddr_weights_gb']:.1f} GB of weights).{phase}"
            ]
        tiered = block.get("cold_tier") == "lpddr"
        near, far = ("HBM", "LPDDR") if tiered else ("GPU", "host")
        chip = "HBM chip" if tiered else "GPU"
        hot = block["hbm_experts_per_layer" if tiered else "gpu_experts_per_layer"]
        cold = block["lpddr_experts_per_layer" if tiered else "host_experts_per_layer"]
        hot_gb = block["hbm_weights_gb" if tiered else "gpu_weights_gb"]
        cold_gb = block["lpddr_weights_gb" if tiered else "host_weights_gb"]
        dec, pre = block["decode_max_batch"], block["prefill"]
        return [
            f"Expert offloading (offload_mode {block['offload_mode']}): {hot} routed experts "
            f"per MoE layer on the {near} ({hot_gb:.1f} GB of weights), {cold} on the {far} "
            f"({cold_gb:.1f} GB).{phase}",
            f"The offloaded experts are {_WHERE[dec['runs_on']].format(near=chip)} for a "
            f"decode step of {dec['tokens']} sequences ({dec['layer_ms']:.2f} ms per MoE "
            f"layer) and {_WHERE[pre['runs_on']].format(near=chip)} for a "
            f"{pre['tokens']}-token prefill "
            f"({pre['layer_ms']:.2f} ms per MoE layer).",
        ]

    # --- running --------------------------------------------------------------------------

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run every GPU (with its host) or board as one engine unit of continuous batching;
        the result's ``expert_offload`` block reports the first one's split."""
        opts = self.resolve_options(system.options)
        made: list[OffloadedGpu | SideModel | TieredBoard] = []
        sim = self.build_sim(system, model, requests, progress, made)
        out = sim.run()
        model = model.with_routing_zipf(float(opts["moe_routing_zipf"]))
        prompt = round(float(requests.input_tokens.mean())) if len(requests.input_tokens) else 1
        out.extra["options"] = opts
        first = made[0]
        out.extra["expert_offload"] = (
            lpddr_only_report(model, first)
            if isinstance(first, SideModel)
            else first.report(model, int(opts["max_batch"]), max(1, prompt))
        )
        return out

    def build_sim(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
        made: list[OffloadedGpu | SideModel | TieredBoard] | None = None,
    ) -> BatchingSim:
        """The engine's scheduler for ``system`` (checked as the scenario parser checks
        it), ready to run; the device models it builds are appended to ``made``."""
        self.check_system(system, model)
        opts = self.resolve_options(system.options)
        model = model.with_routing_zipf(float(opts["moe_routing_zipf"]))
        built: list[OffloadedGpu | SideModel | TieredBoard] = [] if made is None else made
        if opts["cold_tier"] != "host":
            factory = self._board_factory(model, opts, built)
        else:
            factory = self._host_factory(system, model, opts, built)
        index = [i for i, p in enumerate(system.devices) if p.role == "gpu"]
        units = build_units(
            [system.devices[i] for i in index],
            model,
            factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=lambda p, dm: dm.host_sampling_s(model),
            placement_index=index,
        )
        return BatchingSim(
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

    def _host_factory(
        self,
        system: SystemSpec,
        model: ModelSpec,
        opts: Mapping[str, Any],
        made: list[OffloadedGpu | SideModel | TieredBoard],
    ) -> Callable[[DeviceSpec, RuntimeProfile], DeviceModel]:
        """``cold_tier`` host: each GPU's model with its offloaded experts on the host."""
        host = system.by_role("host")[0]
        cpu = self.device_models(host.device, host.runtime)
        if not isinstance(cpu, CpuModel):
            raise SpecError("devices", "the host role needs a CPU device")

        def factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            gpu = self.device_models(device, runtime)
            resident = self.resident_experts(model, gpu, opts)
            dm = OffloadedGpu(
                gpu, cpu, self._link(system, opts, device), resident, str(opts["offload_mode"])
            )
            made.append(dm)
            return dm

        return factory

    def _board_factory(
        self,
        model: ModelSpec,
        opts: Mapping[str, Any],
        made: list[OffloadedGpu | SideModel | TieredBoard],
    ) -> Callable[[DeviceSpec, RuntimeProfile], DeviceModel]:
        """``cold_tier`` lpddr / lpddr-only: every board's model (see :mod:`.tiered`)."""
        tier = str(opts["cold_tier"])

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

        return factory
