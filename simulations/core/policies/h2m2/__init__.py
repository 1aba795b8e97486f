"""H2M2: asymmetric HBM + LPDDR memory with head-aware kernel-memory mapping (Hwang et al.).

The registered policy ``h2m2`` runs a system of H2M2 boards (catalog devices of kind
``memory-accel`` with an HBM and an LPDDR tier) under one of the paper's mappings or
baselines, chosen by the ``mapping`` option, so one scenario can compare them side by side.
The boards themselves — the chips, the two memory sides (Tables 1, 2, 4), the layer shapes,
the time of every head-aware mapping and the board's own greedy mapping (Algorithm 1) — are
the ``memory-accel`` device family (:mod:`simulations.core.devices.h2m2`). Modules here:
:mod:`.mapping` (the paper's other mappings and systems: Oracle, FlexGen LP, majors,
baselines), :mod:`.memory` (§4.2), :mod:`.dynamic` (§5.3), :mod:`.energy` (§5.5),
:mod:`.screen` (the capacity planner's bounds), :mod:`.reproduction` (Figs. 6–8, 12–19
and Table 3 against ``targets.toml``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import SpecError
from simulations.core.metrics import request_latencies
from simulations.core.policies.base import (
    OptionSpec,
    Policy,
    PolicyFigure,
    ProgressFn,
    RoleSpec,
    register,
    register_paper,
)
from simulations.core.screening import BoundContext, FitContext, SharedVerdict, SignatureLike
from simulations.core.spec import ModelSpec, SloSpec, SystemSpec, WorkloadSpec

from . import screen
from .energy import memory_energy_j
from .footprint import hbm_footprints
from .mapping import SYSTEMS, flexgen_lp_mapping, run_system

PAPER = register_paper("h2m2", "H2M2 — asymmetric HBM + LPDDR memory", __name__)

#: iterations of one batch at which the iteration time is evaluated; between them it is
#: interpolated linearly (the KV cache, and with it every cost, grows by one token a step)
SAMPLES_PER_BATCH = 9


def prefill_s(shapes: LayerShapes, hw: H2M2Hardware, seq_lens: np.ndarray) -> float:
    """Prompt phase (not in the paper, §5.1): every GEMM with M = prompt tokens and causal
    attention, on both sides' chips at their MM peak, or the weights streamed from both
    memories, whichever is longer."""
    tokens = float(seq_lens.sum())
    ops = 2.0 * shapes.n_layers * shapes.weight_bytes_per_layer / shapes.w_bytes * tokens
    ops += shapes.n_layers * 2.0 * shapes.n_heads * shapes.head_dim * float((seq_lens**2).sum())
    peak = hw.hbm.accel.mm_peak_ops * hw.hbm.chips + hw.lpddr.accel.mm_peak_ops * hw.lpddr.chips
    weights = shapes.n_layers * shapes.weight_bytes_per_layer
    return max(ops / peak, weights / (hw.hbm.bw_bytes_per_s + hw.lpddr.bw_bytes_per_s))


def _peak_point(b_in: np.ndarray, b_out: np.ndarray) -> Point:
    """The iteration of one static batch whose KV cache is largest (requests leave when they
    finish, so the peak may come before the last step)."""
    steps = np.arange(int(b_out.max()))
    active = b_out[None, :] > steps[:, None]
    kv = np.where(active, b_in[None, :] + steps[:, None] + 1, 0).sum(axis=1)
    t = int(np.argmax(kv))
    n = int(active[t].sum())
    return Point(n, float(kv[t]) / n)


@dataclass(frozen=True)
class Served:
    """When each request of a :class:`~simulations.core.engine.requests.RequestSet` got its
    first and last token (seconds from time 0), the batches as ``(first, end)``
    request-index ranges, and the boards' busy time and memory-access energy."""

    first_token_s: np.ndarray
    finish_s: np.ndarray
    batches: list[tuple[int, int]]
    busy_s: float
    energy_j: float
    mappings: list[list[int]]


