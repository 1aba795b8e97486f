"""The LLM operator graph: FLOPs and bytes of every operator of a decoder-only model.

One forward pass (a prefill of some prompts, or one decode iteration of a batch) is a list
of :class:`Op` rows. Each row holds the work of *one instance* of the operator and how many
times it repeats per pass (``repeat`` = ``n_layers`` for the per-layer operators, 1 for the
embedding, the final norm and the LM head). Per layer (LLaMA / Llama-3 / InternLM shapes;
GPT-3 and Chinchilla use the plain FFN):

    attn_norm → q_proj, k_proj, v_proj → rope → attn_score → softmax → attn_value → o_proj
    → attn_residual → ffn_norm → gate_proj (gated only), up_proj → ffn_act → down_proj
    → ffn_residual

and around the layers ``embedding`` (a row gather), ``final_norm`` and ``lm_head``.

Counting conventions (they decide how the paper figures are read, see below):

- A GEMM of ``M`` rows, ``K`` inputs and ``N`` outputs costs ``2·M·K·N`` FLOPs; its weights
  (``K·N`` parameters at the weight precision) are read once per pass, whatever ``M`` is.
  Activations are read and written once per operator at the activation precision.
- ``k_proj`` and ``v_proj`` write their outputs straight into the KV cache (KV precision);
  ``attn_score`` reads K and ``attn_value`` reads V of every attended token once.
- Attention is *materialised* (eager: the score matrix is written by ``attn_score``, read and
  written by ``softmax`` and read by ``attn_value``, and the full ``s × s`` product is
  computed before the causal mask is applied) unless ``fused_attention`` is set (a
  FlashAttention-style kernel: one ``attention`` operator, no score-matrix traffic, only the
  causal triangle computed).
- The LM head runs on the last position of each sequence only (the logits of the next token).
- Norm, RoPE, softmax and activation FLOPs use small fixed per-element counts (5, 3, 5 and 5
  or 8 for GELU); they are < 0.1 % of a 7B model's FLOPs and never decide a latency.
- Norm weights are FP16 whatever the weight precision (quantised stacks keep them so).

GLITCHES Table I (LLaMA2-7B, prefill 1536, decode 512) is read as follows:

- *Prefill GFLOPs* (21137.01): the full pass over 1536 tokens with the eager (full ``s × s``)
  attention; this graph gives 21146 (+0.05 %: the paper's elementwise counts are not stated).
- *Decode GFLOPs/token* and *GB/token* are averages over the 512 decode steps, whose
  attended context grows from 1537 to 2048 tokens (``kv_tokens`` 1536 … 2047 before each
  step); both are linear in the context, so the average equals the step at the mean context.
- *GB* are 10⁹ bytes. Table II's bandwidth utilisations (GB / latency / datasheet GB/s)
  only come out with 10⁹-byte GB; Table I's operational-intensity column instead matches
  GFLOPs / (GB × 2³⁰/10⁹), i.e. GiB — the paper is not self-consistent here, and we follow
  Table II and the datasheets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .errors import SpecError
from .spec import FfnKind, ModelSpec, MoeSpec, RuntimeProfile, check_count

#: Precisions a stack may use for weights, activations and the KV cache (bits).
KNOWN_BITS = (2, 3, 4, 8, 16, 32)

#: Bytes per element of norm weights (kept FP16 by every stack we model).
NORM_WEIGHT_BYTES = 2.0

# Per-element operation counts of the small elementwise operators (see module docstring).
_NORM_OPS = 5.0
_ROPE_OPS = 3.0
_SOFTMAX_OPS = 5.0
_GATED_ACT_OPS = 5.0  # SiLU (≈4) and the gate·up product
_PLAIN_ACT_OPS = 8.0  # GELU (tanh approximation)


class OpKind(StrEnum):
    """What an operator is; device models map kinds to hardware units."""

    EMBEDDING = "embedding"
    NORM = "norm"
    GEMM = "gemm"
    ROPE = "rope"
    ATTN_SCORE = "attn_score"
    SOFTMAX = "softmax"
    ATTN_VALUE = "attn_value"
    ATTENTION = "attention"  # fused score + softmax + value
    ELEMENTWISE = "elementwise"


class Phase(StrEnum):
    """The two phases of LLM inference."""

    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True, slots=True)
class Precision:
    """Bit widths of weights, activations and the KV cache."""

    weight_bits: int
    act_bits: int
    kv_bits: int
    #: 8-bit operands are FP8 floats (the device's FP8 tensor path), not integers.
    fp8: bool = False

    def __post_init__(self) -> None:
        for name in ("weight_bits", "act_bits", "kv_bits"):
            bits = getattr(self, name)
            if isinstance(bits, bool) or bits not in KNOWN_BITS:
                raise SpecError(f"precision.{name}", f"unknown precision: {bits!r} bits")

    @classmethod
    def of(cls, runtime: RuntimeProfile) -> Precision:
        """The precision a runtime profile runs at."""
        return _precision_of(runtime.weight_bits, runtime.act_bits, runtime.kv_bits, runtime.fp8)

    @property
    def w(self) -> float:
        """Bytes per weight."""
        return self.weight_bits / 8

    @property
    def a(self) -> float:
        """Bytes per activation element."""
        return self.act_bits / 8

    @property
    def kv(self) -> float:
        """Bytes per KV-cache element."""
        return self.kv_bits / 8


@lru_cache(maxsize=64)
def _precision_of(weight_bits: int, act_bits: int, kv_bits: int, fp8: bool) -> Precision:
    return Precision(weight_bits, act_bits, kv_bits, fp8)


FP16 = Precision(16, 16, 16)


@dataclass(frozen=True, slots=True)
class Op:
    """One operator instance: its work and traffic; ``repeat`` instances run per pass.

    For GEMMs ``rows`` × ``in_features`` → ``out_features`` is the shape (``rows`` = tokens
    in the pass, or sequences for the LM head); other kinds leave them 0.
    """

    name: str
    kind: OpKind
    repeat: int
    flops: float
    weight_bytes: float = 0.0
    act_read_bytes: float = 0.0
    act_write_bytes: float = 0.0
    kv_read_bytes: float = 0.0
    kv_write_bytes: float = 0.0
    rows: int = 0
    in_features: int = 0
    out_features: int = 0

    @property
    def bytes(self) -> float:
        """All memory traffic of one instance (weights, activations, KV read and written)."""
        return (
            self.weight_bytes
            + self.act_read_bytes
            + self.act_write_bytes
            + self.kv_read_bytes
            + self.kv_write_bytes
        )

    @property
    def intensity(self) -> float:
        """Operational intensity in FLOP per byte (inf for traffic-free operators)."""
        b = self.bytes
        return self.flops / b if b > 0 else math.inf


@dataclass(frozen=True, slots=True)
class PhaseGraph:
    """All operators of one pass, with totals over ``repeat``.

    ``tokens`` is the number of new tokens the pass processes, ``sequences`` the number of
    sequences, ``attended`` the number of (query, key) pairs per head summed over sequences
    (what attention FLOPs scale with) and ``kv_tokens`` the KV-cache tokens the pass reads.
    """

    phase: Phase
    ops: tuple[Op, ...]
    n_layers: int
    tokens: int
    sequences: int
    attended: int
    kv_tokens: int

    @property
    def flops(self) -> float:
        """Total FLOPs of the pass."""
        return sum(op.flops * op.repeat for op in self.ops)

    @property
    def bytes(self) -> float:
        """Total memory traffic of the pass in bytes."""
        return sum(op.bytes * op.repeat for op in self.ops)

    @property
    def weight_bytes(self) -> float:
        """Weight bytes read in the pass."""
        return sum(op.weight_bytes * op.repeat for op in self.ops)

    @property
    def act_bytes(self) -> float:
        """Activation bytes read and written in the pass."""
        return sum((op.act_read_bytes + op.act_write_bytes) * op.repeat for op in self.ops)

    @property
    def kv_read_bytes(self) -> float:
        """KV-cache bytes read in the pass."""
        return sum(op.kv_read_bytes * op.repeat for op in self.ops)

    @property
    def kv_write_bytes(self) -> float:
        """KV-cache bytes written in the pass."""
        return sum(op.kv_write_bytes * op.repeat for op in self.ops)

    @property
    def layer_ops(self) -> tuple[Op, ...]:
        """The operators that repeat once per layer, in execution order (``ops`` is always
        the embedding, the layer's operators, the final norm and the LM head)."""
        return self.ops[1:-2]

    @property
    def pre_ops(self) -> tuple[Op, ...]:
        """Operators that run once before the layers (the embedding)."""
        return self.ops[:1]

    @property
    def post_ops(self) -> tuple[Op, ...]:
        """Operators that run once after the layers (final norm, LM head)."""
        return self.ops[-2:]

    def summary(self) -> dict[str, float]:
        """Totals as a JSON-friendly dict (FLOPs, bytes by kind, intensity)."""
        flops, nbytes = self.flops, self.bytes
        return {
            "flops": flops,
            "bytes": nbytes,
            "weight_bytes": self.weight_bytes,
            "act_bytes": self.act_bytes,
            "kv_read_bytes": self.kv_read_bytes,
            "kv_write_bytes": self.kv_write_bytes,
            "intensity_flop_per_byte": flops / nbytes if nbytes else math.inf,
            "tokens": self.tokens,
        }


# --- shapes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Shapes:
    """Shape facts of a model that every pass needs (cached per model and attention form).

    Attention is described by what it computes and reads, so multi-head latent attention
    (:class:`~.spec.MlaSpec`) and GQA share the operators: ``pre_gemms`` are the projections
    before attention (``(name, in, out, writes the KV cache)``), ``rope_elems`` the rotated
    elements per token, ``qk_dim`` / ``v_dim`` the per-head widths of the score and value
    products, ``k_read`` / ``v_read`` the cached elements per attended token the two read
    (``kv_shared``: one tensor serves both, read once by a fused kernel), ``kv_act``: the
    keys and values attention reads are activations up-projected in the pass (MLA prefill,
    ``kv_up``: ``(latent, out)`` of that GEMM over every attended token), ``q_in`` / ``attn_out``
    the query and output elements per token, ``post_gemms`` the projections after attention
    (MLA's absorbed value projection, ``o_proj``). FFN: ``dense_layers`` layers of the dense
    ``ffn`` (``gemms`` keeps the dense per-layer ``(name, in, out)`` list), ``moe_layers`` of
    the mixture of experts (``moe``).
    """

    h: int
    q_dim: int
    kv_dim: int
    ffn: int
    gated: bool
    vocab: int
    n_heads: int
    head_dim: int
    n_layers: int
    gemms: tuple[tuple[str, int, int], ...]  # dense per-layer (name, in, out), in order
    pre_gemms: tuple[tuple[str, int, int, bool, int], ...]
    rope_elems: int
    qk_dim: int
    v_dim: int
    k_read: int
    v_read: int
    kv_shared: bool
    kv_act: bool
    kv_up: tuple[int, int] | None
    q_in: int
    attn_out: int
    post_gemms: tuple[tuple[str, int, int, int], ...]
    dense_layers: int
    moe_layers: int
    moe: MoeSpec | None
    expert_bytes: float  # bytes per routed-expert weight (0: the stack's precision)
    window: int = 0  # sliding window (tokens) of the windowed layers; 0: none
    window_layers: int = 0


@lru_cache(maxsize=256)
def _shapes(model: ModelSpec, absorbed: bool = False) -> _Shapes:
    """The model's shapes; ``absorbed``: MLA's decode form (no effect without MLA)."""
    h = model.hidden_size
    q_dim = model.n_heads * model.head_dim
    kv_dim = model.n_kv_heads * model.head_dim
    f = model.ffn_size
    gated = model.ffn_kind is FfnKind.GATED
    attn = (("q_proj", h, q_dim), ("k_proj", h, kv_dim), ("v_proj", h, kv_dim))
    ffn_in = (("gate_proj", h, f), ("up_proj", h, f)) if gated else (("up_proj", h, f),)
    gemms = (*attn, ("o_proj", q_dim, h), *ffn_in, ("down_proj", f, h))
    moe = model.moe
    expert_bytes = 0.0
    if moe is not None and moe.expert_weight_bits is not None:
        expert_bytes = moe.expert_weight_bits / 8
    common = dict(
        h=h,
        q_dim=q_dim,
        kv_dim=kv_dim,
        ffn=f,
        gated=gated,
        vocab=model.vocab_size,
        n_heads=model.n_heads,
        head_dim=model.head_dim,
        n_layers=model.n_layers,
        gemms=gemms,
        dense_layers=model.dense_ffn_layers,
        moe_layers=model.moe_layers,
        moe=moe,
        expert_bytes=expert_bytes,
        window=model.sliding_window.window_tokens if model.sliding_window else 0,
        window_layers=model.sliding_window.layers if model.sliding_window else 0,
    )
    mla = model.mla
    if mla is None:
        return _Shapes(
            **common,  # type: ignore[arg-type]
            pre_gemms=(
                ("q_proj", h, q_dim, False, 1),
                ("k_proj", h, kv_dim, True, 1),
                ("v_proj", h, kv_dim, True, 1),
            ),
            rope_elems=q_dim + kv_dim,
            qk_dim=model.head_dim,
            v_dim=model.head_dim,
            k_read=kv_dim,
            v_read=kv_dim,
            kv_shared=False,
            kv_act=False,
            kv_up=None,
            q_in=q_dim,
            attn_out=q_dim,
            post_gemms=(("o_proj", q_dim, h, 1),),
        )
    nh, lat, rope = model.n_heads, mla.kv_lora_rank, mla.qk_rope_head_dim
    nope, vh = mla.qk_nope_head_dim, mla.v_head_dim
    if mla.q_lora_rank:
        q_gemms: tuple[tuple[str, int, int, bool, int], ...] = (
            ("q_a_proj", h, mla.q_lora_rank, False, 1),
            ("q_b_proj", mla.q_lora_rank, nh * (nope + rope), False, 1),
        )
    else:
        q_gemms = (("q_proj", h, nh * (nope + rope), False, 1),)
    kv_a = ("kv_a_proj", h, lat + rope, True, 1)
    if absorbed:
        # Decode (FlashMLA): W_UK folds into the query (per head nope → latent), attention
        # runs over the cached latent + rope key as one shared KV head, W_UV folds into the
        # output (per head latent → v_head_dim).
        return _Shapes(
            **common,  # type: ignore[arg-type]
            pre_gemms=(*q_gemms, kv_a, ("q_absorb", nh * nope, nh * lat, False, nh)),
            rope_elems=nh * rope + rope,
            qk_dim=lat + rope,
            v_dim=lat,
            k_read=lat + rope,
            v_read=lat,
            kv_shared=True,
            kv_act=False,
            kv_up=None,
            q_in=nh * (lat + rope),
            attn_out=nh * lat,
            post_gemms=(("v_absorb", nh * lat, nh * vh, nh), ("o_proj", nh * vh, h, 1)),
        )
    return _Shapes(
        **common,  # type: ignore[arg-type]
        pre_gemms=(*q_gemms, kv_a),
        rope_elems=nh * rope + rope,
        qk_dim=nope + rope,
        v_dim=vh,
        k_read=nh * (nope + rope),
        v_read=nh * vh,
        kv_shared=False,
        kv_act=True,
        kv_up=(lat, nh * (nope + vh)),
        q_in=nh * (nope + rope),
        attn_out=nh * vh,
        post_gemms=(("o_proj", nh * vh, h, 1),),
    )


def _ffn_params(h: int, width: int, gated: bool) -> int:
    return (3 if gated else 2) * h * width


@lru_cache(maxsize=256)
def _attention_params(model: ModelSpec) -> int:
    """Parameters of one layer's attention projections (MLA: as stored, ``kv_b_proj`` whole)."""
    s = _shapes(model)
    params = sum(k * n // g for _, k, n, _, g in s.pre_gemms)
    params += sum(k * n // g for _, k, n, g in s.post_gemms)
    if s.kv_up is not None:
        params += s.kv_up[0] * s.kv_up[1]
    return params


@lru_cache(maxsize=256)
def layer_weight_params(model: ModelSpec) -> int:
    """Parameters of the GEMMs of one dense layer (what a decode step streams per layer).
    A mixture-of-experts model: of its first layer (see :func:`moe_layer_params`)."""
    s = _shapes(model)
    if s.dense_layers:
        return _attention_params(model) + _ffn_params(s.h, s.ffn, s.gated)
    return moe_layer_params(model)


@lru_cache(maxsize=256)
def moe_layer_params(model: ModelSpec) -> int:
    """Parameters of one MoE layer's GEMMs: attention, router, shared and *every* routed
    expert (memory holds them all); 0 for a dense model."""
    s = _shapes(model)
    moe = s.moe
    if moe is None:
        return 0
    return (
        _attention_params(model)
        + s.h * moe.n_experts
        + _ffn_params(s.h, moe.n_shared_experts * moe.shared_ffn_size, s.gated)
        + moe.held_experts * _ffn_params(s.h, moe.expert_ffn_size, s.gated)
    )


def expert_params(model: ModelSpec) -> int:
    """Parameters of one routed expert (0 for a dense model)."""
    if model.moe is None:
        return 0
    return _ffn_params(
        model.hidden_size, model.moe.expert_ffn_size, model.ffn_kind is FfnKind.GATED
    )


@lru_cache(maxsize=256)
def gemm_params(model: ModelSpec) -> int:
    """Parameters of every GEMM of a pass: all layers plus the LM head."""
    s = _shapes(model)
    dense = layer_weight_params(model) if s.dense_layers else 0
    return s.dense_layers * dense + s.moe_layers * moe_layer_params(model) + s.h * s.vocab


@lru_cache(maxsize=256)
def active_params(model: ModelSpec) -> float:
    """Parameters one token uses (embedding row excluded, LM head included): a dense model's
    GEMMs, a mixture of experts' with ``experts_per_token`` of its routed experts."""
    if model.moe is None:
        return float(gemm_params(model))
    moe = model.moe
    idle = (moe.held_experts - moe.experts_per_token) * expert_params(model)
    return float(gemm_params(model) - model.moe_layers * idle)


def _expert_weight_bytes(s: _Shapes, prec: Precision) -> float:
    """Bytes per routed-expert weight: the published expert format when narrower than the
    stack's weights (gpt-oss's MXFP4), else the stack's."""
    return min(prec.w, s.expert_bytes) if s.expert_bytes else prec.w


def weight_bytes(model: ModelSpec, prec: Precision) -> float:
    """Bytes of all weights held in device memory (layers — every expert —, embedding, LM
    head unless tied, norms in FP16)."""
    s = _shapes(model)
    emb = s.vocab * s.h
    lm = 0 if model.tied_embeddings else s.vocab * s.h
    norms = (2 * s.n_layers + 1) * s.h
    if s.moe is None:
        return (
            s.n_layers * layer_weight_params(model) + emb + lm
        ) * prec.w + norms * NORM_WEIGHT_BYTES
    routed = s.moe_layers * s.moe.held_experts * expert_params(model)
    other = gemm_params(model) - s.h * s.vocab - routed
    return (
        (other + emb + lm) * prec.w
        + routed * _expert_weight_bytes(s, prec)
        + norms * NORM_WEIGHT_BYTES
    )


# --- expert routing --------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def expert_inclusion(n_experts: int, top_k: int, zipf_s: float = 0.0) -> tuple[float, ...]:
    """Probability that one token routes to each expert (most popular first); they sum to
    ``top_k``.

    Uniform routing (``zipf_s`` 0): ``k / E`` each. Skewed routing: expert popularity
    ``p_i ∝ i^-s`` (Zipf), and a token's top-k includes expert ``i`` with probability
    ``q_i = min(1, c·p_i)``, ``c`` chosen so that ``Σ q_i = k`` (proportional inclusion capped
    at certainty, water-filled). Only these marginals enter every expectation below, so any
    top-k routing with them gives the same expected counts.
    """
    check_count("n_experts", n_experts, minimum=1)
    check_count("top_k", top_k, maximum=n_experts)
    if not (math.isfinite(zipf_s) and zipf_s >= 0):
        raise SpecError("moe_routing_zipf", "must be a finite number >= 0")
    if zipf_s == 0:
        return (top_k / n_experts,) * n_experts
    p = [(i + 1) ** -zipf_s for i in range(n_experts)]
    q = [0.0] * n_experts
    capped: set[int] = set()
    while True:
        free = [i for i in range(n_experts) if i not in capped]
        c = (top_k - len(capped)) / sum(p[i] for i in free)
        newly = {i for i in free if c * p[i] >= 1.0}
        if not newly:
            for i in free:
                q[i] = c * p[i]
            for i in capped:
                q[i] = 1.0
            return tuple(q)
        capped |= newly


def expected_distinct_experts(
    tokens: int, n_experts: int, top_k: int, zipf_s: float = 0.0
) -> float:
    """Expected number of distinct experts ``tokens`` routed tokens touch with top-k of
    ``n_experts``: ``Σ_i 1 − (1 − q_i)^T`` over the inclusion probabilities of
    :func:`expert_inclusion`; under uniform routing ``E·(1 − (1 − k/E)^T)``."""
    check_count("tokens", tokens, minimum=0, maximum=10**12)
    q = expert_inclusion(n_experts, top_k, zipf_s)
    return _distinct(q, tokens)


def _distinct(q: Sequence[float], tokens: int) -> float:
    return float(sum(1.0 - (1.0 - qi) ** tokens for qi in q))


@dataclass(frozen=True, slots=True)
class ExpertLoad:
    """What one device's routed experts do in a pass (the busiest device under expert
    parallelism): ``routed`` token-expert pairs it computes, ``distinct`` experts it touches
    (expected values), ``held`` experts it stores."""

    routed: float
    distinct: float
    held: int


@lru_cache(maxsize=8192)
def expert_load(moe: MoeSpec, tokens: int) -> ExpertLoad:
    """The busiest device's routed work for ``tokens`` tokens of a pass.

    Without expert parallelism the device holds every expert. With ``ep`` devices each
    holds a contiguous block of ``E / ep`` experts in popularity order (no expert load
    balancer: under skewed routing the hottest experts share a device, an upper bound on
    the imbalance) and receives the routed copies of the tokens of all ``token_groups``
    attention groups: ``T × token_groups`` tokens."""
    ep = moe.expert_parallel
    q = expert_inclusion(moe.n_experts, moe.experts_per_token, moe.routing_zipf)
    t = tokens * moe.token_groups
    if moe.resident_experts:
        block = q[: moe.resident_experts]
        return ExpertLoad(t * sum(block), _distinct(block, t), moe.resident_experts)
    per = moe.n_experts // ep
    best: ExpertLoad | None = None
    for d in range(ep):
        block = q[d * per : (d + 1) * per]
        load = ExpertLoad(t * sum(block), _distinct(block, t), per)
        if best is None or load.routed > best.routed:
            best = load
    assert best is not None
    return best


def offloaded_expert_load(moe: MoeSpec, tokens: int) -> ExpertLoad:
    """The routed work of the experts a device does *not* keep (``resident_experts`` > 0:
    the least popular ``n_experts − resident_experts``) for ``tokens`` tokens of a pass."""
    q = expert_inclusion(moe.n_experts, moe.experts_per_token, moe.routing_zipf)
    block = q[moe.resident_experts :] if moe.resident_experts else ()
    return ExpertLoad(tokens * sum(block), _distinct(block, tokens), len(block))


# --- building passes -------------------------------------------------------------------------


def _layer_ops(
    s: _Shapes,
    tokens: int,
    attended: int,
    kv_read_tokens: int,
    prec: Precision,
    fused: bool,
    window_counts: tuple[int, int] | None = None,
) -> list[Op]:
    """The operators of one layer for a pass of ``tokens`` new tokens."""
    return [
        *_pre_attention_ops(s, tokens, prec),
        *_attention_ops(s, tokens, attended, kv_read_tokens, prec, fused, window_counts),
        *_post_attention_ops(s, tokens, prec),
    ]


def _norm(s: _Shapes, name: str, tokens: int, prec: Precision, repeat: int | None = None) -> Op:
    hta = s.h * tokens * prec.a
    return Op(
        name,
        OpKind.NORM,
        s.n_layers if repeat is None else repeat,
        _NORM_OPS * s.h * tokens,
        s.h * NORM_WEIGHT_BYTES,
        hta,
        hta,
    )


def _gemm(
    s: _Shapes,
    name: str,
    k: int,
    n: int,
    tokens: int,
    prec: Precision,
    repeat: int | None = None,
    to_kv: bool | None = None,
    groups: int = 1,
) -> Op:
    """A GEMM of ``tokens`` rows, ``k`` → ``n``; ``groups`` > 1: a batched GEMM of that many
    independent ``k/groups → n/groups`` blocks (MLA's per-head absorbed projections)."""
    t, a = tokens, prec.a
    if to_kv is None:
        to_kv = name in ("k_proj", "v_proj")
    kn = k * n if groups == 1 else k * n // groups
    return Op(
        name,
        OpKind.GEMM,
        s.n_layers if repeat is None else repeat,
        2.0 * t * kn,
        weight_bytes=kn * prec.w,
        act_read_bytes=k * t * a,
        act_write_bytes=0.0 if to_kv else n * t * a,
        kv_write_bytes=n * t * prec.kv if to_kv else 0.0,
        rows=t,
        in_features=k,
        out_features=n,
    )


def _pre_attention_ops(s: _Shapes, tokens: int, prec: Precision) -> list[Op]:
    """A layer's operators before attention: norm, Q/K/V projections, RoPE."""
    t, a = tokens, prec.a
    ops = [_norm(s, "attn_norm", t, prec)]
    ops.extend(
        _gemm(s, name, k, n, t, prec, to_kv=kv, groups=g) for name, k, n, kv, g in s.pre_gemms
    )
    rope_elems = s.rope_elems * t
    ops.append(
        Op(
            "rope",
            OpKind.ROPE,
            s.n_layers,
            _ROPE_OPS * rope_elems,
            0.0,
            rope_elems * a,
            rope_elems * a,
        )
    )
    return ops


def _attention_ops(
    s: _Shapes,
    tokens: int,
    attended: int,
    kv_read_tokens: int,
    prec: Precision,
    fused: bool,
    window_counts: tuple[int, int] | None = None,
) -> list[Op]:
    """A layer's attention: the only operators whose work depends on the cached tokens.

    A model with sliding-window layers (fused attention only: an eager stack computes the
    full masked product) runs its full-attention layers over ``attended`` / ``kv_read_tokens``
    and its windowed layers (operators suffixed ``_swa``) over ``window_counts`` — the pairs
    and cached tokens within the window (default: the same counts, an upper bound)."""
    if not (s.window_layers and fused):
        return _attention_block(s, tokens, attended, kv_read_tokens, prec, fused, s.n_layers, "")
    wp, wkv = window_counts if window_counts is not None else (attended, kv_read_tokens)
    full = s.n_layers - s.window_layers
    ops = (
        _attention_block(s, tokens, attended, kv_read_tokens, prec, fused, full, "") if full else []
    )
    return ops + _attention_block(s, tokens, wp, wkv, prec, fused, s.window_layers, "_swa")


def window_pairs(length: int, cached: int, window: int) -> tuple[int, int]:
    """(query-key pairs, cached tokens read) of ``length`` new tokens after ``cached`` ones
    of one sequence when each query sees at most the last ``window`` positions (itself
    included): ``Σ_{j=1..length} min(cached + j, window)`` and ``min(cached + length,
    window − 1 + length)``."""
    total = cached + length
    if total <= window:
        pairs = length * cached + length * (length + 1) // 2
    elif cached >= window:
        pairs = length * window
    else:
        ramp = window - cached  # queries still below the window
        pairs = ramp * cached + ramp * (ramp + 1) // 2 + (length - ramp) * window
    return pairs, min(total, window - 1 + length)


def _attention_block(
    s: _Shapes,
    tokens: int,
    attended: int,
    kv_read_tokens: int,
    prec: Precision,
    fused: bool,
    n_l: int,
    suffix: str,
) -> list[Op]:
    t, p = tokens, attended
    a = prec.a
    ops: list[Op] = []
    if s.kv_up is not None:
        # MLA prefill: every attended token's latent (read from the cache) is up-projected
        # to per-head keys and values.
        lat, out = s.kv_up
        ops.append(
            Op(
                "kv_b_proj" + suffix,
                OpKind.GEMM,
                n_l,
                2.0 * kv_read_tokens * lat * out,
                weight_bytes=lat * out * prec.w,
                act_write_bytes=out * kv_read_tokens * a,
                kv_read_bytes=lat * kv_read_tokens * prec.kv,
                rows=kv_read_tokens,
                in_features=lat,
                out_features=out,
            )
        )
    eb = a if s.kv_act else prec.kv
    # K (or V) of every attended token, once
    k_read = s.k_read * kv_read_tokens * eb
    v_read = s.v_read * kv_read_tokens * eb
    qk_flops = 2.0 * s.qk_dim * s.n_heads * p
    av_flops = 2.0 * s.v_dim * s.n_heads * p
    q_bytes = s.q_in * t * a
    out_bytes = s.attn_out * t * a
    if fused:
        kv_bytes = k_read if s.kv_shared else k_read + v_read
        ops.append(
            Op(
                "attention" + suffix,
                OpKind.ATTENTION,
                n_l,
                qk_flops + av_flops + _SOFTMAX_OPS * s.n_heads * p,
                act_read_bytes=q_bytes + kv_bytes if s.kv_act else q_bytes,
                act_write_bytes=out_bytes,
                kv_read_bytes=0.0 if s.kv_act else kv_bytes,
                # a windowed layer's own pairs (the pass's count is the full layers')
                rows=p if suffix else 0,
            )
        )
        return ops
    scores = s.n_heads * p * a
    if s.kv_act:
        ops += [
            Op(
                "attn_score" + suffix,
                OpKind.ATTN_SCORE,
                n_l,
                qk_flops,
                0.0,
                q_bytes + k_read,
                scores,
            ),
            Op(
                "softmax" + suffix,
                OpKind.SOFTMAX,
                n_l,
                _SOFTMAX_OPS * s.n_heads * p,
                0.0,
                scores,
                scores,
            ),
            Op(
                "attn_value" + suffix,
                OpKind.ATTN_VALUE,
                n_l,
                av_flops,
                0.0,
                scores + v_read,
                out_bytes,
            ),
        ]
        return ops
    ops += [
        Op("attn_score" + suffix, OpKind.ATTN_SCORE, n_l, qk_flops, 0.0, q_bytes, scores, k_read),
        Op(
            "softmax" + suffix,
            OpKind.SOFTMAX,
            n_l,
            _SOFTMAX_OPS * s.n_heads * p,
            0.0,
            scores,
            scores,
        ),
        Op("attn_value" + suffix, OpKind.ATTN_VALUE, n_l, av_flops, 0.0, scores, out_bytes, v_read),
    ]
    return ops


def _ffn_ops(
    s: _Shapes, prefix: str, width: int, tokens: int, prec: Precision, repeat: int
) -> list[Op]:
    """A dense gated or plain FFN of ``width`` over ``tokens`` tokens, ``repeat`` layers."""
    t, a, h = tokens, prec.a, s.h
    ins = (f"{prefix}gate_proj", f"{prefix}up_proj") if s.gated else (f"{prefix}up_proj",)
    ops = [_gemm(s, name, h, width, t, prec, repeat) for name in ins]
    fta = width * t * a
    if s.gated:
        ops.append(
            Op(
                f"{prefix}ffn_act",
                OpKind.ELEMENTWISE,
                repeat,
                _GATED_ACT_OPS * width * t,
                0.0,
                2 * fta,
                fta,
            )
        )
    else:
        ops.append(
            Op(
                f"{prefix}ffn_act",
                OpKind.ELEMENTWISE,
                repeat,
                _PLAIN_ACT_OPS * width * t,
                0.0,
                fta,
                fta,
            )
        )
    ops.append(_gemm(s, f"{prefix}down_proj", width, h, t, prec, repeat))
    return ops


def _routed_expert_ops(
    s: _Shapes, load: ExpertLoad, tokens: int, prec: Precision, r: int
) -> list[Op]:
    """The routed experts' operators for ``load`` (its copies and distinct experts) of a
    pass of ``tokens`` tokens, ``r`` instances: grouped GEMMs, activation, weighted combine."""
    moe = s.moe
    assert moe is not None
    t, a, h = tokens, prec.a, s.h
    ops: list[Op] = []
    f = moe.expert_ffn_size
    n_in = 2 * f if s.gated else f
    copies = load.routed
    rows = max(1, round(copies / load.distinct)) if load.distinct > 0 else 1
    wb = _expert_weight_bytes(s, prec)
    ops.append(
        Op(
            "expert_gate_up" if s.gated else "expert_up",
            OpKind.GEMM,
            r,
            2.0 * copies * h * n_in,
            weight_bytes=load.distinct * h * n_in * wb,
            act_read_bytes=h * copies * a,
            act_write_bytes=n_in * copies * a,
            rows=rows,
            in_features=h,
            out_features=n_in,
        )
    )
    fca = f * copies * a
    act_ops = _GATED_ACT_OPS if s.gated else _PLAIN_ACT_OPS
    ops.append(
        Op(
            "expert_act",
            OpKind.ELEMENTWISE,
            r,
            act_ops * f * copies,
            0.0,
            2 * fca if s.gated else fca,
            fca,
        )
    )
    ops.append(
        Op(
            "expert_down",
            OpKind.GEMM,
            r,
            2.0 * copies * f * h,
            weight_bytes=load.distinct * f * h * wb,
            act_read_bytes=fca,
            act_write_bytes=h * copies * a,
            rows=rows,
            in_features=f,
            out_features=h,
        )
    )
    ops.append(
        Op(
            "expert_combine",
            OpKind.ELEMENTWISE,
            r,
            2.0 * h * copies,
            0.0,
            h * copies * a,
            h * t * a,
        )
    )
    return ops


def routed_expert_ops(
    model: ModelSpec, load: ExpertLoad, tokens: int, prec: Precision
) -> tuple[Op, ...]:
    """One layer's operators for the routed experts of ``load`` in a pass of ``tokens``
    tokens: the same operators, per expert, as a pass's routed experts (what a tier
    computing some of a layer's experts apart from the rest is charged; the combine writes
    the pass's ``tokens`` partial outputs). Empty for a dense model or no routed copies."""
    if model.moe is None or load.routed <= 0:
        return ()
    return tuple(_routed_expert_ops(_shapes(model), load, tokens, prec, 1))


def _moe_ops(s: _Shapes, tokens: int, prec: Precision) -> list[Op]:
    """A mixture-of-experts FFN over ``tokens`` tokens (``moe_layers`` layers): the router,
    the shared experts (a dense FFN of their joint width), and the routed experts as grouped
    GEMMs — FLOPs of the ``T·k`` routed token copies, weights of the *expected distinct*
    experts touched (:func:`expert_load`), ``rows`` the tokens per touched expert (what a
    kernel's small-M efficiency depends on) — then the weighted combine of the copies."""
    moe = s.moe
    assert moe is not None
    t, h, r = tokens, s.h, s.moe_layers
    ops = [_gemm(s, "router", h, moe.n_experts, t, prec, r)]
    if moe.n_shared_experts:
        ops += _ffn_ops(s, "shared_", moe.n_shared_experts * moe.shared_ffn_size, t, prec, r)
    ops += _routed_expert_ops(s, expert_load(moe, t), t, prec, r)
    return ops


#: Operators whose cost is not affine in a pass's token count (the distinct experts a pass
#: touches saturate): the routed experts' GEMMs.
NONLINEAR_OPS = frozenset({"expert_gate_up", "expert_up", "expert_down"})


def moe_ops(model: ModelSpec, tokens: int, prec: Precision) -> tuple[Op, ...]:
    """The routed experts' operators of one pass of ``tokens`` tokens (those of
    :data:`NONLINEAR_OPS`; empty for a dense model)."""
    if model.moe is None or tokens <= 0:
        return ()
    return _moe_ops_cached(model, tokens, prec)


@lru_cache(maxsize=8192)
def _moe_ops_cached(model: ModelSpec, tokens: int, prec: Precision) -> tuple[Op, ...]:
    return tuple(op for op in _moe_ops(_shapes(model), tokens, prec) if op.name in NONLINEAR_OPS)


def _post_attention_ops(s: _Shapes, tokens: int, prec: Precision) -> list[Op]:
    """A layer's operators after attention: output projection, residual, FFN."""
    n_l, t, a = s.n_layers, tokens, prec.a
    h = s.h
    hta = h * t * a
    ops = [_gemm(s, name, k, n, t, prec, groups=g) for name, k, n, g in s.post_gemms]
    ops.append(Op("attn_residual", OpKind.ELEMENTWISE, n_l, h * t, 0.0, 2 * hta, hta))
    ops.append(_norm(s, "ffn_norm", t, prec))
    if s.moe is None:
        gemms = s.gemms
        n_in = 2 if s.gated else 1
        ops.extend(_gemm(s, name, k, n, t, prec) for name, k, n in gemms[4 : 4 + n_in])
        fta = s.ffn * t * a
        if s.gated:
            ops.append(
                Op(
                    "ffn_act",
                    OpKind.ELEMENTWISE,
                    n_l,
                    _GATED_ACT_OPS * s.ffn * t,
                    0.0,
                    2 * fta,
                    fta,
                )
            )
        else:
            ops.append(
                Op("ffn_act", OpKind.ELEMENTWISE, n_l, _PLAIN_ACT_OPS * s.ffn * t, 0.0, fta, fta)
            )
        ops.append(_gemm(s, *gemms[-1], t, prec))
    else:
        if s.dense_layers:
            ops += _ffn_ops(s, "", s.ffn, t, prec, s.dense_layers)
        ops += _moe_ops(s, t, prec)
    ops.append(Op("ffn_residual", OpKind.ELEMENTWISE, n_l, h * t, 0.0, 2 * hta, hta))
    return ops


def _model_ops(s: _Shapes, tokens: int, sequences: int, prec: Precision) -> tuple[Op, Op, Op]:
    """Embedding gather, final norm and LM head (on the last position of each sequence)."""
    h, a = s.h, prec.a
    emb = Op(
        "embedding",
        OpKind.EMBEDDING,
        1,
        0.0,
        weight_bytes=tokens * h * prec.w,
        act_write_bytes=tokens * h * a,
        rows=tokens,
        in_features=s.vocab,
        out_features=h,
    )
    fnorm = Op(
        "final_norm",
        OpKind.NORM,
        1,
        _NORM_OPS * h * sequences,
        h * NORM_WEIGHT_BYTES,
        h * sequences * a,
        h * sequences * a,
    )
    lm = Op(
        "lm_head",
        OpKind.GEMM,
        1,
        2.0 * sequences * h * s.vocab,
        weight_bytes=h * s.vocab * prec.w,
        act_read_bytes=h * sequences * a,
        act_write_bytes=s.vocab * sequences * a,
        rows=sequences,
        in_features=h,
        out_features=s.vocab,
    )
    return emb, fnorm, lm


def _check_lens(seq_lens: Sequence[int]) -> tuple[int, ...]:
    if isinstance(seq_lens, int | str | bytes) or not isinstance(seq_lens, Sequence):
        raise SpecError("seq_lens", "must be a sequence of prompt lengths")
    if not seq_lens:
        raise SpecError("seq_lens", "must hold at least one prompt length")
    return tuple(check_count(f"seq_lens[{i}]", s) for i, s in enumerate(seq_lens))


def prefill_graph(
    model: ModelSpec,
    seq_lens: Sequence[int],
    prec: Precision = FP16,
    *,
    fused_attention: bool = False,
) -> PhaseGraph:
    """Operators of prefilling the prompts ``seq_lens`` in one pass.

    The prompts are packed: GEMMs run over all ``Σ s`` tokens at once, attention stays within
    each prompt (``Σ s²`` score pairs per head for eager attention, ``Σ s(s+1)/2`` when fused
    kernels skip the masked half).
    """
    lens = _check_lens(seq_lens)
    return _prefill_cached(model, lens, prec, bool(fused_attention))


@lru_cache(maxsize=4096)
def _prefill_cached(
    model: ModelSpec, lens: tuple[int, ...], prec: Precision, fused: bool
) -> PhaseGraph:
    s = _shapes(model)
    tokens = sum(lens)
    attended = sum(x * (x + 1) // 2 for x in lens) if fused else sum(x * x for x in lens)
    window = None
    if s.window_layers and fused:
        window = (sum(window_pairs(x, 0, s.window)[0] for x in lens), tokens)
    emb, fnorm, lm = _model_ops(s, tokens, len(lens), prec)
    ops = (emb, *_layer_ops(s, tokens, attended, tokens, prec, fused, window), fnorm, lm)
    return PhaseGraph(Phase.PREFILL, ops, s.n_layers, tokens, len(lens), attended, tokens)


def decode_graph(
    model: ModelSpec,
    batch: int,
    kv_tokens: int,
    prec: Precision = FP16,
    *,
    fused_attention: bool = False,
) -> PhaseGraph:
    """Operators of one decode iteration: ``batch`` sequences each generating one token,
    with ``kv_tokens`` tokens already cached across the batch (before this step's tokens
    are appended). Every new token attends to its own sequence's cache and itself, so the
    pass reads ``kv_tokens + batch`` KV positions and scores as many pairs per head."""
    check_count("batch", batch)
    check_count("kv_tokens", kv_tokens, minimum=0, maximum=10**12)
    return _decode_cached(model, batch, kv_tokens, prec, bool(fused_attention))


@lru_cache(maxsize=8192)
def _decode_cached(
    model: ModelSpec, batch: int, kv_tokens: int, prec: Precision, fused: bool
) -> PhaseGraph:
    return _decode_frame(model, batch, prec, fused).graph(kv_tokens)


class GraphTotals(NamedTuple):
    """The totals of a pass (as the :class:`PhaseGraph` properties of the same names)."""

    flops: float
    bytes: float
    weight_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float


def _op_terms(op: Op) -> tuple[float, float, float, float, float]:
    """One operator's contribution to each :class:`GraphTotals` field."""
    r = op.repeat
    return (
        op.flops * r,
        op.bytes * r,
        op.weight_bytes * r,
        op.kv_read_bytes * r,
        op.kv_write_bytes * r,
    )


@dataclass(frozen=True, slots=True)
class DecodeFrame:
    """The operators of a decode iteration of ``batch`` sequences, split around attention.

    Only the attention operators depend on the cached tokens: the ones before them
    (``head``: embedding, norm, Q/K/V projections, RoPE) and after them (``tail``: output
    projection, FFN, final norm, LM head) are the same at every step of a batch. Device
    models cost ``head`` and ``tail`` once per batch size and only attention per step;
    :meth:`graph` is the step's full :class:`PhaseGraph` (what :func:`decode_graph` returns).
    """

    model: ModelSpec
    shapes: _Shapes
    batch: int
    prec: Precision
    fused: bool
    head: tuple[Op, ...]
    tail: tuple[Op, ...]
    #: Per-field contributions (``x · repeat``) of the head and tail operators, in order.
    head_terms: tuple[tuple[float, ...], ...]
    tail_terms: tuple[tuple[float, ...], ...]

    def attention(self, kv_tokens: int) -> tuple[Op, ...]:
        """The attention operators of the step that starts with ``kv_tokens`` cached."""
        attended = kv_tokens + self.batch
        s = self.shapes
        window = None
        if s.window_layers and self.fused:
            # each sequence attends to at most the window: Σ min(c_i + 1, W) ≤ min(Σ, B·W)
            # (an upper bound; the step sees the batch's total only). np.minimum: the
            # vectorised steps pass arrays of cached-token counts.
            cap = self.batch * s.window
            w = (
                np.minimum(attended, cap)
                if isinstance(attended, np.ndarray)
                else min(attended, cap)
            )
            window = (w, w)
        return tuple(
            _attention_ops(s, self.batch, attended, attended, self.prec, self.fused, window)
        )

    def graph(self, kv_tokens: int) -> PhaseGraph:
        """The step's operator graph (``head``, attention, ``tail``)."""
        attended = kv_tokens + self.batch
        ops = (*self.head, *self.attention(kv_tokens), *self.tail)
        n = self.batch
        return PhaseGraph(Phase.DECODE, ops, self.model.n_layers, n, n, attended, attended)

    def totals(self, attention: Sequence[Op]) -> GraphTotals:
        """The step's totals from its ``attention`` operators; each total is summed over the
        operators in graph order, so it equals the :class:`PhaseGraph` property exactly."""
        mid = zip(*map(_op_terms, attention), strict=True)
        return GraphTotals._make(
            sum((*h, *m, *t)) for h, m, t in zip(self.head_terms, mid, self.tail_terms, strict=True)
        )


def decode_frame(
    model: ModelSpec, batch: int, prec: Precision = FP16, *, fused_attention: bool = False
) -> DecodeFrame:
    """The operators of decode iterations of ``batch`` sequences, split around attention
    (see :class:`DecodeFrame`; cached per model, batch, precision and attention kind)."""
    check_count("batch", batch)
    return _decode_frame(model, batch, prec, bool(fused_attention))


@lru_cache(maxsize=1024)
def _decode_frame(model: ModelSpec, batch: int, prec: Precision, fused: bool) -> DecodeFrame:
    s = _shapes(model, absorbed=True)
    emb, fnorm, lm = _model_ops(s, batch, batch, prec)
    head = (emb, *_pre_attention_ops(s, batch, prec))
    tail = (*_post_attention_ops(s, batch, prec), fnorm, lm)

    def terms(ops: tuple[Op, ...]) -> tuple[tuple[float, ...], ...]:
        per_op = [_op_terms(op) for op in ops]
        return tuple(tuple(t[i] for t in per_op) for i in range(len(GraphTotals._fields)))

    return DecodeFrame(model, s, batch, prec, fused, head, tail, terms(head), terms(tail))


def kv_cache_bytes(model: ModelSpec, tokens: int, kv_bits: int) -> float:
    """Exact KV-cache bytes of ``tokens`` cached tokens:
    2 × layers × KV heads × head dim × bytes × tokens."""
    check_count("tokens", tokens, minimum=0, maximum=10**12)
    if kv_bits not in KNOWN_BITS:
        raise SpecError("kv_bits", f"unknown precision: {kv_bits!r} bits")
    return model.kv_bytes_per_token(kv_bits) * tokens


# --- mixed iterations (chunked prefill) -------------------------------------------------------


def mixed_window_counts(
    batch: int, kv_tokens: int, chunks: Sequence[tuple[int, int]], window: int
) -> tuple[int, int]:
    """``(attended, kv_read)`` of a mixed iteration's sliding-window layers: the decode
    tokens' ``min(kv + B, B·W)`` (an upper bound, as a decode step's) plus each chunk's
    :func:`window_pairs`."""
    attended = kv_read = min(kv_tokens + batch, batch * window)
    for c, o in chunks:
        p, kv = window_pairs(c, o, window)
        attended += p
        kv_read += kv
    return attended, kv_read


def mixed_counts(
    batch: int, kv_tokens: int, chunks: Sequence[tuple[int, int]], fused: bool
) -> tuple[int, int, int, int]:
    """``(tokens, sequences, attended, kv_read)`` of one iteration that decodes ``batch``
    sequences over ``kv_tokens`` cached tokens in total and prefills the prompt chunks
    ``(tokens, cached before)``: each decode token attends to its sequence's cache and
    itself; a chunk of ``c`` tokens after ``o`` cached ones attends to the ``o`` and
    causally within itself (``c·o + c(c+1)/2`` pairs fused, ``c·(o + c)`` eager)."""
    tokens = batch
    attended = kv_read = kv_tokens + batch
    for c, o in chunks:
        tokens += c
        attended += c * o + (c * (c + 1) // 2 if fused else c * c)
        kv_read += o + c
    return tokens, batch + len(chunks), attended, kv_read


@dataclass(frozen=True, slots=True)
class MixedFrame:
    """The operators of a pass of ``tokens`` new tokens over ``sequences`` sequences, split
    around attention (as :class:`DecodeFrame`): a chunked-prefill iteration mixing decode
    tokens and prompt chunks runs its GEMMs over all its tokens at once and one attention
    (FlashAttention over variable-length queries, as vLLM's mixed batches), whose work
    depends on the attended pairs and the KV tokens read (:func:`mixed_counts`)."""

    model: ModelSpec
    shapes: _Shapes
    tokens: int
    sequences: int
    prec: Precision
    fused: bool
    head: tuple[Op, ...]
    tail: tuple[Op, ...]
    head_terms: tuple[tuple[float, ...], ...]
    tail_terms: tuple[tuple[float, ...], ...]

    def attention(
        self, attended: int, kv_read: int, window_counts: tuple[int, int] | None = None
    ) -> tuple[Op, ...]:
        """The attention operators of the pass (``window_counts``: the windowed layers'
        pairs and cached tokens, :func:`mixed_window_counts`)."""
        return tuple(
            _attention_ops(
                self.shapes, self.tokens, attended, kv_read, self.prec, self.fused, window_counts
            )
        )

    def graph(self, attended: int, kv_read: int) -> PhaseGraph:
        """The pass's full operator graph (a prefill-phase pass)."""
        ops = (*self.head, *self.attention(attended, kv_read), *self.tail)
        return PhaseGraph(
            Phase.PREFILL,
            ops,
            self.model.n_layers,
            self.tokens,
            self.sequences,
            attended,
            kv_read,
        )

    def totals(self, attention: Sequence[Op]) -> GraphTotals:
        """The pass's totals from its ``attention`` operators (as :meth:`DecodeFrame.totals`)."""
        mid = zip(*map(_op_terms, attention), strict=True)
        return GraphTotals._make(
            sum((*h, *m, *t)) for h, m, t in zip(self.head_terms, mid, self.tail_terms, strict=True)
        )


def mixed_frame(
    model: ModelSpec,
    tokens: int,
    sequences: int,
    prec: Precision = FP16,
    *,
    fused_attention: bool = False,
) -> MixedFrame:
    """The operators of a pass of ``tokens`` tokens over ``sequences`` sequences, split
    around attention (cached per model, counts, precision and attention kind)."""
    check_count("tokens", tokens)
    check_count("sequences", sequences, maximum=tokens)
    return _mixed_frame(model, tokens, sequences, prec, bool(fused_attention))


@lru_cache(maxsize=4096)
def _mixed_frame(
    model: ModelSpec, tokens: int, sequences: int, prec: Precision, fused: bool
) -> MixedFrame:
    s = _shapes(model)
    emb, fnorm, lm = _model_ops(s, tokens, sequences, prec)
    head = (emb, *_pre_attention_ops(s, tokens, prec))
    tail = (*_post_attention_ops(s, tokens, prec), fnorm, lm)

    def terms(ops: tuple[Op, ...]) -> tuple[tuple[float, ...], ...]:
        per_op = [_op_terms(op) for op in ops]
        return tuple(tuple(t[i] for t in per_op) for i in range(len(GraphTotals._fields)))

    return MixedFrame(
        model, s, tokens, sequences, prec, fused, head, tail, terms(head), terms(tail)
    )
