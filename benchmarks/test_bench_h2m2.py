"""H2M2 speed targets: Algorithm 1 for GPT3-175B under 1 ms (the paper's C++ takes 0.05 ms,
§4.3.2); the Oracle's full (N+1)³ search for one (batch, sequence) point under 5 s on one
core."""

from __future__ import annotations

from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.greedy import greedy_mapping
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import MappingTables
from simulations.core.policies.h2m2.mapping import oracle_mapping
from simulations.core.spec import ModelSpec


def paper_model(slug: str) -> ModelSpec:
    """A model of the H2M2 evaluation, from the built-in catalog."""
    return builtin_catalog().model(slug)


SHAPES = LayerShapes.of(paper_model("gpt3-175b"))
HW = H2M2Hardware.table1()
POINT = Point(32, 1024.0)


def test_bench_h2m2_greedy_decision_gpt3(benchmark: Any) -> None:
    benchmark.extra_info.update(
        name="h2m2 greedy mapping decision, GPT3-175B B32 S1024", unit="ms", target=1.0
    )
    m = benchmark(greedy_mapping, SHAPES, HW, POINT)
    assert MappingTables(SHAPES, HW, POINT).feasible(m)


def test_bench_h2m2_oracle_search_gpt3(benchmark: Any) -> None:
    benchmark.extra_info.update(
        name="h2m2 Oracle search of 97^3 mappings, GPT3-175B B32 S1024", unit="s", target=5.0
    )

    def search() -> object:
        return oracle_mapping(MappingTables(SHAPES, HW, POINT))

    m = benchmark.pedantic(search, rounds=5, iterations=1)
    assert m is not None
