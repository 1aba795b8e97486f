"""The catalog pages' model facts count every expert of a mixture of experts."""

from __future__ import annotations

import pytest

from frontend import analysis
from simulations.core.catalog import builtin_catalog


@pytest.mark.parametrize(
    ("slug", "published_b"),
    [("deepseek-v3", 671.0), ("mixtral-8x7b", 46.7), ("qwen3-30b-a3b", 30.5)],
)
def test_model_facts_count_every_expert(slug: str, published_b: float) -> None:
    facts = analysis.model_facts(builtin_catalog().model(slug))
    assert facts.parameters / 1e9 == pytest.approx(published_b, rel=0.006)


def test_model_facts_give_mla_its_latent_kv_cache() -> None:
    facts = analysis.model_facts(builtin_catalog().model("deepseek-v3"))
    assert facts.kv_bytes_per_token_fp16 == 61 * (512 + 64) * 2
