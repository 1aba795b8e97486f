"""Decoder-layer shapes H2M2 maps (§2.1, Fig. 2) — qkv-linear, attention and fc — and the
generation iteration they are evaluated at (§5.1).

The three sublayers are split into ``N`` = ``n_heads`` units (§3.1, Fig. 5b): qkv-linear and
attention by heads (with GQA a KV head goes with every side that holds one of its query
heads, so a group split across the sides keeps its K/V weights and cache on both — the
duplication the memory abstraction allows, §4.1), fc column-wise in ``N`` equal slices of
every weight matrix (projection, FFN up [and gate], FFN down), its input activations copied to
both sides. Byte counts are at the runtime's precisions (INT8 in the paper, §5.1).

Deviation: embeddings and the LM head are left out, as in the paper (§5.1 "we only include
decoder layers").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from simulations.core.errors import SpecError
from simulations.core.spec import FfnKind, ModelSpec, RuntimeProfile, check_count, check_positive

IntArray = npt.NDArray[Any]
FloatArray = npt.NDArray[Any]


@dataclass(frozen=True)
class LayerShapes:
    """Per-layer shapes of one decoder layer, with byte widths."""

    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    gated: bool
    w_bytes: float = 1.0
    a_bytes: float = 1.0
    kv_bytes: float = 1.0

    @classmethod
    def of(cls, model: ModelSpec, runtime: RuntimeProfile | None = None) -> LayerShapes:
        """Shapes of ``model`` at ``runtime``'s precisions (INT8 when none is given).
        H2M2's mapping is per dense layer: a mixture of experts or MLA model is refused."""
        if model.moe is not None or model.mla is not None:
            raise SpecError(
                "model",
                f"{model.slug}: mixture-of-experts and MLA models are not modelled on H2M2's "
                "per-layer mapping",
            )
        wb = (runtime.weight_bits / 8) if runtime else 1.0
        ab = (runtime.act_bits / 8) if runtime else 1.0
        kb = (runtime.kv_bits / 8) if runtime else 1.0
        return cls(
            model.n_layers,
            model.hidden_size,
            model.n_heads,
            model.n_kv_heads,
            model.head_dim,
            model.ffn_size,
            model.ffn_kind is FfnKind.GATED,
            wb,
            ab,
            kb,
        )

    @property
    def units(self) -> int:
        """N: the mapping granularity of every sublayer (number of attention heads)."""
        return self.n_heads

    @property
    def group(self) -> int:
        """Query heads per KV head (1 for MHA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def q_width(self) -> int:
        """Width of the attention output (heads × head_dim)."""
        return self.n_heads * self.head_dim

    # --- how many KV heads each side holds when n query heads are on the HBM side ---------

    def kv_heads_hbm(self, n: IntArray) -> IntArray:
        """KV heads the HBM side needs for query heads 0..n-1."""
        return np.asarray(-(-np.asarray(n) // self.group), dtype=np.int64)

    def kv_heads_lpddr(self, n: IntArray) -> IntArray:
        """KV heads the LPDDR side needs for query heads n..N-1."""
        return np.asarray(self.n_kv_heads - np.asarray(n) // self.group, dtype=np.int64)

    # --- column counts of every kernel for n of N units -----------------------------------

    def qkv_cols(self, heads: IntArray, kv_heads: IntArray) -> IntArray:
        """Output columns of a fused qkv GEMM for ``heads`` query and ``kv_heads`` KV heads."""
        return np.asarray(heads * self.head_dim + 2 * kv_heads * self.head_dim, dtype=np.int64)

    def fc_cols(self, n: IntArray, width: int) -> IntArray:
        """Columns of a ``width``-wide fc matrix in n of N column slices (HBM side takes the
        first round(width·n/N))."""
        return np.asarray(np.rint(np.asarray(n) * width / self.units), dtype=np.int64)

    @property
    def up_mult(self) -> int:
        """Matrices in the FFN's first product (gate and up for SwiGLU)."""
        return 2 if self.gated else 1

    # --- footprints ------------------------------------------------------------------------

    @property
    def weight_bytes_per_layer(self) -> float:
        """Weights of one decoder layer (qkv, projection, FFN)."""
        d, h = self.hidden, self.head_dim
        qkv = d * h * (self.n_heads + 2 * self.n_kv_heads)
        proj = self.q_width * d
        ffn = d * self.ffn * self.up_mult + self.ffn * d
        return float(qkv + proj + ffn) * self.w_bytes

    def kv_bytes_per_token_layer(self) -> float:
        """K and V of one token in one layer."""
        return 2.0 * self.n_kv_heads * self.head_dim * self.kv_bytes

    def total_bytes(self, kv_tokens: float) -> float:
        """Whole-model weights plus the KV cache of ``kv_tokens`` tokens (all layers)."""
        return self.n_layers * (
            self.weight_bytes_per_layer + kv_tokens * self.kv_bytes_per_token_layer()
        )

    def ops_per_iteration(self, batch: int, kv_tokens: float) -> float:
        """Operations (2 per MAC) of one generation iteration."""
        w = self.weight_bytes_per_layer / self.w_bytes
        attn = 2.0 * 2.0 * self.n_heads * self.head_dim * kv_tokens
        return self.n_layers * (2.0 * w * batch + attn)


def page_ceil(nbytes: FloatArray | float, page: float) -> FloatArray:
    """Bytes rounded up to whole pages (0 stays 0)."""
    return np.ceil(np.asarray(nbytes, dtype=np.float64) / page) * page


@dataclass(frozen=True)
class Point:
    """A generation iteration: ``batch`` requests whose KV caches hold ``seq_len`` tokens on
    average, counting the token generated in this iteration (the paper's "B32 S1024")."""

    batch: int
    seq_len: float

    def __post_init__(self) -> None:
        check_count("point.batch", self.batch, maximum=1_000_000)
        check_positive("point.seq_len", self.seq_len)
        if self.seq_len > 10_000_000:
            raise ValueError("point.seq_len is absurdly large")

    @property
    def kv_tokens(self) -> float:
        """Cached tokens summed over the batch (attention's work and the KV footprint)."""
        return self.batch * self.seq_len

    @property
    def label(self) -> str:
        """The paper's x-axis label, e.g. ``B32 S1024``."""
        return f"B{self.batch} S{self.seq_len:g}"