def serve_static_batches(
    shapes: LayerShapes,
    hw: H2M2Hardware,
    requests: RequestSet,
    mapping_name: str,
    bmax: int,
    progress: ProgressFn | None = None,
) -> Served:
    """Serve ``requests`` in static batches (see :class:`H2M2Policy`): when the boards are
    free they take the arrived requests, FCFS, up to ``bmax`` (or wait for the next
    arrival); a batch prefills (:func:`prefill_s`) and then decodes with ``mapping_name``
    until its longest request finishes. Each step's time is evaluated at up to
    :data:`SAMPLES_PER_BATCH` iterations of the batch and interpolated between them."""
    arrival = requests.arrival_s
    ins, outs = requests.input_tokens, requests.output_tokens
    n = len(requests)
    first_token = np.zeros(n)
    finish = np.zeros(n)
    batches: list[tuple[int, int]] = []
    clock = 0.0  # when the boards are next free
    busy = 0.0
    energy = 0.0
    mappings: list[list[int]] = []
    start = 0
    while start < n:
        begin = max(clock, float(arrival[start]))
        # FCFS: the requests that have arrived by ``begin`` (``start``'s at least)
        end = min(start + bmax, int(np.searchsorted(arrival, begin, side="right")))
        idx = np.arange(start, end)
        b_in, b_out = ins[idx], outs[idx]
        # the prefill emits each request's first token; its other tokens take one decode
        # iteration each (as the engine counts them, simulations.core.metrics)
        b_dec = b_out - 1
        steps = int(b_dec.max())
        pre = prefill_s(shapes, hw, b_in)
        first = begin + pre
        first_token[idx] = first
        finish[idx] = first
        clock = first
        if steps == 0:  # single-token requests: the prefill is the whole batch
            busy += clock - begin
            batches.append((start, end))
            start = end
            if progress is not None:
                progress(end / n)
            continue
        sample = np.unique(np.linspace(0, steps - 1, min(steps, SAMPLES_PER_BATCH)).round())
        # FlexGen plans once per run for its peak memory and keeps the plan (§3.2)
        plan = (
            flexgen_lp_mapping(shapes, hw, _peak_point(b_in, b_out))
            if mapping_name == "flexgen-lp"
            else None
        )
        times, joules = [], []
        for t in sample.astype(np.int64):
            active = b_dec > t
            kv = float((b_in[active] + t + 1).sum())
            point = Point(int(active.sum()), kv / int(active.sum()))
            ev = run_system(shapes, hw, point, mapping_name, decided=plan)
            times.append(ev.seconds)
            joules.append(memory_energy_j(ev.bytes_hbm, ev.bytes_lpddr))
            if ev.mapping is not None and t == sample[0]:
                mappings.append(list(ev.mapping.as_tuple()))
        grid = np.arange(steps)
        step_s = np.interp(grid, sample, times)
        step_j = np.interp(grid, sample, joules)
        cum = np.concatenate(([0.0], np.cumsum(step_s)))
        finish[idx] = first + cum[b_dec]
        energy += float(step_j.sum())
        clock = first + float(cum[-1])
        busy += clock - begin
        batches.append((start, end))
        start = end
        if progress is not None:
            progress(end / n)
    return Served(first_token, finish, batches, busy, energy, mappings)


