"""GLITCHES: GPU prefill, FPGA decode, KV cache streamed over PCIe (GLITCHES §III).

See :class:`GlitchesPolicy` for the behaviour and every assumption: it is the
disaggregated family's scheduler (:class:`~simulations.core.policies.disaggregated.sim.
DisaggSim`) configured with GLITCHES' rules; :func:`kv_transfer_seconds` is the Fig. 8
transfer model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.parallel import ParallelGroup, shard_model
from simulations.core.engine.core import ProgressFn, SimOutput, Unit, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies.base import OptionSpec, RoleSpec, group_link, register
from simulations.core.policies.disaggregated.sim import GLITCHES, DisaggSim, Scheduling
from simulations.core.policies.disaggregated.transfer import Hop
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
from simulations.core.spec import (
    DeviceKind,
    DevicePlacement,
    DeviceSpec,
    ModelSpec,
    RuntimeProfile,
    SystemSpec,
)

from . import screen


def kv_transfer_seconds(
    model: ModelSpec, seq_len: int, gpu: DeviceSpec, fpga: DeviceSpec, fpga_kv_bits: int
) -> float:
    """Whole-KV GPU → host → FPGA latency, not overlapped (what Fig. 8 plots).

    §V: "The GPU to FPGA latency is obtained by adding the latency from GPU to CPU and from
    CPU to FPGA"; the KV cache is quantised to the FPGA's KV precision before it leaves the
    GPU (§III), so both hops carry the quantised bytes.
    """
    if gpu.host_link is None:
        raise SpecError(f"{gpu.slug}.host_link", "GLITCHES needs a PCIe host link per device")
    if fpga.host_link is None:
        raise SpecError(f"{fpga.slug}.host_link", "GLITCHES needs a PCIe host link per device")
    nbytes = model.kv_bytes_per_token(fpga_kv_bits) * seq_len
    return gpu.host_link.transfer_s(nbytes) + fpga.host_link.transfer_s(nbytes)


@register
class GlitchesPolicy(EnginePolicy):
    """GLITCHES GPU–FPGA collaborative serving (GLITCHES §III, Figs. 3–4).

    A configuration of the disaggregated family: the prefill pool is the GPUs, the decode
    pool the FPGAs, and the family's scheduler (:class:`~simulations.core.policies.
    disaggregated.sim.DisaggSim`) runs with GLITCHES' rules (:data:`~simulations.core.
    policies.disaggregated.sim.GLITCHES`): FCFS FPGA dispatch, one shared FCFS prefill
    queue, GPU fallback decode when every FPGA is busy, the host sampling round trip of
    the first token, FIFO PCIe links, batch-1 decode on the FPGAs. Implemented as §III-C
    describes:

    - Every GPU and FPGA holds the whole model; GPUs (role ``prefill``) prefill in FP16
      with their runtime profile, FPGAs (role ``decode``) decode with theirs (FlightLLM
      W4A8 by default), one request at a time — the latency-sensitive batch-1 setting.
    - The KV cache is quantised on the GPU to the FPGA runtime's KV precision and sent
      GPU → host → FPGA HBM over each device's PCIe host link, layer by layer, overlapped
      with the prefill (Fig. 4): layer *i*'s transfer starts when its prefill is done, and
      the decode starts only when the last layer's KV (and the sampled first token) has
      arrived. The GPU frees the request's KV memory then.
    - Decode tasks go to idle FPGAs first-come-first-served. When every FPGA is busy and
      no prefill waits, a GPU decodes a waiting request itself, keeping its KV cache (no
      transfer); a waiting prefill pre-empts such a substitute decode at the next
      iteration boundary, and the GPU resumes it afterwards.
    - A prefill waits in the queue while the GPU lacks memory for its KV cache.
    - Each FPGA decode iteration adds the per-token logits → host → token round trip over
      the FPGA's PCIe link (the FPGA model's ``host_sampling_s``).
    - FPGA decode uses the §IV prefetch model with ratio ``prefetch_ratio`` (default 4).

    Assumptions where the paper is silent (deviations from nothing stated, but choices):

    - The prefill is split evenly over the layers for the pipeline (the LM head and the
      embedding are lumped in); KV quantisation time on the GPU is neglected.
    - A request whose decode cannot start on an FPGA at its prefill (every FPGA busy)
      waits with its KV on the GPU; when an FPGA frees up first, the whole KV is then sent
      (still layer-pipelined over the two hops, but no longer hidden behind a prefill).
    - A GPU reserves the FP16 KV of the prompt when the request streams to an FPGA, and of
      prompt plus output otherwise (it may have to decode it); an FPGA reserves the
      request's whole KV in its HBM region. Each PCIe link direction is a FIFO resource
      booked from its first to its last chunk; logits/token messages do not contend.
    - TTFT is the end of the GPU prefill (the first token is sampled from its logits); a
      GPU's own decode adds no host round trip (the GPU runtime profile includes sampling).
    - A paused GPU decode stays on its GPU (its KV cache is not moved to an FPGA).
    """

    name: ClassVar[str] = "glitches"
    #: GLITCHES' rules in the disaggregated family (``gpu_decode`` sets the fallback).
    scheduling: ClassVar[Scheduling] = GLITCHES
    summary: ClassVar[str] = (
        "GPU prefill, FPGA decode with layer-pipelined KV transfer over PCIe (GLITCHES §III)"
    )
    roles: ClassVar[tuple[RoleSpec, ...]] = (
        RoleSpec(
            "prefill", "GPUs that prefill (FP16) and decode when every FPGA is busy", ("gpu",)
        ),
        RoleSpec("decode", "FPGAs that decode one request at a time", ("fpga",), required=False),
    )
    single_node: ClassVar[bool] = True
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec(
            "prefetch_ratio",
            int,
            4,
            "FPGA data-prefetch ratio M (§IV): each memory instruction fetches the data of "
            "the next M compute instructions; 1 = plain FlightLLM",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "gpu_decode",
            bool,
            True,
            "let an idle GPU decode when every FPGA is busy and no prefill waits (§III-C)",
        ),
        OptionSpec(
            "tensor_parallel",
            int,
            1,
            "GPUs of the prefill role one prefill group's heads, KV heads and FFN widths are "
            "split across (two all-reduces per layer over the link); 1 = the paper's GPUs",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "link",
            str,
            "",
            "the catalog interconnect a prefill group's GPUs all-reduce over (nvlink4, "
            "pcie5-x16, …); when tensor_parallel > 1 it is required unless the GPUs' records "
            "share a peer link, which is the default",
            catalog="links",
        ),
    )

    @classmethod
    def check_system(cls, system: SystemSpec, model: ModelSpec) -> None:
        """A tensor-parallel prefill group: a degree that divides the model's heads, KV
        heads and FFN width, a link, GPU counts that are whole groups, and each GPU's
        share of the weights within its memory."""
        opts = cls.resolve_options(system.options)
        tp = int(opts["tensor_parallel"])
        if tp == 1:
            return
        for name, what in (
            ("n_heads", "attention heads"),
            ("n_kv_heads", "KV heads"),
            ("ffn_size", "FFN width"),
        ):
            size = getattr(model, name)
            if size % tp:
                raise SpecError(
                    "options.tensor_parallel",
                    f"{tp} does not divide {model.slug}'s {size} {what} ({name})",
                )
        gpus = [p for p in system.devices if p.device.kind is DeviceKind.GPU]
        if group_link(system, opts, gpus) is None:
            raise SpecError(
                "options.link",
                f"name the interconnect of the {tp}-GPU groups (the GPUs' records share no "
                "peer link)",
            )
        for j, p in enumerate(system.devices):
            if p.device.kind is not DeviceKind.GPU:
                continue
            if p.count % tp:
                raise SpecError(
                    f"devices[{j}].count",
                    f"{p.count} GPUs do not form prefill groups of tensor_parallel = {tp}",
                )
            dm = build_device_model(p.device, p.runtime)
            need = dm.weights_bytes(shard_model(model, tp))
            if need >= dm.memory_capacity_bytes:
                raise CapacityError(
                    "options.tensor_parallel",
                    f"{model.slug} needs {need / 1e9:.1f} GB of weights per GPU at "
                    f"tensor_parallel {tp} but {p.device.slug} has "
                    f"{dm.memory_capacity_bytes / 1e9:.1f} GB; raise the degree",
                )

    @classmethod
    def unsearchable_option(cls, name: str, value: Any) -> str | None:
        """The planner's GLITCHES screen bounds one GPU per prefill unit."""
        if name == "tensor_parallel" and value != 1:
            return "the planner does not search tensor parallelism for glitches yet"
        return None

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """Build the scheduler on one device per role: its constructor checks every memory."""
        system = SystemSpec("fit", cls.name, ctx.placements(sig), options)
        cls().build_sim(system, ctx.model, ctx.requests)

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
        """See :mod:`.screen`."""
        return screen.bounds(ctx, sig, options, cmax)

    def build_sim(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> DisaggSim:
        """The family's scheduler for ``system`` on ``requests`` with GLITCHES' rules
        (:attr:`scheduling`; ``gpu_decode`` switches the fallback decode), ready to
        :meth:`~DisaggSim.run`: GPUs are the prefill pool, FPGAs the decode pool, the KV
        moves over the host round trip of their PCIe links."""
        opts = self.resolve_options(system.options)
        gpus_p: list[tuple[int, DevicePlacement]] = []
        fpgas_p: list[tuple[int, DevicePlacement]] = []
        for i, p in enumerate(system.devices):
            if p.role == "prefill" or (not p.role and p.device.kind is DeviceKind.GPU):
                if p.device.kind is not DeviceKind.GPU:
                    raise SpecError(f"devices[{i}].role", "the prefill role needs a GPU")
                gpus_p.append((i, p))
            elif p.role == "decode" or (not p.role and p.device.kind is DeviceKind.FPGA):
                if p.device.kind is not DeviceKind.FPGA:
                    raise SpecError(f"devices[{i}].role", "the decode role needs an FPGA")
                fpgas_p.append((i, p))
            else:
                raise SpecError(
                    f"devices[{i}].role", "GLITCHES roles are 'prefill' (GPU) or 'decode' (FPGA)"
                )
        if not gpus_p:
            raise SpecError("devices", "GLITCHES needs at least one GPU in the prefill role")
        prefetch = int(opts["prefetch_ratio"])

        def fpga_factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            return self.device_models(device, runtime).with_settings({"prefetch_ratio": prefetch})

        tp = int(opts["tensor_parallel"])
        gpu_placements = [p for _, p in gpus_p]
        gpu_factory = self.device_models
        if tp > 1:
            self.check_system(system, model)
            link = group_link(system, opts, gpu_placements)
            # one prefill unit per group of ``tp`` GPUs
            gpu_placements = [replace(p, count=p.count // tp) for p in gpu_placements]

            def gpu_factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
                return ParallelGroup(self.device_models(device, runtime), tp, 1, link=link)

        gpus = build_units(
            gpu_placements,
            model,
            gpu_factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            placement_index=[i for i, _ in gpus_p],
        )
        fpgas = build_units(
            [p for _, p in fpgas_p],
            model,
            fpga_factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=lambda p, dm: dm.host_sampling_s(model),
            first_index=len(gpus),
            placement_index=[i for i, _ in fpgas_p],
        )
        kv_bits = {p.runtime.kv_bits for _, p in fpgas_p}
        if len(kv_bits) > 1:
            raise SpecError("devices", "all FPGAs of a GLITCHES system must share a KV precision")
        fpga_kv_bytes = model.kv_bytes_per_token(kv_bits.pop() if kv_bits else 16)
        gpu_decode = bool(opts["gpu_decode"])
        if not fpgas and not gpu_decode:
            raise SpecError("options.gpu_decode", "with no FPGA the GPUs must decode")
        sim = DisaggSim(
            requests,
            gpus,
            fpgas,
            path=_host_round_trip,
            kv_bits=lambda _unit: fpga_kv_bytes,
            prefill_batch=[1] * len(gpus),
            decode_batch=[1] * len(fpgas),
            prefill_max_tokens=1,  # unused: the shared queue prefills one prompt at a time
            memory_utilization=1.0,
            overlap=True,
            scheduling=replace(self.scheduling, fallback_decode=gpu_decode),
            reference=self.reference,
            audit=self.audit,
            progress=progress,
        )
        sim.extra["options"] = opts
        return sim

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run the scheduler on ``requests`` and return the raw outcome."""
        return self.build_sim(system, model, requests, progress).run()


def _host_round_trip(gpu: Unit, fpga: Unit) -> Sequence[Hop]:
    """GPU → host → FPGA over each device's PCIe host link (§V)."""
    for u in (gpu, fpga):
        if u.device.host_link is None:
            raise CapacityError("host_link", f"{u.slug} has no host link to transfer over")
    assert gpu.device.host_link is not None and fpga.device.host_link is not None
    return (
        Hop((gpu.link_out,), gpu.device.host_link),
        Hop((fpga.link_in,), fpga.device.host_link),
    )
