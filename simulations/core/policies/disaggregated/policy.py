"""The ``disaggregated`` policy: a prefill pool and a decode pool of any catalog devices and
the KV hand-over between them. See :class:`DisaggregatedPolicy`."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from simulations.core.devices import build_device_model, device_family
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.parallel import ParallelGroup, shard_model
from simulations.core.engine.core import (
    Link,
    ProgressFn,
    SimOutput,
    Unit,
    build_units,
)
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import CapacityError, SpecError
from simulations.core.metrics import system_result
from simulations.core.policies.base import OptionSpec, RoleSpec, register
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
from simulations.core.spec import (
    DevicePlacement,
    DeviceSpec,
    LinkSpec,
    ModelSpec,
    RuntimeProfile,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)

from .sim import DisaggSim, Scheduling
from .transfer import Hop

ROLES = ("prefill", "decode")


def _catalog_link(value: str, field: str) -> LinkSpec:
    """The shipped catalog's link ``value``; SpecError naming ``field`` when unknown."""
    from simulations.core.catalog import builtin_catalog

    try:
        return builtin_catalog().link(value)
    except SpecError as exc:
        raise SpecError(field, exc.message) from None


def _batch_limit(device: DeviceSpec, option: int) -> int:
    """Sequences one instance of ``device`` processes together: the option, capped by what
    its family's design holds in one pass (``DeviceModel.max_sequences_per_pass``: 1 for the
    FPGA's FlightLLM-style decode, which "decodes one request at a time", GLITCHES §III-C,
    §V)."""
    cap = device_family(device.kind).max_sequences_per_pass
    return option if cap is None else min(option, cap)


