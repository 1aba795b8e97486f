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

from .errors import SpecError
from .spec import FfnKind, ModelSpec, RuntimeProfile, check_count

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
    """Shape facts of a model that every pass needs (cached per model)."""

    h: int
    q_dim: int
    kv_dim: int
    ffn: int
    gated: bool
    vocab: int
    n_heads: int
    head_dim: int
    n_layers: int
    gemms: tuple[tuple[str, int, int], ...]  # per-layer (name, in, out), in order


@lru_cache(maxsize=256)
def _shapes(model: ModelSpec) -> _Shapes:
    h = model.hidden_size
    q_dim = model.n_heads * model.head_dim
    kv_dim = model.n_kv_heads * model.head_dim
    f = model.ffn_size
    gated = model.ffn_kind is FfnKind.GATED
    attn = (("q_proj", h, q_dim), ("k_proj", h, kv_dim), ("v_proj", h, kv_dim))
    ffn_in = (("gate_proj", h, f), ("up_proj", h, f)) if gated else (("up_proj", h, f),)
    gemms = (*attn, ("o_proj", q_dim, h), *ffn_in, ("down_proj", f, h))
    return _Shapes(
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
    )


@lru_cache(maxsize=256)
def layer_weight_params(model: ModelSpec) -> int:
    """Parameters of the GEMMs of one layer (what a decode step streams per layer)."""
    return sum(k * n for _, k, n in _shapes(model).gemms)


@lru_cache(maxsize=256)
def gemm_params(model: ModelSpec) -> int:
    """Parameters of every GEMM of a pass: all layers plus the LM head."""
    s = _shapes(model)
    return s.n_layers * layer_weight_params(model) + s.h * s.vocab


def weight_bytes(model: ModelSpec, prec: Precision) -> float:
    """Bytes of all weights held in device memory (layers, embedding, LM head unless tied,
    norms in FP16)."""
    s = _shapes(model)
    emb = s.vocab * s.h
    lm = 0 if model.tied_embeddings else s.vocab * s.h
    norms = (2 * s.n_layers + 1) * s.h
    return (s.n_layers * layer_weight_params(model) + emb + lm) * prec.w + norms * NORM_WEIGHT_BYTES


# --- building passes -------------------------------------------------------------------------


def _layer_ops(
    s: _Shapes,
    tokens: int,
    attended: int,
    kv_read_tokens: int,
    prec: Precision,
    fused: bool,
) -> list[Op]:
    """The operators of one layer for a pass of ``tokens`` new tokens."""
    return [
        *_pre_attention_ops(s, tokens, prec),
        *_attention_ops(s, tokens, attended, kv_read_tokens, prec, fused),
        *_post_attention_ops(s, tokens, prec),
    ]


def _norm(s: _Shapes, name: str, tokens: int, prec: Precision) -> Op:
    hta = s.h * tokens * prec.a
    return Op(
        name, OpKind.NORM, s.n_layers, _NORM_OPS * s.h * tokens, s.h * NORM_WEIGHT_BYTES, hta, hta
    )


def _gemm(s: _Shapes, name: str, k: int, n: int, tokens: int, prec: Precision) -> Op:
    t, a = tokens, prec.a
    to_kv = name in ("k_proj", "v_proj")
    return Op(
        name,
        OpKind.GEMM,
        s.n_layers,
        2.0 * t * k * n,
        weight_bytes=k * n * prec.w,
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
    ops.extend(_gemm(s, name, k, n, t, prec) for name, k, n in s.gemms[:3])
    rope_elems = (s.q_dim + s.kv_dim) * t
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
) -> list[Op]:
    """A layer's attention: the only operators whose work depends on the cached tokens."""
    n_l, t, p = s.n_layers, tokens, attended
    a = prec.a
    kv_read = s.kv_dim * kv_read_tokens * prec.kv  # K (or V) of every attended token, once
    qk_flops = 2.0 * s.head_dim * s.n_heads * p
    out_bytes = s.q_dim * t * a
    if fused:
        return [
            Op(
                "attention",
                OpKind.ATTENTION,
                n_l,
                2 * qk_flops + _SOFTMAX_OPS * s.n_heads * p,
                act_read_bytes=out_bytes,
                act_write_bytes=out_bytes,
                kv_read_bytes=2 * kv_read,
            )
        ]
    scores = s.n_heads * p * a
    return [
        Op("attn_score", OpKind.ATTN_SCORE, n_l, qk_flops, 0.0, out_bytes, scores, kv_read),
        Op("softmax", OpKind.SOFTMAX, n_l, _SOFTMAX_OPS * s.n_heads * p, 0.0, scores, scores),
        Op("attn_value", OpKind.ATTN_VALUE, n_l, qk_flops, 0.0, scores, out_bytes, kv_read),
    ]


def _post_attention_ops(s: _Shapes, tokens: int, prec: Precision) -> list[Op]:
    """A layer's operators after attention: output projection, residual, FFN."""
    n_l, t, a = s.n_layers, tokens, prec.a
    h = s.h
    hta = h * t * a
    gemms = s.gemms
    ops = [_gemm(s, *gemms[3], t, prec)]
    ops.append(Op("attn_residual", OpKind.ELEMENTWISE, n_l, h * t, 0.0, 2 * hta, hta))
    ops.append(_norm(s, "ffn_norm", t, prec))
    n_in = 2 if s.gated else 1
    ops.extend(_gemm(s, name, k, n, t, prec) for name, k, n in gemms[4 : 4 + n_in])
    fta = s.ffn * t * a
    if s.gated:
        ops.append(
            Op("ffn_act", OpKind.ELEMENTWISE, n_l, _GATED_ACT_OPS * s.ffn * t, 0.0, 2 * fta, fta)
        )
    else:
        ops.append(
            Op("ffn_act", OpKind.ELEMENTWISE, n_l, _PLAIN_ACT_OPS * s.ffn * t, 0.0, fta, fta)
        )
    ops.append(_gemm(s, *gemms[-1], t, prec))
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
    emb, fnorm, lm = _model_ops(s, tokens, len(lens), prec)
    ops = (emb, *_layer_ops(s, tokens, attended, tokens, prec, fused), fnorm, lm)
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
        return tuple(
            _attention_ops(self.shapes, self.batch, attended, attended, self.prec, self.fused)
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
    s = _shapes(model)
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

    def attention(self, attended: int, kv_read: int) -> tuple[Op, ...]:
        """The attention operators of the pass."""
        return tuple(
            _attention_ops(self.shapes, self.tokens, attended, kv_read, self.prec, self.fused)
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


def mixed_attention(
    model: ModelSpec,
    tokens: int,
    attended: int,
    kv_read: int,
    prec: Precision = FP16,
    *,
    fused_attention: bool = False,
) -> tuple[Op, ...]:
    """The attention operators of a mixed pass (:class:`MixedFrame`'s, without its frame)."""
    return tuple(
        _attention_ops(_shapes(model), tokens, attended, kv_read, prec, bool(fused_attention))
    )
