"""Drawing requests from a workload: distributions, arrivals, determinism, traces, clipping."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import SpecError
from simulations.core.spec import ArrivalSpec, LengthDist, TraceData, WorkloadSpec

from .doubles import LLAMA7B


def _wl(
    n: int = 500,
    inp: LengthDist | None = None,
    out: LengthDist | None = None,
    arrival: ArrivalSpec | None = None,
    seed: int = 0,
    trace: TraceData | None = None,
) -> WorkloadSpec:
    return WorkloadSpec(
        requests=n,
        input_tokens=inp or LengthDist("fixed", value=128),
        output_tokens=out or LengthDist("fixed", value=64),
        arrival=arrival or ArrivalSpec("closed"),
        seed=seed,
        trace=trace,
    )


def test_fixed_lengths_and_closed_arrivals_put_every_request_at_time_zero() -> None:
    r = generate_requests(_wl(10))
    assert len(r) == 10
    assert np.all(r.arrival_s == 0)
    assert np.all(r.input_tokens == 128)
    assert np.all(r.output_tokens == 64)


def test_uniform_lengths_stay_in_bounds_and_cover_them() -> None:
    r = generate_requests(_wl(2000, inp=LengthDist("uniform", low=10, high=20)))
    assert r.input_tokens.min() == 10
    assert r.input_tokens.max() == 20


def test_lognormal_lengths_have_the_requested_median_and_clip() -> None:
    dist = LengthDist("lognormal", median=300.0, sigma=1.0, low=5, high=3000)
    r = generate_requests(_wl(20000, out=dist))
    assert np.median(r.output_tokens) == pytest.approx(300, rel=0.05)
    assert r.output_tokens.min() >= 5
    assert r.output_tokens.max() <= 3000


def test_poisson_arrivals_have_the_requested_rate() -> None:
    r = generate_requests(_wl(20000, arrival=ArrivalSpec("poisson", rate_per_s=4.0)))
    gaps = np.diff(r.arrival_s)
    assert np.all(gaps >= 0)
    assert 1 / gaps.mean() == pytest.approx(4.0, rel=0.03)


def test_the_same_seed_gives_the_same_requests_and_another_seed_does_not() -> None:
    kw = {
        "inp": LengthDist("uniform", low=1, high=4000),
        "arrival": ArrivalSpec("poisson", rate_per_s=2.0),
    }
    a = generate_requests(_wl(300, seed=7, **kw))  # type: ignore[arg-type]
    b = generate_requests(_wl(300, seed=7, **kw))  # type: ignore[arg-type]
    c = generate_requests(_wl(300, seed=8, **kw))  # type: ignore[arg-type]
    assert np.array_equal(a.input_tokens, b.input_tokens)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert not np.array_equal(a.input_tokens, c.input_tokens)


def test_changing_the_arrival_process_keeps_the_lengths() -> None:
    inp = LengthDist("uniform", low=1, high=4000)
    a = generate_requests(_wl(300, inp=inp))
    b = generate_requests(_wl(300, inp=inp, arrival=ArrivalSpec("poisson", rate_per_s=3.0)))
    assert np.array_equal(a.input_tokens, b.input_tokens)


def test_trace_lengths_and_scaled_arrivals_come_from_the_first_rows() -> None:
    trace = TraceData((0.0, 1.0, 3.0, 4.0), (10, 20, 30, 40), (1, 2, 3, 4), "t")
    r = generate_requests(
        _wl(
            3,
            inp=LengthDist("trace"),
            out=LengthDist("trace"),
            arrival=ArrivalSpec("trace", time_scale=2.0),
            trace=trace,
        )
    )
    assert r.arrival_s.tolist() == [0.0, 2.0, 6.0]
    assert r.input_tokens.tolist() == [10, 20, 30]
    assert r.output_tokens.tolist() == [1, 2, 3]


def test_it_rejects_more_requests_than_the_trace_has() -> None:
    trace = TraceData((0.0,), (10,), (1,), "t")
    with pytest.raises(SpecError) as err:
        generate_requests(_wl(2, inp=LengthDist("trace"), trace=trace))
    assert err.value.field == "workload.requests"


def test_it_clips_requests_longer_than_the_context_window_and_counts_them() -> None:
    r = generate_requests(
        _wl(4, inp=LengthDist("fixed", value=4000), out=LengthDist("fixed", value=200)),
        LLAMA7B,
    )
    assert r.clipped == 4
    assert np.all(r.input_tokens + r.output_tokens <= LLAMA7B.max_context)
    assert np.all(r.output_tokens == 200)


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        (_wl(inp=LengthDist("uniform", low=5, high=2)), "workload.input_tokens.high"),
        (_wl(out=LengthDist("lognormal", median=10.0, sigma=-1.0)), "workload.output_tokens.sigma"),
        (_wl(arrival=ArrivalSpec("poisson")), "workload.arrival.rate_per_s"),
        (_wl(arrival=ArrivalSpec("trace")), "workload.arrival"),
        (_wl(inp=LengthDist("fixed", value=0)), "workload.input_tokens.value"),
    ],
)
def test_it_names_the_field_of_a_bad_workload(workload: WorkloadSpec, field: str) -> None:
    with pytest.raises(SpecError) as err:
        generate_requests(workload)
    assert err.value.field == field


def test_a_request_set_is_sorted_by_arrival_and_read_only() -> None:
    r = RequestSet.from_lists([2.0, 1.0, 1.0], [5, 6, 7], [1, 2, 3])
    assert r.arrival_s.tolist() == [1.0, 1.0, 2.0]
    assert r.input_tokens.tolist() == [6, 7, 5]
    with pytest.raises(ValueError):
        r.input_tokens[0] = 3
