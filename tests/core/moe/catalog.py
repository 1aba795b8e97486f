"""The mixture-of-experts catalog models for the core's tests.

Until the database catalog can store them (a late migration of this branch) the records sit
in ``simulations/core/data/staged/``; this helper reads them over the built-in catalog.
"""

from __future__ import annotations

import json
from functools import cache

from simulations.core.catalog import DATA_DIR, Catalog, builtin_catalog, catalog_from_records
from simulations.core.spec import ModelSpec

STAGED = DATA_DIR / "staged" / "moe_models.json"
MOE_SLUGS = (
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "gpt-oss-20b",
    "gpt-oss-120b",
)


@cache
def moe_catalog() -> Catalog:
    """The built-in catalog with the mixture-of-experts models."""
    base = builtin_catalog()
    if STAGED.exists():
        return catalog_from_records(models=json.loads(STAGED.read_text()), base=base)
    return base


def moe_model(slug: str) -> ModelSpec:
    """A catalog model by slug."""
    return moe_catalog().model(slug)