@register
class H2M2Policy(Policy):
    """H2M2 (Hwang et al.): asymmetric HBM + LPDDR memory, head-aware kernel-memory mapping.

    Implements §3 (mapping granularity, Fig. 5), §4.2 (memory abstraction), §4.3
    (Algorithm 1) and the paper's baselines, selected by ``mapping``: ``h2m2`` (greedy
    head-aware with memory abstraction), ``oracle`` (exhaustive N³ search, no abstraction
    cost), ``lpddr-only`` (baseline: Fig. 4b with sublayer-granular mapping, Fig. 5a, §3.1),
    ``hierarchical`` (HBM caching LPDDR, Fig. 4c), ``sublayer`` (Fig. 5a), ``flexgen-lp``
    (Eq. 1, planned once per batch for its peak memory and kept, §3.2),
    ``q-major``/``a-major``/``f-major`` (Fig. 8) and ``8-hbm`` (§5.5).

    Deviations: the paper models the generation phase only (§5.1: it measures "a single
    iteration of the generation phase"); serving whole requests is this model's own. The
    workload's requests (:func:`~simulations.core.engine.requests.generate_requests`, the
    same for every system of a scenario) are served by a static batcher: whenever the
    boards are free they take the requests that have arrived, first come first served, up
    to ``max_batch`` (none arrived: they wait for the next arrival); the batch prefills with
    the roofline of :func:`prefill_s` (not in the paper), then decodes until its longest
    request finishes (finished requests leave the batch; nothing joins it). The prefill
    emits a request's first token and each further token takes one decode iteration, so
    TTFT, TPOT and SLO attainment follow the engine's definitions
    (:func:`~simulations.core.metrics.request_latencies`), counted from each request's
    arrival; throughput is over the span from the first arrival to the last finish. Energy
    is memory-access energy only (§5.5); chip power is not published.
    """

    name = "h2m2"
    result_blocks = ("h2m2",)
    figures = ("hbm-footprint",)
    summary = "H2M2 asymmetric HBM+LPDDR memory with head-aware kernel-memory mapping"
    roles = (
        RoleSpec(
            "",
            "H2M2 board(s): an HBM and an LPDDR memory tier with an accelerator chip beside "
            "each (count > 1 puts more chips beside that device's tiers)",
            kinds=("memory-accel",),
        ),
    )
    single_node = True
    options = (
        OptionSpec(
            "mapping",
            str,
            "h2m2",
            "kernel-memory mapping or baseline system (H2M2 §3, §5)",
            choices=SYSTEMS,
        ),
        OptionSpec("max_batch", int, 32, "requests decoded together (the paper's batch)", 1, 4096),
    )

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> tuple[H2M2Hardware, LayerShapes]:
        """See :func:`.screen.fit`."""
        return screen.fit(ctx, sig, options)

    @classmethod
    def screen_bounds(
        cls,
        ctx: BoundContext,
        sig: SignatureLike,
        options: dict[str, Any],
        fitted: Any,
        cmax: int,
        tp: int | None,
    ) -> SharedVerdict:
        """See :func:`.screen.bounds`."""
        hw, shapes = fitted
        return screen.bounds(ctx, options, hw, shapes)

    @classmethod
    def unsearchable_option(cls, name: str, value: Any) -> str | None:
        """§5.5's 8-HBM is eight HBM devices, not the listed board: priced as the board it
        would look far cheaper than it is."""
        if name == "mapping" and value == "8-hbm":
            return (
                "8-hbm models eight HBM devices, not the board listed in space.devices; "
                "a plan cannot price it"
            )
        return None

    @classmethod
    def figure_data(
        cls, name: str, system: Any, scenario: Any, prompt: int, output: int
    ) -> PolicyFigure:
        """``hbm-footprint``: the HBM footprint of the system's mapping by sublayer across
        the sequence lengths of a representative request (Fig. 14), see
        :func:`.footprint.hbm_footprints`."""
        if name != "hbm-footprint":
            return super().figure_data(name, system, scenario, prompt, output)
        options = cls.resolve_options(system.options)
        rows, note = hbm_footprints(system, scenario, options, prompt, output)
        title = "H2M2 HBM footprint by sublayer"
        if rows:
            title += f" — {system.name} (batch {rows[0]['batch']}, as H2M2 Fig. 14)"
        return PolicyFigure(rows, title, note)

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Decode the workload's requests batch by batch on the chosen mapping."""
        opts = self.resolve_options(system.options)
        if not system.devices:
            raise SpecError("devices", "an H2M2 system needs at least one memory-accel device")
        hw = H2M2Hardware.from_placements(system.devices)
        runtime = system.devices[0].runtime
        shapes = LayerShapes.of(model, runtime)
        requests = generate_requests(workload, model)
        n = len(requests)
        bmax = int(opts["max_batch"])
        mapping_name = str(opts["mapping"])
        served = serve_static_batches(shapes, hw, requests, mapping_name, bmax, progress)
        arrival = requests.arrival_s
        outs = requests.output_tokens
        lat = request_latencies(arrival, served.first_token_s, served.finish_s, outs, slo)
        energy = served.energy_j
        mappings = served.mappings
        makespan = float(served.finish_s.max()) - float(arrival[0])
        tokens = float(outs.sum())
        throughput = tokens / makespan
        power = energy / makespan
        return {
            "name": system.name,
            "policy": self.name,
            "requests": n,
            "generated_tokens": int(tokens),
            "span_s": makespan,
            "throughput_tok_s": throughput,
            "requests_per_s": n / makespan,
            **lat,
            **system.cost_fields(throughput),
            "avg_power_w": power,
            "energy_j_per_token": energy / tokens,
            "energy_efficiency_tok_s_per_w": throughput / power if power > 0 else None,
            "clipped_requests": int(requests.clipped),
            "devices": [
                {
                    "device": p.device.slug,
                    "count": p.count,
                    "busy_fraction": served.busy_s / makespan,
                    "energy_j": energy * p.count / sum(q.count for q in system.devices),
                    **p.price_fields(),
                }
                for p in system.devices
            ],
            "h2m2": {
                "mapping": mapping_name,
                "first_iteration_mappings_nq_na_nf": mappings,
                "notes": (
                    "H2M2 models the generation phase (paper §5.1): TPOT comes from the "
                    "per-iteration time of each batch at its sequence lengths; TTFT uses this "
                    "model's own prefill roofline (not in the paper); energy is memory-access "
                    "energy only (§5.5, pJ/bit of HBM2/LPDDR4 as cited in energy.py); static "
                    f"batches of up to {bmax} arrived requests (FCFS), each served to its "
                    "longest request; TTFT and end-to-end latency count from arrival."
                ),
            },
        }
