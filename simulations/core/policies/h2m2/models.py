"""The three models of the H2M2 evaluation (§5.1), from the built-in catalog.

The catalog (``data/models/models.json``) is the source of truth. Until it holds these slugs,
the records below (each shape with its source) stand in, so the reproduction runs alone.
"""

from __future__ import annotations

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import SpecError
from simulations.core.spec import FfnKind, ModelSpec

_FALLBACK = {
    "gpt3-175b": ModelSpec(
        "gpt3-175b",
        "GPT-3 175B",
        96,
        12288,
        96,
        96,
        128,
        49152,
        FfnKind.PLAIN,
        50257,
        max_context=2048,
        sources={
            "*": "Brown et al. 2020, Table 2.1 (n_layers 96, d_model 12288, 96 heads of "
            "128, d_ff = 4 d_model, context 2048)"
        },
    ),
    "chinchilla-70b": ModelSpec(
        "chinchilla-70b",
        "Chinchilla 70B",
        80,
        8192,
        64,
        64,
        128,
        32768,
        FfnKind.PLAIN,
        32000,
        max_context=2048,
        sources={
            "*": "Hoffmann et al. 2022, Table 4 (80 layers, d_model 8192, 64 heads, "
            "kv size 128, FFN 4 d_model)"
        },
    ),
    "llama2-70b": ModelSpec(
        "llama2-70b",
        "Llama 2 70B",
        80,
        8192,
        64,
        8,
        128,
        28672,
        FfnKind.GATED,
        32000,
        max_context=4096,
        sources={
            "*": "Touvron et al. 2023 (Llama 2) and its config.json: 80 layers, hidden "
            "8192, 64 heads, 8 KV heads (GQA), intermediate 28672, vocab 32000, 4096 ctx"
        },
    ),
}


def paper_model(slug: str) -> ModelSpec:
    """The catalog's ``slug`` if present, else the stand-in record above."""
    try:
        return builtin_catalog().model(slug)
    except SpecError:
        if slug in _FALLBACK:
            return _FALLBACK[slug]
        raise