@register
class DisaggregatedPolicy(EnginePolicy):
    """Disaggregated prefill/decode serving on two pools of any devices.

    The idea of GLITCHES §III (GPU prefill, FPGA decode, KV streamed over PCIe layer by
    layer, Fig. 4) generalised as Splitwise (Patel et al., ISCA'24: phase-split pools of
    possibly different GPU types, layer-wise KV transfer overlapped with the prefill,
    §4.2–4.3) and DistServe (Zhong et al., OSDI'24: prefill and decode instances with their
    own parallelism, sized per phase, KV pulled by the decode instance, §4) describe it:

    - Role ``prefill`` holds the prefill pool, role ``decode`` the decode pool; each is any
      catalog devices (mixed types allowed, one placement per type) with its own runtime
      profile. ``prefill_tensor_parallel`` / ``decode_tensor_parallel`` devices of one
      placement form one instance (a :class:`~simulations.core.devices.parallel.
      ParallelGroup` over ``link``). Every instance holds the whole model.
    - A request is routed on arrival to the prefill instance with the fewest outstanding
      prompt tokens, which prefills FCFS batches of up to ``prefill_max_batched_tokens``
      (one prompt at a time on an FPGA). TTFT is the prefill's end.
    - The request is then handed to the decode instance with the most free KV memory
      among those with a free slot (``decode_max_batch``; 1 on an FPGA) and room for its
      whole KV cache (prompt plus output, reserved at hand-over, as GLITCHES' FPGAs
      reserve it). With ``kv_overlap`` the instance is chosen when the prefill starts and
      the KV streams layer by layer behind it (Fig. 4, Splitwise §4.3); otherwise, or
      when no decode instance had room then, the KV moves after the prefill (DistServe).
    - The KV moves over ``kv_link`` (a catalog link between the two instances, held on
      the sender's egress and the receiver's ingress for the bytes' time; concurrent
      streams interleave, see :func:`.transfer.move`), by default over a
      host round trip (the sender's PCIe host link to the host, the receiver's to the
      device, GLITCHES §V's "adding the latency from GPU to CPU and from CPU to FPGA").
      It carries the decode stack's KV precision (quantised by the sender, §III). With
      ``kv_free`` it costs nothing: the *ideal split*, an upper bound on any link.
    - Backpressure: a prefilled request no decode instance can take waits at the
      hand-over (FIFO) with its KV on the prefill instance, whose KV pool
      (``memory_utilization`` × memory − weights) then admits fewer prefills.
    - Decode instances run continuous batching of decode iterations; a sequence joins at
      the next iteration boundary after its KV (and first token) arrived. A device that
      samples on the host (FPGA) adds its logits round trip to every step (GLITCHES §III).
    - *Multi-node* (``devices_per_node`` > 0): the system's devices fill nodes of that
      size in the order they are listed. A KV transfer between instances on different
      nodes, and the collectives of a tensor-parallel group that spans nodes, use
      ``nic_link`` (one NIC per node and direction, held like a link) — GLITCHES §III's
      multi-node deployment over Ethernet.

    Deviations and assumptions: output lengths are known at hand-over, so a decode
    instance reserves a request's final KV size and never preempts (vLLM would grow and
    preempt; DistServe §4 also reserves); every request must fit alone on every instance
    of both pools; TTFT excludes returning the token to the client; a cross-node KV
    transfer is one NIC hop (GPUDirect RDMA: the NIC reads device memory over PCIe, which
    is faster than the NIC); a transfer of a tensor-parallel group's KV is split over
    ``min(tp_prefill, tp_decode)`` parallel device links; a prefill batch's per-layer time
    is its total over the layers; the decode pool's routing ignores queue lengths of the
    prefill pool; the collectives of a tensor-parallel group that spans nodes are costed
    over ``nic_link`` but do not occupy the NIC lanes the KV transfers book; the KV of an
    FPGA prefill instance is read out like a GPU's (no host sampling round trip for the
    first token). GLITCHES' own rules (FCFS FPGA dispatch, GPU fallback decode when every
    FPGA is busy, the host sampling round trip of the first token, FIFO PCIe links) are this
    family's scheduler configured by :attr:`scheduling` (:data:`.sim.GLITCHES`): the
    ``glitches`` policy.
    """

    name: ClassVar[str] = "disaggregated"
    summary: ClassVar[str] = (
        "Prefill pool and decode pool of any devices, KV moved over a link "
        "(Splitwise/DistServe, generalising GLITCHES §III)"
    )
    roles: ClassVar[tuple[RoleSpec, ...]] = (
        RoleSpec("prefill", "devices that prefill prompts (the first token)"),
        RoleSpec("decode", "devices that decode with continuous batching (FPGA: batch 1)"),
    )
    result_blocks: ClassVar[tuple[str, ...]] = ("disaggregated", "scheduler")
    #: The family member's scheduling rules (this policy's are the defaults).
    scheduling: ClassVar[Scheduling] = Scheduling()
    #: The planner places a system on one node (it does not search ``devices_per_node``,
    #: so cross-node transfers are never costed there): its ``max_devices_per_node`` bounds
    #: the whole system. Scenarios may still span nodes with ``devices_per_node``.
    single_node: ClassVar[bool] = True
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec(
            "prefill_tensor_parallel",
            int,
            1,
            "devices of one prefill instance (tensor parallel over link)",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "decode_tensor_parallel",
            int,
            1,
            "devices of one decode instance (tensor parallel over link)",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "link",
            str,
            "",
            "the catalog interconnect tensor-parallel groups all-reduce over within a node "
            "(nvlink4, …); required when a tensor-parallel degree is above 1",
            catalog="links",
        ),
        OptionSpec(
            "kv_link",
            str,
            "",
            "the catalog link the KV cache moves over between a prefill and a decode "
            "instance (nvlink4, pcie4-x16, ethernet-100g, …); empty = a host round trip "
            "over each device's PCIe host link",
            catalog="links",
        ),
        OptionSpec(
            "kv_free",
            bool,
            False,
            "move the KV cache at no cost (the ideal split: an upper bound on any link)",
        ),
        OptionSpec(
            "kv_overlap",
            bool,
            True,
            "stream the KV layer by layer behind the prefill (GLITCHES Fig. 4, Splitwise); "
            "off = send it after the prefill (DistServe)",
        ),
        OptionSpec(
            "prefill_max_batched_tokens",
            int,
            4096,
            "most prompt tokens of one prefill batch (a longer single prompt still runs)",
            minimum=1,
            maximum=1_000_000,
        ),
        OptionSpec(
            "prefill_max_batch",
            int,
            64,
            "most prompts of one prefill batch (FPGAs: 1)",
            minimum=1,
            maximum=4096,
        ),
        OptionSpec(
            "decode_max_batch",
            int,
            256,
            "most sequences a decode instance runs together (FPGAs: 1)",
            minimum=1,
            maximum=4096,
        ),
        OptionSpec(
            "memory_utilization",
            float,
            0.9,
            "fraction of device memory for weights and KV cache",
            minimum=0.05,
            maximum=1.0,
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
            "devices_per_node",
            int,
            0,
            "devices per node, filled in the order the devices are listed; 0 = one node",
            minimum=0,
            maximum=1024,
        ),
        OptionSpec(
            "nic_link",
            str,
            "",
            "the catalog link between nodes (ethernet-100g, infiniband-ndr, …); required "
            "when the system spans nodes",
            catalog="links",
        ),
    )

    # --- layout ---------------------------------------------------------------------------

    @classmethod
    def replica_devices(cls, options: Mapping[str, Any]) -> int:
        """Both pools' instances must be whole groups: the planner tries counts that are
        multiples of both degrees (their least common multiple) in every role."""
        return math.lcm(
            int(options["prefill_tensor_parallel"]), int(options["decode_tensor_parallel"])
        )

    @staticmethod
    def _tp(opts: Mapping[str, Any], role: str) -> int:
        return int(opts[f"{role}_tensor_parallel"])

    @classmethod
    def check_system(cls, system: SystemSpec, model: ModelSpec) -> None:
        """Roles, degrees that divide the model and the counts, the links the layout needs
        and every device's share of the weights within its memory."""
        opts = cls.resolve_options(system.options)
        for field in ("kv_link", "nic_link", "link"):
            if opts[field]:
                _catalog_link(str(opts[field]), f"options.{field}")
        roles = {p.role for p in system.devices}
        for j, p in enumerate(system.devices):
            if p.role not in ROLES:
                raise SpecError(f"devices[{j}].role", "roles are 'prefill' and 'decode'")
        for role in ROLES:
            if role not in roles:
                raise SpecError("devices", f"a disaggregated system needs a {role!r} device")
            tp = cls._tp(opts, role)
            if tp == 1:
                continue
            for name, what in (
                ("n_heads", "attention heads"),
                ("n_kv_heads", "KV heads"),
                ("ffn_size", "FFN width"),
            ):
                size = getattr(model, name)
                if size % tp:
                    raise SpecError(
                        f"options.{role}_tensor_parallel",
                        f"{tp} does not divide {model.slug}'s {size} {what} ({name})",
                    )
        layout = _layout(system, opts)
        grouped = {r for r in ROLES if cls._tp(opts, r) > 1}
        within = any(a == b and system.devices[j].role in grouped for j, a, b in layout)
        if within and not opts["link"]:
            raise SpecError("options.link", "name the interconnect of the parallel groups")
        if _nodes(layout) > 1 and not opts["nic_link"]:
            raise SpecError("options.nic_link", "name the link between the system's nodes")
        for j, p in enumerate(system.devices):
            tp = cls._tp(opts, p.role)
            if p.count % tp:
                raise SpecError(
                    f"devices[{j}].count",
                    f"{p.count} devices do not form {p.role} instances of "
                    f"{p.role}_tensor_parallel = {tp}",
                )
            dm = build_device_model(p.device, p.runtime)
            need = dm.weights_bytes(shard_model(model, tp))
            cap = dm.memory_capacity_bytes * float(opts["memory_utilization"])
            if need >= cap:
                raise CapacityError(
                    f"options.{p.role}_tensor_parallel",
                    f"{model.slug} needs {need / 1e9:.1f} GB of weights per device at "
                    f"{p.role}_tensor_parallel {tp} but {p.device.slug} offers "
                    f"{cap / 1e9:.1f} GB (memory × memory_utilization); raise the degree",
                )

    # --- the capacity planner's screen ------------------------------------------------------

    unscreened_why: ClassVar[str] = ""

    @classmethod
    def unsearchable_option(cls, name: str, value: Any) -> str | None:
        """The planner places a system on one node."""
        if name == "devices_per_node" and value != 0:
            return "the planner places a system on one node"
        return None

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """Build the scheduler on one instance per role: its constructor checks that every
        request fits both pools' KV memory (and the layout check refuses what the scenario
        parser refuses: degrees, links, weights per device)."""
        opts = cls.resolve_options(options)
        placements = tuple(replace(p, count=cls._tp(opts, p.role)) for p in ctx.placements(sig))
        system = SystemSpec("fit", cls.name, placements, options)
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
        """Per-request floors only (count column 0 the prefill role, 1 the decode role),
        costed on one instance of each pool built as the engine builds it: a request's
        TTFT is at least its prefill alone (a batch that holds it takes no less), its TPOT
        at least its batch-1 decode steps (a batched step takes no less, and the hand-over
        only adds), its finish the sum. No capacity checks (batching makes per-request
        work non-additive) and an energy floor of every device's idle power over the
        span: weak but sound."""
        opts = cls.resolve_options(options)
        p_entry = sig.role_entry("prefill")
        d_entry = sig.role_entry("decode")
        if p_entry is None or d_entry is None:
            return None
        tables = []
        for role, entry in (("prefill", p_entry), ("decode", d_entry)):
            degree = cls._tp(opts, role)
            if degree == 1:
                tables.append(ctx.table(entry, {"prefetch_ratio": int(opts["prefetch_ratio"])}))
            else:
                make = functools.partial(_instance_unit, ctx, sig, opts, entry, role)
                tables.append(ctx.table_of(("instance", role, entry, sig.options), make))
        p, d = tables
        if not (np.all(np.isfinite(p.prefill_s)) and np.all(np.isfinite(d.decode_s))):
            return None
        per_step = ctx.per_step(d.decode_s)
        return Bounds(
            ttft_req=p.prefill_s,
            tpot_req=per_step[ctx.req.multi],
            finish_req=p.prefill_s + d.decode_s,
            # per device: an instance's idle power is its group's
            power_w=(
                p.idle_w / cls._tp(opts, "prefill"),
                d.idle_w / cls._tp(opts, "decode"),
            ),
        )

    @classmethod
    def explain(cls, entry: Mapping[str, Any]) -> list[str]:
        """Which phase binds (the busier pool, or decode memory when prefilled requests
        queued at the hand-over) and what the KV transfer costs."""
        block = entry.get("disaggregated")
        if not isinstance(block, Mapping):
            return []
        pre, dec = block["prefill_pool"], block["decode_pool"]
        queue = block["handover_queueing"]
        if queue["mean_ms"] > 0:
            phase = (
                f"decode binds: its KV memory was full and prefilled requests waited "
                f"{queue['mean_ms']:.1f} ms on average at the hand-over"
            )
        else:
            busier = "decode" if dec["busy_fraction"] >= pre["busy_fraction"] else "prefill"
            phase = f"the {busier} phase binds (its pool is the busier)"
        exposed = block["exposed_kv_transfer"]
        return [
            f"Disaggregated, P:D = {pre['devices']}:{dec['devices']} devices "
            f"({pre['instances']}:{dec['instances']} instances): prefill pool "
            f"{pre['busy_fraction']:.0%} busy, decode pool {dec['busy_fraction']:.0%} busy "
            f"— {phase}.",
            f"KV transfer: {block['kv_transfer_span']['mean_ms']:.2f} ms on the wire per "
            f"request on average, {exposed['mean_ms']:.2f} ms of it not hidden behind the "
            f"prefill ({block['kv_transfer_share'] * 100:.3g} % of the requests' time).",
        ]

    # --- running --------------------------------------------------------------------------

    def build_sim(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> DisaggSim:
        """The scheduler for ``system`` on ``requests``, ready to :meth:`~DisaggSim.run`."""
        opts = self.resolve_options(system.options)
        self.check_system(system, model)
        link = _catalog_link(str(opts["link"]), "options.link") if opts["link"] else None
        nic = _catalog_link(str(opts["nic_link"]), "options.nic_link") if opts["nic_link"] else None
        kv = _catalog_link(str(opts["kv_link"]), "options.kv_link") if opts["kv_link"] else None
        prefetch = {"prefetch_ratio": int(opts["prefetch_ratio"])}
        layout = _layout(system, opts)
        cap = self.timeline_cap

        def factory(tp: int, group_link: LinkSpec | None) -> Any:
            def make(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
                dm = self.device_models(device, runtime).with_settings(prefetch)
                return ParallelGroup(dm, tp, 1, link=group_link) if tp > 1 else dm

            return make

        pools: dict[str, list[Unit]] = {r: [] for r in ROLES}
        node_of: dict[int, int] = {}
        first = 0
        for role in ROLES:
            tp = self._tp(opts, role)
            for j, p in enumerate(system.devices):
                if p.role != role:
                    continue
                # Consecutive instances of the placement with the same group link.
                segs: list[tuple[bool, list[int]]] = []
                for _, node, last in (x for x in layout if x[0] == j):
                    cross = node != last
                    if segs and segs[-1][0] == cross:
                        segs[-1][1].append(node)
                    else:
                        segs.append((cross, [node]))
                for cross, nodes in segs:
                    units = build_units(
                        [replace(p, count=len(nodes))],
                        model,
                        factory(tp, nic if cross else link),
                        exact=self.reference,
                        timeline_cap=cap,
                        step_overhead_s=(
                            (lambda _p, dm: dm.host_sampling_s(model)) if role == "decode" else None
                        ),
                        first_index=first,
                        placement_index=[j],
                        convex=True,
                    )
                    for u, node in zip(units, nodes, strict=True):
                        node_of[u.index] = node
                    first += len(units)
                    pools[role].extend(units)
        n_nodes = _nodes(layout)
        nic_out = [Link(nic, cap) for _ in range(n_nodes)]
        nic_in = [Link(nic, cap) for _ in range(n_nodes)]
        kv_out = {u.index: Link(kv, cap) for u in pools["prefill"]}
        kv_in = {u.index: Link(kv, cap) for u in pools["decode"]}
        free = bool(opts["kv_free"])
        paths: dict[tuple[int, int], tuple[Hop, ...]] = {}

        def path(p: Unit, d: Unit) -> Sequence[Hop]:
            key = (p.index, d.index)
            hit = paths.get(key)
            if hit is not None:
                return hit
            lanes = min(p.group_size, d.group_size)
            hops: tuple[Hop, ...]
            if free:
                hops = ()
            elif node_of[p.index] != node_of[d.index]:
                assert nic is not None  # check_system asks for it
                hops = (Hop((nic_out[node_of[p.index]], nic_in[node_of[d.index]]), nic),)
            elif kv is not None:
                hops = (Hop((kv_out[p.index], kv_in[d.index]), kv, lanes),)
            else:
                for u in (p, d):
                    if u.device.host_link is None:
                        raise SpecError(
                            "options.kv_link",
                            f"{u.slug} has no PCIe host link for the default host round "
                            "trip; name a kv_link",
                        )
                assert p.device.host_link is not None and d.device.host_link is not None
                hops = (
                    Hop((p.link_out,), p.device.host_link, lanes),
                    Hop((d.link_in,), d.device.host_link, lanes),
                )
            paths[key] = hops
            return hops

        sim = DisaggSim(
            requests,
            pools["prefill"],
            pools["decode"],
            path=path,
            kv_bits=lambda d: model.kv_bytes_per_token(d.runtime.kv_bits),
            prefill_batch=[
                _batch_limit(u.device, int(opts["prefill_max_batch"])) for u in pools["prefill"]
            ],
            decode_batch=[
                _batch_limit(u.device, int(opts["decode_max_batch"])) for u in pools["decode"]
            ],
            prefill_max_tokens=int(opts["prefill_max_batched_tokens"]),
            memory_utilization=float(opts["memory_utilization"]),
            overlap=bool(opts["kv_overlap"]),
            scheduling=self.scheduling,
            reference=self.reference,
            audit=self.audit,
            progress=progress,
        )
        sim.extra["options"] = opts
        sim.extra["nodes"] = n_nodes
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

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """The result entry, with the hand-over and the pools in the ``disaggregated`` block."""
        requests = generate_requests(workload, model)
        out = self.simulate(system, model, requests, progress)
        block = out.extra.pop("disaggregated", None)  # absent with a shared prefill queue
        entry = system_result(system, out, slo)
        if block is not None:
            entry["disaggregated"] = block
        return entry


def _instance_unit(
    ctx: FitContext, sig: SignatureLike, opts: Mapping[str, Any], entry: int, role: str
) -> Unit:
    """One ``role`` instance of the signature's device ``entry`` as
    :meth:`DisaggregatedPolicy.build_sim` builds it (a tensor-parallel group over ``link``
    on one node)."""
    device, runtime = ctx.device(entry)
    degree = int(opts[f"{role}_tensor_parallel"])
    link = _catalog_link(str(opts["link"]), "options.link") if opts["link"] else None
    prefetch = {"prefetch_ratio": int(opts["prefetch_ratio"])}
    model = ctx.model

    def make(d: DeviceSpec, r: RuntimeProfile) -> DeviceModel:
        return ParallelGroup(build_device_model(d, r).with_settings(prefetch), degree, 1, link=link)

    return build_units(
        [DevicePlacement(device, 1, runtime, role)],
        model,
        make,
        timeline_cap=0,
        step_overhead_s=(lambda _p, dm: dm.host_sampling_s(model)) if role == "decode" else None,
        convex=True,
    )[0]


def _layout(system: SystemSpec, opts: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    """One row per instance, in placement order: (placement index, node of its first
    device, node of its last device; they differ when its tensor-parallel group spans
    nodes). Devices fill nodes of ``devices_per_node`` in the order they are listed (0:
    one node)."""
    per_node = int(opts["devices_per_node"])
    rows: list[tuple[int, int, int]] = []
    pos = 0
    for j, p in enumerate(system.devices):
        tp = int(opts[f"{p.role}_tensor_parallel"]) if p.role in ROLES else 1
        for _ in range(p.count // tp):
            a, b = (pos // per_node, (pos + tp - 1) // per_node) if per_node else (0, 0)
            rows.append((j, a, b))
            pos += tp
        pos += p.count % tp
    return rows


def _nodes(layout: list[tuple[int, int, int]]) -> int:
    """Nodes the layout's instances occupy (the last node index plus one)."""
    return 1 + max((last for _, _, last in layout), default=0)
