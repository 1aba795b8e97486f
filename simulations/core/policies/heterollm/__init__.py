"""HeteroLLM (Chen et al.): LLM inference on a phone SoC's GPU and NPU together.

The registered policy ``heterollm`` runs one SoC — a device with role ``gpu`` and one with
role ``npu``, components of the same SoC (same ``parent``, one shared memory) — under one
of the paper's execution modes or baselines, chosen by ``mode``, so one scenario can compare
them side by side. Modules: :mod:`.soc` (the SoC, the profiler in prediction mode and the
shared-memory co-run), :mod:`.solver` (partition strategies §4.1 and the solver §4.3),
:mod:`.plan` (modes, decider, synchronisation §4.2, energy §5.6), :mod:`.reproduction`
(Figs. 13–17 and 19 against ``targets.toml``), :mod:`.calibration` (the NPU stack fitted to
the paper's single-operator figures and decode speed-ups). Not searchable by the capacity
planner (see :attr:`HeteroLLMPolicy.unscreened_why`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import ProgressFn, Unit
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import SpecError
from simulations.core.metrics import system_result
from simulations.core.policies.base import OptionSpec, Policy, RoleSpec, register, register_paper
from simulations.core.spec import (
    DeviceKind,
    DeviceSpec,
    ModelSpec,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)

from .plan import MODES, STATIC_GRAPHS, Decider, PhaseRun, placement_table
from .soc import HeteroSoc, corun_s
from .solver import Gemm, Partition, PartitionSolver

PAPER = register_paper("heterollm", "HeteroLLM — phone SoC GPU + NPU", __name__)

__all__ = [
    "MODES",
    "STATIC_GRAPHS",
    "Decider",
    "Gemm",
    "HeteroLLMPolicy",
    "HeteroSoc",
    "Partition",
    "PartitionSolver",
    "PhaseRun",
    "SocDeviceModel",
    "corun_s",
]


class SocDeviceModel(DeviceModel):
    """The whole SoC under one HeteroLLM mode, seen by the engine as one device.

    ``prefill`` and ``decode_step`` are the decider's passes (one prompt after another when
    several are given); weights are held once in the shared memory (both processors read
    the same unified-memory buffers, HeteroLLM §4.2, §6).
    """

    def __init__(self, decider: Decider, device: DeviceSpec) -> None:
        super().__init__(device, decider.soc.npu.runtime)
        self.decider = decider

    def _check_model(self, model: ModelSpec) -> None:
        if model != self.decider.model:
            raise SpecError("model", f"this SoC model was planned for {self.decider.model.slug}")

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """Prompts prefilled one after another (HeteroLLM serves one request at a time)."""
        self._check_model(model)
        runs = [self.decider.prefill(int(s)) for s in seq_lens]
        if not runs:
            raise SpecError("seq_lens", "must hold at least one prompt length")
        return PhaseCost(
            seconds=sum(r.seconds for r in runs),
            joules=sum(r.joules for r in runs),
            flops=sum(r.flops for r in runs),
            bytes=sum(r.bytes for r in runs),
        )

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One decode iteration under the mode's decode plan."""
        self._check_model(model)
        r = self.decider.decode(batch, kv_tokens)
        return PhaseCost(r.seconds, r.joules, r.flops, r.bytes)

    def weights_bytes(self, model: ModelSpec) -> float:
        """One copy of the weights in the shared memory."""
        return self.decider.soc.npu.weights_bytes(model)

    @property
    def idle_power_w(self) -> float:
        """Idle draw of both processors."""
        soc = self.decider.soc
        return soc.gpu.idle_power_w + soc.npu.idle_power_w

    def compute_rate_bound(self) -> float | None:
        """None: a SoC is not searched by the planner (see the policy's ``unscreened_why``)."""
        return None

    def floor_power_w(self) -> float:
        """0.0: see :meth:`compute_rate_bound`."""
        return 0.0

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: see :meth:`compute_rate_bound`."""
        return None


def soc_device(soc: HeteroSoc) -> DeviceSpec:
    """A SoC-level device record for the engine's unit (memory: the shared tier)."""
    npu, gpu = soc.npu.device, soc.gpu.device
    return DeviceSpec(
        slug=soc.name,
        name=f"{soc.name} (GPU {gpu.slug} + NPU {npu.slug})",
        kind=DeviceKind.SOC,
        vendor=npu.vendor,
        memory=npu.memory,
        tdp_w=gpu.board_power_w + npu.board_power_w,
        idle_w=gpu.idle_w + npu.idle_w,
    )


