"""Cost of the capacity search: the example
``tco-capacity-glitches-vs-a100.json`` simulated with its ``capacity`` block.

Each system's search is ``2 + steps`` engine runs on ``capacity.requests`` requests
(here 100 requests, 6 steps: 8 runs per system), so the extra time is bounded by the
document, not by the load. Target: the whole scenario with the search under 0.5 s on this
machine (measured: about 0.09 s; the search alone is 16 engine runs of 100 requests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tco-capacity-glitches-vs-a100.json"
TARGET_S = 0.5


def test_bench_capacity_search_of_the_example(benchmark: Any) -> None:
    doc = json.loads(EXAMPLE.read_text())
    spec = parse_scenario(doc, builtin_catalog())
    benchmark.extra_info.update(
        name="capacity: example scenario with its bisection (2 systems x 8 runs)",
        unit="s",
        target=TARGET_S,
    )
    result = benchmark.pedantic(lambda: simulate(spec), rounds=3, iterations=1)
    for s in result["systems"]:
        assert len(s["capacity"]["runs"]) <= 1 + s["capacity"]["steps"]
