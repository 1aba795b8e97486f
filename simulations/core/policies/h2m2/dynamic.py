"""Dynamic sequence lengths (H2M2 §5.3, Fig. 16).

``batch`` requests run for ``iterations`` generation iterations; in every iteration each
request either generates its next token (its KV length grows by one) or finishes and is
replaced by a new request whose length is drawn at random. The mapping is re-decided every
iteration: H2M2's greedy (Algorithm 1) pays its memory abstraction (TLB misses) and the
migration of the pages that change sides over the interconnect; the Oracle re-searches the
whole space at no overhead (§5.2.1); FlexGen's LP is solved once, for the peak footprint
(Eq. 1 bounds "peak memory"), and stays static (§3.2).

The paper does not state the finish probability or the new requests' length distribution;
the defaults (1/32 per iteration, uniform lengths over Fig. 3's 256–2048) are this study's
choices, printed with the results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.greedy import greedy_mapping
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import MappingTables

from .mapping import flexgen_lp_mapping, oracle_mapping, run_system
from .memory import migration_bytes


@dataclass
class DynamicResult:
    """Per-iteration speedups over LPDDR-only and the total KV cache."""

    h2m2: list[float] = field(default_factory=list)
    oracle: list[float] = field(default_factory=list)
    flexgen: list[float] = field(default_factory=list)
    kv_cache_gb: list[float] = field(default_factory=list)
    remaps: int = 0
    migrated_gb: float = 0.0

    def mean(self, name: str) -> float:
        """Average speedup of ``name`` over the run."""
        return float(np.mean(getattr(self, name)))


def dynamic_study(
    shapes: LayerShapes,
    hw: H2M2Hardware,
    rng: np.random.Generator,
    *,
    batch: int = 32,
    iterations: int = 128,
    finish_prob: float = 1.0 / 32.0,
    seq_low: int = 256,
    seq_high: int = 2048,
) -> DynamicResult:
    """Run the §5.3 scenario; deterministic for a given ``rng`` state."""
    seq = rng.integers(seq_low, seq_high + 1, size=batch).astype(np.float64)
    peak = Point(batch, float(seq_high + iterations))
    flex = flexgen_lp_mapping(shapes, hw, peak)
    out = DynamicResult()
    prev = None
    L = shapes.n_layers  # noqa: N806
    for _ in range(iterations):
        point = Point(batch, float(seq.mean()))
        tab = MappingTables(shapes, hw, point, abstraction=True)
        base = run_system(shapes, hw, point, "lpddr-only").seconds
        g = greedy_mapping(shapes, hw, point)
        t_g = L * tab.layer_time(g, with_abstraction=True)
        if prev is not None and prev != g:
            moved = migration_bytes(tab.raw_bytes, prev, g)
            t_g += moved / (hw.link_gbps * 1e9)
            out.remaps += 1
            out.migrated_gb += moved / 1e9
        prev = g
        o = oracle_mapping(tab)
        out.h2m2.append(base / t_g)
        out.oracle.append(base / (L * tab.layer_time(o)))
        out.flexgen.append(base / (L * tab.layer_time(flex)))
        out.kv_cache_gb.append(L * point.kv_tokens * shapes.kv_bytes_per_token_layer() / 1e9)
        done = rng.random(batch) < finish_prob
        fresh = rng.integers(seq_low, seq_high + 1, size=batch)
        seq = np.where(done, fresh, seq + 1.0)
    return out