@register
class HeteroLLMPolicy(Policy):
    """HeteroLLM (Chen et al.): layer- and tensor-level GPU + NPU execution on a phone SoC.

    Implements §3 (GPU linear performance, high-cost synchronisation; NPU stage, order and
    shape sensitivity via the core's NPU model; the SoC's shared memory bandwidth), §4
    (layer-level placement with the permuted Matmul order), §4.1 (row-, sequence-length,
    multi-sequence-length and hybrid-cutting in prefill, row-cutting in decode), §4.2
    (conventional vs fast synchronisation per kernel boundary), §4.3 (solver over 256-row /
    32-position aligned partitions with the paper's objective, profiler in prediction mode,
    decider by phase and sequence length) and §5.6 (energy by processor), with the paper's
    baselines selected by ``mode``: ``gpu-only`` (PPL-OpenCL), ``npu-only`` (the §5.2.2
    static-graph baselines Online-prepare, Padding, Pipe via ``static_graphs``),
    ``hetero-layer`` and ``hetero-tensor``.

    Roles: one ``gpu`` and one ``npu`` device of the same SoC (same ``parent``); the CPU
    control plane is implicit (its only cost is synchronisation). Requests are served one at
    a time, first come first served (batch 1), as on a phone; TTFT is the prompt latency
    and TPOT the per-token decode latency of single requests.

    Deviations: the profiler is the core's device models in prediction mode (no decision-tree
    regression); kernels run one after another in graph order; the NPU's FP16 prefill graphs
    read weights the CPU dequantises a layer ahead (§4, §6 — where they come from is not
    stated), the conversion's traffic charged on the shared memory but not its CPU time; the
    CPU's power and graph preparation energy are not counted; a whole-phone power measured
    per processor is added per busy processor (see ``heterollm.notes`` in the result).
    """

    name: ClassVar[str] = "heterollm"
    result_blocks: ClassVar[tuple[str, ...]] = ("heterollm", "scheduler")
    summary: ClassVar[str] = (
        "HeteroLLM: phone SoC GPU + NPU with layer- and tensor-level partitioning"
    )
    unscreened_why: ClassVar[str] = (
        "it partitions work inside one phone SoC; a SoC is not something bought by the "
        "count, so there is no capacity to search"
    )
    roles: ClassVar[tuple[RoleSpec, ...]] = (
        RoleSpec("gpu", "the SoC's GPU (e.g. adreno-750)", kinds=("gpu",)),
        RoleSpec("npu", "the SoC's NPU (e.g. hexagon-npu), same parent SoC", kinds=("npu",)),
    )
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec(
            "mode",
            str,
            "hetero-tensor",
            "execution mode: gpu-only (PPL-OpenCL), npu-only (Matmuls wholly on the NPU, "
            "§5.2.2 baselines), hetero-layer (§4), hetero-tensor (§4.1)",
            choices=MODES,
        ),
        OptionSpec(
            "static_graphs",
            str,
            "padding",
            "how a whole-NPU Matmul handles a prompt length without a prepared graph "
            "(npu-only, hetero-layer; §5.2.2): padding, pipe or online-prepare",
            choices=STATIC_GRAPHS,
        ),
        OptionSpec(
            "fast_sync",
            bool,
            True,
            "fast synchronisation (shared buffers, predicted sleep then polling, §4.2); "
            "false: a conventional copy at every GPU↔NPU hand-over, plus a GPU queue refill "
            "where a GPU kernel follows",
        ),
        OptionSpec(
            "plan_for_fast_sync",
            bool,
            True,
            "the solver and decider plan with fast-synchronisation costs, as HeteroLLM does; "
            "with fast_sync=false this is the paper's w/o-fast-sync ablation (Figs. 15, 17). "
            "false: re-plan for the synchronisation in use",
        ),
    )

    def decider(self, system: SystemSpec, model: ModelSpec) -> Decider:
        """The decider of ``system``'s SoC and options for ``model``."""
        opts = self.resolve_options(system.options)
        soc = HeteroSoc.from_placements(system.devices)
        return Decider(
            soc,
            model,
            str(opts["mode"]),
            static_graphs=str(opts["static_graphs"]),
            fast_sync=bool(opts["fast_sync"]),
            plan_for_fast_sync=bool(opts["plan_for_fast_sync"]),
        )

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Serve the workload's requests one at a time on the SoC and return the result
        entry, with a ``heterollm`` block (per-phase times, energy by processor and the
        per-kernel backend placement of a representative request)."""
        decider = self.decider(system, model)
        soc = decider.soc
        requests = generate_requests(workload, model)
        npu_index = next(i for i, p in enumerate(system.devices) if p.role == "npu")
        placement = system.devices[npu_index]
        device = soc_device(soc)
        unit = Unit(
            0, npu_index, device, placement.runtime, "soc", SocDeviceModel(decider, device), model
        )
        sim = BatchingSim(requests, [unit], max_batch=1, progress=progress)
        out = sim.run()
        result = system_result(system, out, slo)
        result["devices"] = _processor_entries(system, decider, requests, result)
        result["heterollm"] = _details(decider, requests)
        return result


def _request_split(decider: Decider, prompt: int, output: int) -> np.ndarray:
    """[gpu_j, npu_j, gpu_busy_s, npu_busy_s] of one request (prefill + its decode steps;
    decode steps summed by the trapezoid rule, exact for costs affine in the context)."""
    p = decider.prefill(prompt)
    out = np.array([p.gpu_j, p.npu_j, p.gpu_busy_s, p.npu_busy_s])
    steps = output - 1
    if steps > 0:
        first = decider.decode(1, prompt)
        last = decider.decode(1, prompt + steps - 1)
        ends = np.array([[r.gpu_j, r.npu_j, r.gpu_busy_s, r.npu_busy_s] for r in (first, last)])
        out += steps * ends.mean(axis=0)
    return out


def _processor_entries(
    system: SystemSpec, decider: Decider, requests: RequestSet, result: dict[str, Any]
) -> list[dict[str, Any]]:
    """One ``devices`` entry per processor, splitting the run's energy by processor."""
    total = np.zeros(4)
    for prompt, output in zip(
        requests.input_tokens.tolist(), requests.output_tokens.tolist(), strict=True
    ):
        total += _request_split(decider, int(prompt), int(output))
    span = float(result["span_s"])
    energy = float(result["energy_j"])
    busy_energy = total[0] + total[1]
    entries = []
    for p in system.devices:
        k = 0 if p.role == "gpu" else 1
        share = total[k] / busy_energy if busy_energy > 0 else 0.5
        entries.append(
            {
                "device": p.device.slug,
                "count": 1,
                "role": p.role,
                "runtime": p.runtime.slug,
                "busy_fraction": float(total[2 + k] / span),
                "energy_j": energy * share,
                **p.price_fields(),
            }
        )
    return entries


