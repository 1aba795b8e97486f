"""Continuous batching and batch-1 FCFS: invariants, fast path vs step-by-step reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import DECODE, PREFILL, SimOutput, build_units
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import CapacityError
from simulations.core.spec import ArrivalSpec, DevicePlacement, LengthDist, WorkloadSpec

from .doubles import LLAMA7B, RooflineDouble, TiledDouble, factory, gpu_spec, placement


def _requests(n: int = 150, rate: float | None = 8.0, seed: int = 3) -> RequestSet:
    wl = WorkloadSpec(
        requests=n,
        input_tokens=LengthDist("uniform", low=50, high=2500),
        output_tokens=LengthDist("lognormal", median=150.0, sigma=0.9, low=1, high=1000),
        arrival=ArrivalSpec("closed") if rate is None else ArrivalSpec("poisson", rate_per_s=rate),
        seed=seed,
    )
    return generate_requests(wl, LLAMA7B)


def _run(
    reqs: RequestSet,
    *,
    devices: int = 2,
    mem_gb: float = 24,
    max_batch: int = 48,
    reference: bool = False,
    cls: type = RooflineDouble,
) -> SimOutput:
    units = build_units(
        [placement(gpu_spec(mem_gb=mem_gb), devices)],
        LLAMA7B,
        factory(cls),
        exact=reference,
        timeline_cap=None,
    )
    return BatchingSim(reqs, units, max_batch=max_batch, reference=reference, audit=True).run()


CASES = [
    pytest.param({"max_batch": 1}, id="batch1"),
    pytest.param({"max_batch": 48}, id="continuous"),
    pytest.param({"max_batch": 256, "mem_gb": 18}, id="memory-bound-with-preemption"),
    pytest.param({"max_batch": 32, "cls": TiledDouble}, id="non-affine-cost"),
    pytest.param({"max_batch": 16, "devices": 3}, id="three-devices"),
]


@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("rate", [None, 8.0])
def test_fast_forward_gives_the_step_by_step_times(kw: dict, rate: float | None) -> None:
    reqs = _requests(rate=rate)
    fast = _run(reqs, **kw)
    ref = _run(reqs, reference=True, **kw)
    assert ref.events > 3 * fast.events  # the reference really steps
    for a, b in ((fast.first_token_s, ref.first_token_s), (fast.finish_s, ref.finish_s)):
        rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
        assert rel.max() < 1e-9
    assert np.array_equal(fast.preemptions, ref.preemptions)
    assert np.array_equal(fast.finished_on, ref.finished_on)
    for uf, ur in zip(fast.units, ref.units, strict=True):
        assert uf.busy_j == pytest.approx(ur.busy_j, rel=1e-9)


def test_memory_pressure_makes_it_preempt() -> None:
    out = _run(_requests(rate=None), max_batch=256, mem_gb=18)
    assert out.preemptions.sum() > 0
    assert out.extra["preemptions"] == out.preemptions.sum()


@pytest.mark.parametrize("kw", CASES)
def test_invariants_hold(kw: dict) -> None:
    reqs = _requests(rate=None)
    out = _run(reqs, **kw)
    # every request finishes (the engine refuses a second completion), after its first
    # token, after it arrived
    assert np.all(np.isfinite(out.finish_s))
    assert np.all(out.first_token_s >= reqs.arrival_s)
    assert np.all(out.finish_s >= out.first_token_s)
    assert np.all(out.finished_on >= 0)
    # conservation: every output token is produced once, by a prefill or a decode step
    produced = sum(u.decode_tokens + u.prefill_outputs for u in out.units)
    assert produced == int(reqs.output_tokens.sum())
    assert np.array_equal(out.generated, reqs.output_tokens)
    # prompt tokens are processed at least once (more only when recomputed)
    processed = sum(u.prefill_tokens for u in out.units)
    assert processed >= int(reqs.input_tokens.sum())
    if out.preemptions.sum() == 0:
        assert processed == int(reqs.input_tokens.sum())
    for u in out.units:
        # no device runs two things at once
        iv = sorted(u.timeline, key=lambda x: x[0])
        assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(iv))
        assert {x[2] for x in iv} <= {PREFILL, DECODE}
        busy = sum(x[1] - x[0] for x in iv)
        assert busy == pytest.approx(u.busy_s, rel=1e-9)
        # memory never exceeds capacity
        assert u.mem_peak_bytes <= u.mem_capacity_bytes


def test_batch_one_serves_requests_in_arrival_order_one_at_a_time() -> None:
    reqs = _requests(n=40, rate=None)
    out = _run(reqs, devices=1, max_batch=1)
    order = np.argsort(out.first_token_s, kind="stable")
    assert order.tolist() == list(range(40))
    iv = out.units[0].timeline
    assert all(x[4] == 1 for x in iv)
    # each request's decode follows its own prefill without interleaving
    kinds = [x[2] for x in iv]
    assert kinds[0] == PREFILL
    assert all(a != b or a == DECODE for a, b in itertools.pairwise(kinds))


def test_continuous_batching_beats_batch_one_under_load() -> None:
    reqs = _requests(rate=None)
    one = _run(reqs, max_batch=1)
    many = _run(reqs, max_batch=48)
    tokens = reqs.output_tokens.sum()
    assert tokens / many.t_end > 3 * tokens / one.t_end


def test_it_is_deterministic() -> None:
    a = _run(_requests(), max_batch=32)
    b = _run(_requests(), max_batch=32)
    assert np.array_equal(a.finish_s, b.finish_s)
    assert np.array_equal(a.first_token_s, b.first_token_s)


def test_a_request_that_can_never_fit_is_a_capacity_error() -> None:
    reqs = RequestSet.from_lists([0.0], [4000], [90])
    with pytest.raises(CapacityError) as err:
        _run(reqs, mem_gb=15)
    assert err.value.field == "workload"


def test_weights_that_do_not_fit_are_a_capacity_error_naming_the_device() -> None:
    with pytest.raises(CapacityError) as err:
        _run(_requests(n=2), mem_gb=12)
    assert err.value.field == "devices[0]"


def test_simulation_cost_does_not_grow_with_output_length() -> None:
    short = RequestSet.from_lists(np.arange(50) * 0.5, [500] * 50, [100] * 50)
    long = RequestSet.from_lists(np.arange(50) * 0.5, [500] * 50, [800] * 50)
    e_short = _run(short, max_batch=16).events
    e_long = _run(long, max_batch=16).events
    assert e_long <= 1.5 * e_short


def test_batch_one_devices_share_one_fcfs_queue() -> None:
    reqs = _requests(n=120, rate=3.0)
    out = _run(reqs, devices=3, max_batch=1)
    starts = {}
    for u in out.units:
        for start, _end, kind, request, _b in u.timeline:
            if kind == PREFILL:
                starts[request] = start
    order = [starts[r] for r in range(len(reqs))]
    assert order == sorted(order)  # whoever frees up first takes the oldest request
    # and nobody waits while a device idles: a request starts at arrival or at a completion
    ends = sorted(float(t) for t in out.finish_s)
    for r, t in enumerate(order):
        assert t == reqs.arrival_s[r] or any(abs(t - e) < 1e-9 for e in ends)


def test_continuous_batching_routes_each_request_to_the_least_loaded_device() -> None:
    reqs = RequestSet.from_lists([0.0] * 30, [300] * 30, [50] * 30)
    out = _run(reqs, devices=3, max_batch=16)
    counts = np.bincount(out.finished_on, minlength=3)
    assert counts.tolist() == [10, 10, 10]
    assert out.finished_on[:6].tolist() == [0, 1, 2, 0, 1, 2]


def test_convex_curves_learn_each_batch_size_up_to_the_pool_and_give_the_reference_times() -> None:
    """With a convex family (a real GPU model) the scheduler lets each decode curve learn a
    batch size up to the unit's KV pool at once; the run still gives the step-by-step
    reference's times."""
    cat = builtin_catalog()
    model = cat.model("llama2-7b")
    wl = WorkloadSpec(
        requests=150,
        input_tokens=LengthDist("uniform", low=50, high=2500),
        output_tokens=LengthDist("lognormal", median=150.0, sigma=0.9, low=1, high=1000),
        arrival=ArrivalSpec("poisson", rate_per_s=8.0),
        seed=3,
    )
    reqs = generate_requests(wl, model)

    def run(reference: bool) -> tuple[SimOutput, BatchingSim]:
        units = build_units(
            [DevicePlacement(cat.device("a100-80gb"), 2, cat.runtime("vllm-fp16"))],
            model,
            lambda d, r: type(build_device_model(d, r))(d, r),
            exact=reference,
            timeline_cap=None,
            convex=True,
        )
        sim = BatchingSim(reqs, units, max_batch=64, reference=reference, audit=True)
        return sim.run(), sim

    (fast, sim), (ref, _) = run(False), run(True)
    for unit in sim.units:
        assert unit.curve.convex
        assert unit.curve.kv_limit == sim.pool[unit.index] * sim.bs
    for a, b in ((fast.first_token_s, ref.first_token_s), (fast.finish_s, ref.finish_s)):
        rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
        assert rel.max() < 1e-9
