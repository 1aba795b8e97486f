"""The KV transfer's flow-shop closed form against a layer-by-layer simulation."""

from __future__ import annotations

import numpy as np

from simulations.core.policies.disaggregated.transfer import flow_finish


def _brute(start: float, stage_s: list[float], free: list[float], layers: int) -> list[float]:
    prev = [start + (i + 1) * stage_s[0] for i in range(layers)]  # the producer
    out = [prev[-1]]
    for j in range(1, len(stage_s)):
        t = free[j]
        cur = []
        for i in range(layers):
            t = max(t, prev[i]) + stage_s[j]
            cur.append(t)
        prev = cur
        out.append(cur[-1])
    return out


def test_the_closed_form_equals_a_layer_by_layer_flow() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        hops = int(rng.integers(1, 4))
        layers = int(rng.integers(1, 50))
        stage_s = [float(x) for x in rng.exponential(1.0, hops + 1)]
        if rng.random() < 0.3:
            stage_s[0] = 0.0
        start = float(rng.uniform(0, 5))
        free = [start] + [float(x) for x in rng.uniform(0, 30, hops)]
        got = flow_finish(start, stage_s, free, layers)
        want = _brute(start, stage_s, free, layers)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
