"""Figures the pages derive from the simulation core beyond the stored result document:
model size facts and roofline data with a scenario's operating points (a policy's own
figures come from the policy: ``Policy.figure_data``). Everything here calls
:mod:`simulations.core` (pure Python); nothing is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulations.core import roofline
from simulations.core.devices import roofline_kinds
from simulations.core.errors import CapacityError, SpecError
from simulations.core.graph import gemm_params, layer_weight_params
from simulations.core.spec import (
    DeviceSpec,
    LengthDist,
    LengthDistKind,
    ModelSpec,
    RuntimeProfile,
    ScenarioSpec,
    TraceData,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelFacts:
    """Size figures of a model (from its shapes)."""

    parameters: int
    layer_parameters: int
    embedding_parameters: int
    kv_bytes_per_token_fp16: float
    kv_bytes_per_token_int8: float
    weights_gb_fp16: float
    kv_gb_at_max_context_fp16: float
    gqa_group: int


def model_facts(model: ModelSpec) -> ModelFacts:
    """Parameter count (GEMMs of every layer — every expert of a mixture of experts —, the
    embedding, the LM head unless tied, the norms) and KV-cache bytes per token (2 × layers
    × KV heads × head dim × bytes; MLA: layers × latent and rope dims × bytes)."""
    per_layer = layer_weight_params(model)
    emb = model.vocab_size * model.hidden_size
    head = 0 if model.tied_embeddings else emb
    norms = (2 * model.n_layers + 1) * model.hidden_size
    # gemm_params counts every layer (dense and MoE ones) plus the LM head's GEMM once
    layers = gemm_params(model) - model.vocab_size * model.hidden_size
    total = layers + emb + head + norms
    kv16 = model.kv_bytes_per_token(16)
    return ModelFacts(
        parameters=total,
        layer_parameters=per_layer,
        embedding_parameters=emb + head,
        kv_bytes_per_token_fp16=kv16,
        kv_bytes_per_token_int8=model.kv_bytes_per_token(8),
        weights_gb_fp16=total * 2 / 1e9,
        kv_gb_at_max_context_fp16=kv16 * model.max_context / 1e9,
        gqa_group=model.gqa_group,
    )


def representative_length(dist: LengthDist, trace: Sequence[int] | None) -> int:
    """A length standing for a distribution: the fixed value, the midpoint of a uniform,
    the median of a log-normal or of the trace's lengths."""
    kind = LengthDistKind(dist.kind)
    if kind is LengthDistKind.FIXED and dist.value is not None:
        return int(dist.value)
    if kind is LengthDistKind.UNIFORM and dist.low is not None and dist.high is not None:
        return round((dist.low + dist.high) / 2)
    if kind is LengthDistKind.LOGNORMAL and dist.median is not None:
        value = dist.median
        if dist.low is not None:
            value = max(value, dist.low)
        if dist.high is not None:
            value = min(value, dist.high)
        return max(1, round(value))
    if trace:
        return max(1, int(np.median(np.asarray(trace))))
    return 1


def representative_lengths(spec: ScenarioSpec) -> tuple[int, int]:
    """(prompt, output) tokens standing for the scenario's workload, within the context."""
    wl = spec.workload
    trace: TraceData | None = wl.trace
    prompt = representative_length(wl.input_tokens, trace.input_tokens if trace else None)
    output = representative_length(wl.output_tokens, trace.output_tokens if trace else None)
    prompt = min(prompt, spec.model.max_context - 1)
    output = max(1, min(output, spec.model.max_context - prompt))
    return prompt, output


def device_roofs(device: DeviceSpec, runtimes: Sequence[RuntimeProfile]) -> list[dict[str, Any]]:
    """The roof of ``device`` under each runtime profile of its kind."""
    out = []
    for rt in runtimes:
        if rt.device_kind != device.kind:  # a new family's kind is a plain string
            continue
        try:
            out.append(roofline.roof(device, rt))
        except (SpecError, ValueError, ZeroDivisionError) as exc:
            logger.info("no roof for %s under %s: %s", device.slug, rt.slug, exc)
    return out


def scenario_rooflines(
    spec: ScenarioSpec, *, batch: int = 1
) -> tuple[list[dict[str, Any]], list[str], tuple[int, int]]:
    """Roofs and operating points of every distinct (device, runtime) of the scenario at its
    representative lengths; also the notes on pairs that could not be placed."""
    prompt, output = representative_lengths(spec)
    seen: set[tuple[str, str]] = set()
    series: list[dict[str, Any]] = []
    notes: list[str] = []
    for system in spec.systems:
        for p in system.devices:
            key = (p.device.slug, p.runtime.slug)
            if key in seen:
                continue
            seen.add(key)
            if p.device.kind not in roofline_kinds():
                notes.append(
                    f"{p.device.slug}: no single-device roofline for {p.device.kind} devices"
                )
                continue
            try:
                entry = roofline.roof(p.device, p.runtime)
                entry["points"] = roofline.phase_points(
                    p.device, p.runtime, spec.model, prompt, output, batch
                )
            except (SpecError, CapacityError, ValueError, KeyError, ZeroDivisionError) as exc:
                notes.append(f"{p.device.slug} ({p.runtime.slug}): {exc}")
                continue
            series.append(entry)
    return series, notes, (prompt, output)
