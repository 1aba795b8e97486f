"""``latency_cdf``: the latency distributions behind the percentiles, for CDF charts."""

from __future__ import annotations

import numpy as np

from simulations.core.metrics import CDF_QUANTILES, latency_cdf, percentiles, system_result
from simulations.core.spec import SloSpec

from .test_metrics import SYSTEM, _outcome


def test_the_cdf_runs_from_the_smallest_to_the_largest_sample() -> None:
    rng = np.random.default_rng(7)
    ttft = rng.lognormal(5.0, 1.0, 500)
    cdf = latency_cdf(ttft, ttft / 10, ttft / 1e3)
    assert cdf["q"] == list(CDF_QUANTILES)
    assert len(cdf["ttft_ms"]) == 101
    assert cdf["ttft_ms"][0] == ttft.min()
    assert cdf["ttft_ms"][-1] == ttft.max()
    assert all(a <= b for a, b in zip(cdf["ttft_ms"], cdf["ttft_ms"][1:], strict=False))


def test_the_cdf_agrees_with_the_percentiles_of_the_result() -> None:
    rng = np.random.default_rng(3)
    values = rng.uniform(1.0, 50.0, 257)
    cdf = latency_cdf(values, values, values)
    pct = percentiles(values)
    assert cdf["ttft_ms"][50] == pct["p50"]
    assert cdf["ttft_ms"][90] == pct["p90"]
    assert cdf["ttft_ms"][99] == pct["p99"]


def test_a_distribution_without_samples_has_no_cdf() -> None:
    cdf = latency_cdf(np.array([5.0]), np.array([]), np.array([1.0]))
    assert cdf["tpot_ms"] is None
    assert cdf["ttft_ms"] == [5.0] * 101


def test_the_system_result_carries_the_cdf() -> None:
    r = system_result(SYSTEM, _outcome(), SloSpec())
    cdf = r["latency_cdf"]
    assert cdf["ttft_ms"][50] == r["ttft_ms"]["p50"]
    assert cdf["e2e_s"][-1] == max(cdf["e2e_s"])
    # one of the three requests has a single output token: TPOT covers the other two
    assert cdf["tpot_ms"][0] == min(cdf["tpot_ms"])
