"""Kernel-class cost model of a fused GPU serving stack (vLLM-like), fitted to measured kernels.

The eager roofline of :class:`~simulations.core.devices.gpu.GpuModel` charges every operator
at one achieved compute fraction and one achieved bandwidth fraction. A production stack's
kernels do not behave alike: a GEMM streams its weights at small batches and only reaches
its compute efficiency from a few hundred tokens on, a FlashAttention prefill kernel is
compute-bound, a paged-attention decode kernel is bandwidth-bound with a fixed latency, and
the elementwise kernels (norms, rotary embedding, activation, residual adds, copies) are
bandwidth-bound at fractions of peak that depend on how each kernel is written, with a
fixed floor for tiny launches. This module holds that model; a runtime profile opts into it
by setting its parameters in ``params`` (:data:`KERNEL_PARAMS`) — a profile that sets none
of them (the eager ``hf-eager-fp16``) keeps the plain roofline, bit for bit.

Every parameter belongs to the stack, never to a (device, workload) pair: times come from
the device's datasheet peak (dense tensor FLOP/s at the stack's precision) and bandwidth, so
a profile fitted on one GPU transfers to another through its datasheet
(:mod:`simulations.core.calibration.fit` fits them).

Per kernel (one operator instance of :mod:`simulations.core.graph`, ``P`` the peak, ``B`` the
bandwidth), time = ``max(compute, memory, kernel_floor_us)``:

- *GEMM* (``rows`` tokens): achieved compute fraction ``compute_eff · n / (n + gemm_n_half)``
  — a saturating efficiency: a GEMM of few rows cannot fill the GPU's SMs with tiles — so
  ``compute = FLOPs · (1 + gemm_n_half / n) / (P · compute_eff)``; ``memory = bytes / (B ·
  bw_eff)`` (weights streamed once, activations read and written).
- *Norm*, *RoPE*, *activation*, *copy* (residual adds, the embedding gather, the attention
  output copy, the sampler's pass over the logits): ``memory = bytes / (B · <class>_bw_eff)``
  (their FLOPs at ``P · compute_eff`` never bind).
- *Prefill attention* (FlashAttention over causal pairs): ``compute = (FLOPs + F_pair ·
  attn_prefill_n_half · tokens / 2) / (P · attn_prefill_eff)`` with ``F_pair`` the FLOPs of
  one (query, key) pair — for one prompt of ``n`` tokens an efficiency of
  ``attn_prefill_eff · (n + 1) / (n + 1 + attn_prefill_n_half)``: each query tile pays a fixed
  share (loading Q, rescaling, writing O), and short prompts leave SMs idle.
- *Decode attention* (paged KV): ``memory = attn_decode_fixed_us + bytes / (B ·
  attn_decode_bw_eff)``: a kernel over few sequences cannot keep enough loads in flight, a
  fixed latency that large batches amortise.

Compute and memory times are affine in the pass's token, sequence and attended-pair counts
(the saturations are written as intercepts), so stage decompositions built on
:meth:`GpuModel.op_times` (Neo's :class:`~simulations.core.policies.neo.costs.StageCosts`)
stay exact.

Outside the measured CUDA time (the kernels of the layers), a pass pays:

- the embedding gather, final norm and LM head (graph operators, costed by the same classes:
  the LM head is a GEMM over one row per sequence);
- the sampler: one copy-class pass over the logits (read at the activation precision,
  probabilities written and read in FP32) plus ``kernels_per_pass − 4`` small bookkeeping
  kernels at the floor;
- ``layer_fixed_us`` per layer (GPU idle between kernels; 0 when decode replays a CUDA graph);
- the host's step: ``host_step_us + host_step_per_seq_us · sequences`` of CPU work the GPU
  waits for (scheduling, input preparation, output processing) — from a measurement of the
  serving engine's CPU time, never fitted to kernel sums (see ``data/runtimes/gpu.json``).

Deviations: the floor applies per graph operator, so a fused kernel (QKV, gate+up) of a tiny
model pays it per projection; no KV-cache write kernel (the graph's K/V projections write the
cache; the measured set has no such kernel); no wave quantisation (GEMM times are smooth in
the token count); no overlap of the sampler's CPU launch with later kernels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

import numpy as np

from simulations.core.errors import SpecError
from simulations.core.graph import Op, OpKind, Precision
from simulations.core.spec import DeviceSpec, RuntimeProfile

_N = TypeVar("_N", float, np.ndarray)


class KernelClass(IntEnum):
    """What kind of kernel an operator runs as (what sets its achieved rates)."""

    GEMM = 0
    NORM = 1
    ROPE = 2
    ACT = 3
    COPY = 4
    ATTN_PREFILL = 5
    ATTN_DECODE = 6


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter of the kernel model: meaning, unit, physical bounds, and the value a
    profile that omits it gets (``None``: required)."""

    name: str
    meaning: str
    unit: str
    lower: float
    upper: float
    default: float | None = None