def _details(decider: Decider, requests: RequestSet) -> dict[str, Any]:
    """The ``heterollm`` block: a representative request's passes and kernel placement."""
    prompt = int(np.median(requests.input_tokens))
    pre = decider.prefill(prompt)
    dec = decider.decode(1, prompt)
    soc = decider.soc
    return {
        "mode": decider.mode,
        "static_graphs": decider.static,
        "fast_sync": decider.fast_sync,
        "soc": soc.name,
        "representative_prompt_tokens": prompt,
        "prefill": pre.summary(),
        "decode": dec.summary(),
        "placement": {"prefill": placement_table(pre), "decode": placement_table(dec)},
        "shared_memory": {
            "peak_gbps": soc.bus.peak_gbps,
            "gpu_alone_gbps": soc.gpu_alone_gbps,
            "npu_alone_gbps": soc.npu_alone_gbps,
            "gpu_npu_gbps": soc.bus.combined_gbps([soc.gpu_alone_gbps, soc.npu_alone_gbps]),
        },
        "notes": (
            "Single requests served one at a time: TTFT = prompt latency, TPOT = per-token "
            "decode latency. Per-processor energy charges each processor's stack power while "
            "it is busy; those powers are whole-phone measurements (HeteroLLM §5.6), so a "
            "pass using both processors at once double-counts the phone's shared base power."
        ),
    }
