"""The mixture-of-experts catalog models for the core's tests (``data/models/moe.json``)."""

from __future__ import annotations

from simulations.core.catalog import Catalog, builtin_catalog
from simulations.core.spec import ModelSpec

MOE_SLUGS = (
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "gpt-oss-20b",
    "gpt-oss-120b",
)


def moe_catalog() -> Catalog:
    """The built-in catalog (it holds the mixture-of-experts models)."""
    return builtin_catalog()


def moe_model(slug: str) -> ModelSpec:
    """A catalog model by slug."""
    return builtin_catalog().model(slug)