def _p(
    name: str, meaning: str, unit: str, lower: float, upper: float, default: float | None = None
) -> tuple[str, ParamSpec]:
    return name, ParamSpec(name, meaning, unit, lower, upper, default)


#: Efficiencies are fractions of a datasheet peak: above 1 is unphysical, 0 is no rate at all.
EFF_LOWER = 0.005

#: The runtime fields the kernel model reads besides ``params`` (the GEMM's rates).
FIELD_PARAMS: Mapping[str, ParamSpec] = dict(
    (
        _p(
            "compute_eff",
            "GEMM compute efficiency at many tokens (fraction of dense tensor peak)",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
        _p(
            "bw_eff",
            "GEMM bandwidth efficiency while streaming weights (fraction of peak bandwidth)",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
    )
)

#: The ``params`` of the kernel model (a profile opts in by setting any of them).
KERNEL_PARAMS: Mapping[str, ParamSpec] = dict(
    (
        _p(
            "gemm_n_half",
            "tokens at which a GEMM reaches half of compute_eff",
            "tokens",
            0.0,
            8192.0,
        ),
        _p(
            "norm_bw_eff",
            "RMSNorm/LayerNorm kernel bandwidth efficiency",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
        _p(
            "rope_bw_eff",
            "rotary-embedding kernel bandwidth efficiency",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
        _p(
            "act_bw_eff",
            "activation (SiLU-and-mul, GELU) kernel bandwidth efficiency",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
        _p(
            "copy_bw_eff",
            "plain streaming kernels' bandwidth efficiency (residual add, copies, embedding "
            "gather, sampler)",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
        _p("kernel_floor_us", "shortest time of any kernel", "us", 0.0, 100.0),
        _p(
            "attn_prefill_eff",
            "FlashAttention prefill compute efficiency for long prompts (fraction of peak)",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
        _p(
            "attn_prefill_n_half",
            "prompt length at which prefill attention reaches half of attn_prefill_eff",
            "tokens",
            0.0,
            65536.0,
        ),
        _p(
            "attn_decode_bw_eff",
            "paged-attention decode bandwidth efficiency at large batches",
            "fraction",
            EFF_LOWER,
            1.0,
        ),
        _p("attn_decode_fixed_us", "fixed latency of a decode attention kernel", "us", 0.0, 1000.0),
        _p("layer_fixed_us", "GPU idle time per layer between kernels", "us", 0.0, 1000.0, 0.0),
        _p(
            "host_step_us",
            "host CPU time per forward pass the GPU waits for (scheduling, input preparation, "
            "output processing)",
            "us",
            0.0,
            1e6,
            0.0,
        ),
        _p(
            "host_step_per_seq_us",
            "host CPU time per forward pass and sequence the GPU waits for",
            "us",
            0.0,
            1e5,
            0.0,
        ),
    )
)

#: Every parameter of the model, fields first.
ALL_PARAMS: Mapping[str, ParamSpec] = {**FIELD_PARAMS, **KERNEL_PARAMS}

#: Operators of a pass that run outside the layers, and the bookkeeping kernels before
#: the sampler's pass over the logits (embedding, final norm, LM head, sampler).
_COUNTED_PASS_KERNELS = 4

#: Measured kernel names (Vidur's profiler, the layout of
#: ``data/measurements/*_operators.csv``) → the graph operators each kernel runs. The
#: fused QKV and gate+up GEMMs are one kernel; the profiler times the residual add after
#: the MLP only (``attn_residual`` is not in the measured set).
MEASURED_KERNELS: Mapping[str, tuple[str, ...]] = {
    "input_layernorm": ("attn_norm",),
    "attn_pre_proj": ("q_proj", "k_proj", "v_proj"),
    "attn_rope": ("rope",),
    "attn_prefill": ("attention",),
    "attn_decode": ("attention",),
    "attn_output_reshape": ("attn_output_reshape",),
    "attn_post_proj": ("o_proj",),
    "post_attention_layernorm": ("ffn_norm",),
    "mlp_up_proj": ("gate_proj", "up_proj"),
    "mlp_act": ("ffn_act",),
    "mlp_down_proj": ("down_proj",),
    "add": ("ffn_residual",),
}


def uses_kernel_model(runtime: RuntimeProfile) -> bool:
    """Whether ``runtime`` opts into the kernel-class model (sets any of its params)."""
    return any(k in runtime.params for k in KERNEL_PARAMS)


def op_class(op: Op, decode: bool) -> KernelClass:
    """The kernel class of graph operator ``op`` (in a decode pass when ``decode``)."""
    kind = op.kind
    if kind is OpKind.GEMM:
        return KernelClass.GEMM
    if kind is OpKind.NORM:
        return KernelClass.NORM
    if kind is OpKind.ROPE:
        return KernelClass.ROPE
    if kind is OpKind.ATTENTION:
        return KernelClass.ATTN_DECODE if decode else KernelClass.ATTN_PREFILL
    if kind is OpKind.EMBEDDING:
        return KernelClass.COPY
    if kind is OpKind.ELEMENTWISE:
        # FFN activations (dense, shared and routed experts'); the rest are copies
        return KernelClass.ACT if op.name.endswith("_act") else KernelClass.COPY
    raise SpecError(
        "runtime.params.fused_attention",
        f"the kernel-class GPU model needs fused attention (no {op.name} kernel)",
    )


def op_features(
    op: Op, decode: bool, tokens: int, attended: int
) -> tuple[KernelClass, float, float, float, float, float]:
    """What the kernel model needs of one operator instance: its class, FLOPs, the FLOPs
    each unit of ``gemm_n_half`` adds (``FLOPs / rows`` for a GEMM), the FLOPs each unit of
    ``attn_prefill_n_half`` adds (half a key position per query token for prefill
    attention), bytes, and how many decode-attention fixed latencies it pays (0 or 1)."""
    cls = op_class(op, decode)
    flops = op.flops
    x_gemm = x_attn = fixed = 0.0
    if cls is KernelClass.GEMM:
        x_gemm = flops / op.rows
    elif cls is KernelClass.ATTN_PREFILL:
        # a sliding-window layer's operator carries its own pair count in ``rows``
        pairs = op.rows or attended
        if pairs > 0:
            x_attn = (flops / pairs) * tokens / 2.0
    elif cls is KernelClass.ATTN_DECODE:
        fixed = 1.0
    return cls, flops, x_gemm, x_attn, op.bytes, fixed


@dataclass(frozen=True, slots=True)
class KernelParams:
    """Values of every parameter of the model (see :data:`ALL_PARAMS`)."""

    compute_eff: float
    bw_eff: float
    gemm_n_half: float
    norm_bw_eff: float
    rope_bw_eff: float
    act_bw_eff: float
    copy_bw_eff: float
    kernel_floor_us: float
    attn_prefill_eff: float
    attn_prefill_n_half: float
    attn_decode_bw_eff: float
    attn_decode_fixed_us: float
    layer_fixed_us: float
    host_step_us: float
    host_step_per_seq_us: float

    @classmethod
    def of(cls, runtime: RuntimeProfile) -> KernelParams:
        """The values ``runtime`` holds (SpecError naming a missing or out-of-bounds one)."""
        values = runtime_values(runtime)
        for name, value in values.items():
            spec = ALL_PARAMS[name]
            if not (math.isfinite(value) and spec.lower <= value <= spec.upper):
                where = name if name in FIELD_PARAMS else f"params.{name}"
                raise SpecError(
                    f"{runtime.slug}.{where}",
                    f"must lie in [{spec.lower:g}, {spec.upper:g}] {spec.unit}",
                )
        return cls(**values)

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> KernelParams:
        """Parameters from a name → value mapping (unset optional ones at their default)."""
        full = {n: s.default for n, s in ALL_PARAMS.items() if s.default is not None}
        full.update(values)
        return cls(**{n: float(full[n]) for n in ALL_PARAMS})

    def as_dict(self) -> dict[str, float]:
        """Name → value, fields first."""
        return {n: float(getattr(self, n)) for n in ALL_PARAMS}


def runtime_values(
    runtime: RuntimeProfile, missing: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Every parameter's value in ``runtime`` (fields first): an optional parameter it does
    not set at its default, a required one from ``missing`` (SpecError naming it when
    ``missing`` is None or lacks it)."""
    values: dict[str, float] = {"compute_eff": runtime.compute_eff, "bw_eff": runtime.bw_eff}
    for name, spec in KERNEL_PARAMS.items():
        if name in runtime.params:
            values[name] = float(runtime.params[name])
        elif spec.default is not None:
            values[name] = spec.default
        elif missing is not None and name in missing:
            values[name] = float(missing[name])
        else:
            raise SpecError(
                f"{runtime.slug}.params.{name}",
                f"missing: the kernel-class GPU model needs it ({spec.meaning}, {spec.unit})",
            )
    return values


class KernelCosts:
    """The kernel-class times of one device under one set of :class:`KernelParams`."""

    def __init__(self, device: DeviceSpec, precision: Precision, p: KernelParams) -> None:
        self.p = p
        self.precision = precision
        peak = device.peak_ops_per_s(precision.act_bits, precision.weight_bits, fp8=precision.fp8)
        bw = device.mem_bw_gbps * 1e9
        self.peak = peak
        self.peak_bw = bw
        gemm_rate = peak * p.compute_eff
        attn_rate = peak * p.attn_prefill_eff
        # Achieved rates by class: (compute FLOP/s, memory B/s).
        self.rates: tuple[tuple[float, float], ...] = (
            (gemm_rate, bw * p.bw_eff),
            (gemm_rate, bw * p.norm_bw_eff),
            (gemm_rate, bw * p.rope_bw_eff),
            (gemm_rate, bw * p.act_bw_eff),
            (gemm_rate, bw * p.copy_bw_eff),
            (attn_rate, bw * p.attn_decode_bw_eff),
            (attn_rate, bw * p.attn_decode_bw_eff),
        )
        self.floor_s = p.kernel_floor_us * 1e-6
        self.decode_fixed_s = p.attn_decode_fixed_us * 1e-6
        self.layer_fixed_s = p.layer_fixed_us * 1e-6
        self.host_step_s = p.host_step_us * 1e-6
        self.host_per_seq_s = p.host_step_per_seq_us * 1e-6
        #: Best achieved rates of any kernel (bounds from below on any operator's time).
        self.best_ops_rate = max(gemm_rate, attn_rate)
        self.best_bw = bw * max(
            p.bw_eff,
            p.norm_bw_eff,
            p.rope_bw_eff,
            p.act_bw_eff,
            p.copy_bw_eff,
            p.attn_decode_bw_eff,
        )

    def cm(self, op: Op, decode: bool, tokens: int, attended: int) -> tuple[float, float]:
        """(compute, memory) seconds of one instance of ``op`` in a pass of ``tokens`` new
        tokens and ``attended`` (query, key) pairs per head (no floor)."""
        cls, flops, x_gemm, x_attn, nbytes, fixed = op_features(op, decode, tokens, attended)
        rate_c, rate_m = self.rates[cls]
        return self.combine(flops, x_gemm, x_attn, nbytes, fixed, rate_c, rate_m)

    def combine(
        self, flops: _N, x_gemm: _N, x_attn: _N, nbytes: _N, fixed: _N, rate_c: _N, rate_m: _N
    ) -> tuple[_N, _N]:
        """(compute, memory) seconds from :func:`op_features` and a class's rates — one
        formula for a single operator (floats) and for many at once (numpy arrays)."""
        p = self.p
        # The saturations are intercepts: FLOPs · (n + n_half) / n for a GEMM of n rows,
        # and n_half / 2 keys' worth of work per query token for prefill attention.
        c = (flops + p.gemm_n_half * x_gemm + p.attn_prefill_n_half * x_attn) / rate_c
        m = nbytes / rate_m + self.decode_fixed_s * fixed
        return c, m

    def seconds(self, op: Op, decode: bool, tokens: int, attended: int) -> float:
        """Time of one instance of ``op``, floor included."""
        c, m = self.cm(op, decode, tokens, attended)
        return max(c, m, self.floor_s)

    def bookkeeping_s(self, kernels_per_pass: int) -> float:
        """The pass's small kernels outside the layers that do no modelled work."""
        return max(0, kernels_per_pass - _COUNTED_PASS_KERNELS) * self.floor_s

    def host_s(self, sequences: int, *, step: bool = True) -> float:
        """Host CPU time of a pass over ``sequences`` sequences (without the fixed step
        share when ``step`` is False: a second sub-batch of the same iteration)."""
        return (self.host_step_s if step else 0.0) + self.host_per_seq_s * sequences


def layer_extra_ops(n_layers: int, q_dim: int, tokens: int, prec: Precision) -> tuple[Op, ...]:
    """Per-layer kernels of the stack that the operator graph does not hold, for ``tokens``
    tokens of a model with ``q_dim`` attention outputs: the copy of the attention output into
    the layer's hidden layout (``attn_output_reshape``)."""
    nbytes = q_dim * tokens * prec.a
    return (
        Op(
            "attn_output_reshape",
            OpKind.ELEMENTWISE,
            n_layers,
            0.0,
            act_read_bytes=nbytes,
            act_write_bytes=nbytes,
        ),
    )


def sampler_op(vocab: int, sequences: int, prec: Precision) -> Op:
    """The sampler's pass over the logits of ``sequences`` sequences of a ``vocab``-token
    vocabulary: logits read at the activation precision, probabilities written and read back
    in FP32."""
    logits = vocab * sequences
    return Op(
        "sampler",
        OpKind.ELEMENTWISE,
        1,
        5.0 * logits,
        act_read_bytes=logits * (prec.a + 4.0),
        act_write_bytes=logits * 4.0,
    )


__all__ = [
    "ALL_PARAMS",
    "FIELD_PARAMS",
    "KERNEL_PARAMS",
    "MEASURED_KERNELS",
    "KernelClass",
    "KernelCosts",
    "KernelParams",
    "ParamSpec",
    "layer_extra_ops",
    "op_class",
    "op_features",
    "runtime_values",
    "sampler_op",
    "uses_kernel_model",
]
