"""Chunked prefill and prefix caching (``engine.chunked``): invariants, the fast path
against the step-by-step reference, the TTFT/TPOT trade, and the shared prefix's figures."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.chunked import ChunkedSim
from simulations.core.engine.core import DECODE, PREFILL, SimOutput, build_units
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import SpecError
from simulations.core.spec import (
    ArrivalSpec,
    DevicePlacement,
    LengthDist,
    SharedPrefixSpec,
    WorkloadSpec,
)

CAT = builtin_catalog()
MODEL = CAT.model("llama2-7b")


def _requests(
    n: int = 120,
    rate: float | None = 6.0,
    seed: int = 3,
    prefix: SharedPrefixSpec | None = None,
    low: int = 50,
    high: int = 2500,
) -> RequestSet:
    wl = WorkloadSpec(
        requests=n,
        input_tokens=LengthDist("uniform", low=low, high=high),
        output_tokens=LengthDist("lognormal", median=150.0, sigma=0.9, low=1, high=1000),
        arrival=ArrivalSpec("closed") if rate is None else ArrivalSpec("poisson", rate_per_s=rate),
        seed=seed,
        shared_prefix=prefix,
    )
    return generate_requests(wl, MODEL)


def _units(
    device: str = "a100-80gb", count: int = 1, *, reference: bool = False, shared: bool = False
) -> list[Any]:
    dev = CAT.device(device)
    placement = DevicePlacement(dev, count, CAT.runtimes["vllm-fp16"])

    def make(d: Any, r: Any) -> Any:
        dm = type(build_device_model(d, r))(d, r)
        return dm.with_shared_kv() if shared else dm

    return build_units(
        [placement],
        MODEL,
        make,
        exact=reference,
        timeline_cap=None,
    )


def _chunked(reqs: RequestSet, *, reference: bool = False, **kw: Any) -> SimOutput:
    device = kw.pop("device", "a100-80gb")
    count = kw.pop("count", 1)
    kw.setdefault("max_batch", 64)
    kw.setdefault("max_batched_tokens", 512)
    units = _units(device, count, reference=reference, shared=kw.get("prefix_caching", False))
    return ChunkedSim(reqs, units, reference=reference, audit=True, **kw).run()


CASES = [
    pytest.param({}, id="one-gpu"),
    pytest.param({"count": 3, "max_batch": 16}, id="three-gpus-routed"),
    pytest.param({"device": "a10g", "max_batch": 256, "max_batched_tokens": 1024}, id="preempting"),
    pytest.param({"max_batch": 1, "count": 2}, id="batch-one"),
]


@pytest.mark.parametrize("kw", CASES)
def test_chunked_fast_path_gives_the_step_by_step_times(kw: dict[str, Any]) -> None:
    reqs = _requests(rate=None if kw.get("device") == "a10g" else 6.0)
    fast = _chunked(reqs, **dict(kw))
    ref = _chunked(reqs, reference=True, **dict(kw))
    for a, b in ((fast.first_token_s, ref.first_token_s), (fast.finish_s, ref.finish_s)):
        rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
        assert rel.max() < 1e-9
    assert np.array_equal(fast.preemptions, ref.preemptions)
    assert np.array_equal(fast.finished_on, ref.finished_on)


@pytest.mark.parametrize("kw", CASES)
def test_chunked_invariants_hold(kw: dict[str, Any]) -> None:
    reqs = _requests(rate=None if kw.get("device") == "a10g" else 6.0)
    out = _chunked(reqs, **dict(kw))
    assert np.all(np.isfinite(out.finish_s))
    assert np.all(out.first_token_s >= reqs.arrival_s)
    assert np.all(out.finish_s >= out.first_token_s)
    produced = sum(u.decode_tokens + u.prefill_outputs for u in out.units)
    assert produced == int(reqs.output_tokens.sum())
    assert np.array_equal(out.generated, reqs.output_tokens)
    processed = sum(u.prefill_tokens for u in out.units)
    if out.preemptions.sum() == 0:
        assert processed == int(reqs.input_tokens.sum())
    else:
        assert processed > int(reqs.input_tokens.sum())
    for u in out.units:
        iv = sorted(u.timeline, key=lambda x: x[0])
        assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(iv))
        assert {x[2] for x in iv} <= {PREFILL, DECODE}
        assert u.mem_peak_bytes <= u.mem_capacity_bytes
    if kw.get("device") == "a10g":
        assert out.preemptions.sum() > 0


def test_every_iteration_stays_within_the_token_budget() -> None:
    reqs = _requests(rate=None, n=40, low=1500, high=3000)
    out = _chunked(reqs, max_batch=32, max_batched_tokens=700)
    # 40 prompts of 1500-3000 tokens in chunks of at most 700 tokens (minus the decodes):
    # every prompt takes at least three iterations.
    assert out.extra["mixed_iterations"] >= 40 * 1500 // 700
    assert out.extra["chunked_prefill"] is True


def _ttft_tpot(reqs: RequestSet, out: SimOutput) -> tuple[np.ndarray, np.ndarray]:
    ttft = out.first_token_s - reqs.arrival_s
    many = reqs.output_tokens > 1
    tpot = (out.finish_s[many] - out.first_token_s[many]) / (reqs.output_tokens[many] - 1)
    return ttft, tpot


def test_chunked_prefill_trades_ttft_for_a_lower_tpot_tail() -> None:
    """Sarathi-Serve's trade below saturation: prompts no longer stall the running decodes
    (TPOT p90/p99 fall) but are spread over iterations shared with them (TTFT rises)."""
    reqs = _requests(n=200, rate=2.0, low=500, high=3000)
    off = BatchingSim(reqs, _units(), max_batch=64, max_batched_tokens=4096).run()
    on = ChunkedSim(reqs, _units(), max_batch=64, max_batched_tokens=512).run()
    ttft_off, tpot_off = _ttft_tpot(reqs, off)
    ttft_on, tpot_on = _ttft_tpot(reqs, on)
    assert np.percentile(ttft_on, 50) > np.percentile(ttft_off, 50)
    assert np.percentile(ttft_on, 90) > np.percentile(ttft_off, 90)
    assert np.percentile(tpot_on, 90) < np.percentile(tpot_off, 90)
    assert np.percentile(tpot_on, 99) < np.percentile(tpot_off, 99)


PREFIX = SharedPrefixSpec(tokens=1000, fraction=0.75)


def test_the_shared_prefix_is_drawn_from_the_workload_seed_and_prepended() -> None:
    # prompts short enough that none is clipped to the 4096-token window
    plain = _requests(n=400, rate=None, high=1500)
    shared = _requests(n=400, rate=None, prefix=PREFIX, high=1500)
    assert plain.prefix_tokens is None
    assert shared.prefix_tokens is not None
    carriers = shared.prefix_tokens > 0
    # the same draw every time, about the declared fraction, prepended to the prompt
    again = _requests(n=400, rate=None, prefix=PREFIX, high=1500).prefix_tokens
    assert again is not None
    assert np.array_equal(carriers, again > 0)
    assert 0.65 < carriers.mean() < 0.85
    assert np.array_equal(shared.input_tokens, plain.input_tokens + np.where(carriers, 1000, 0))
    assert np.array_equal(shared.output_tokens, plain.output_tokens)


def test_prefix_caching_skips_the_cached_prefill_and_counts_its_blocks_once() -> None:
    reqs = _requests(n=150, rate=6.0, prefix=PREFIX)
    cached = _chunked(reqs, prefix_caching=True)
    plain = _chunked(reqs)
    carriers = int((reqs.prefix_tokens > 0).sum())
    extra = cached.extra
    # every carrier looks the prefix up; only those admitted before the first one has
    # prefilled it miss
    assert extra["prefix_lookups"] == carriers
    assert carriers - 5 <= extra["prefix_hits"] < carriers
    assert extra["prefix_hit_rate"] == extra["prefix_hits"] / carriers
    # 1000 tokens = 62 full blocks of 16: 992 tokens skipped per hit (less for a prompt
    # clipped to the context window)
    assert 0.9 * 992 * extra["prefix_hits"] <= extra["prefill_tokens_saved"]
    assert extra["prefill_tokens_saved"] <= 992 * extra["prefix_hits"]
    processed = sum(u.prefill_tokens for u in cached.units)
    assert processed == int(reqs.input_tokens.sum()) - extra["prefill_tokens_saved"]
    assert extra["prefix_kv_blocks"] == [62]
    # the shared blocks are held once: the peak KV is far below the uncached run's
    assert extra["kv_peak_blocks"][0] < plain.extra["kv_peak_blocks"][0]
    # and skipping prefill makes first tokens come sooner
    ttft_cached, _ = _ttft_tpot(reqs, cached)
    ttft_plain, _ = _ttft_tpot(reqs, plain)
    assert ttft_cached.mean() < ttft_plain.mean()


def test_prefix_caching_fast_path_gives_the_step_by_step_times() -> None:
    reqs = _requests(n=100, rate=None, prefix=PREFIX)
    kw = {"device": "a10g", "max_batch": 256, "max_batched_tokens": 1024, "prefix_caching": True}
    fast = _chunked(reqs, **dict(kw))
    ref = _chunked(reqs, reference=True, **dict(kw))
    assert np.allclose(fast.finish_s, ref.finish_s, rtol=1e-9, atol=0)
    assert fast.extra["prefix_hits"] == ref.extra["prefix_hits"] > 0


def test_chunked_prefill_needs_a_budget_of_at_least_max_batch() -> None:
    with pytest.raises(SpecError) as err:
        ChunkedSim(_requests(n=5), _units(), max_batch=64, max_batched_tokens=32)
    assert err.value.field == "options.max_batched_tokens"


def test_a_convex_decode_curve_learns_a_batch_size_once_and_sums_the_same_runs() -> None:
    """The chunked scheduler's curves (convex GPU costs) verify pieces at their ends and
    learn each batch size up to the KV pool at once: the same run costs as the default
    learning, from far fewer model evaluations."""
    plain = _units()[0].curve
    convex = build_units(
        [DevicePlacement(CAT.device("a100-80gb"), 1, CAT.runtimes["vllm-fp16"])],
        MODEL,
        lambda d, r: type(build_device_model(d, r))(d, r),
        convex=True,
    )[0].curve
    assert convex.convex and not plain.convex
    convex.kv_limit = 120_000
    rng = np.random.default_rng(5)
    for _ in range(300):
        batch = int(rng.integers(1, 200))
        k0 = int(rng.integers(0, 100_000 // batch)) * batch
        n = int(rng.integers(1, 300))
        if k0 + n * batch > 120_000:
            continue
        a = convex.run_cost(batch, k0, n)
        b = plain.run_cost(batch, k0, n)
        assert a == pytest.approx(b, rel=1e-12)
    assert convex.evaluations < plain.evaluations / 3
