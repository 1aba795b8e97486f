"""The ``h2m2`` policy's serving: the scenario's requests, arrivals and static batches."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices.h2m2.board import H2M2Hardware
from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.metrics import request_latencies
from simulations.core.policies import get_policy
from simulations.core.policies.h2m2 import prefill_s, serve_static_batches
from simulations.core.policies.h2m2.mapping import run_system
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    DevicePlacement,
    LengthDist,
    LengthDistKind,
    ModelSpec,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)
from tests.core.h2m2.test_memory_and_dynamic import _board, _runtime


def paper_model(slug: str) -> ModelSpec:
    """A model of the H2M2 evaluation, from the built-in catalog."""
    return builtin_catalog().model(slug)


MODEL = paper_model("llama2-70b")
SHAPES = LayerShapes.of(MODEL, _runtime())
HW = H2M2Hardware.from_placements([DevicePlacement(_board(), 1, _runtime())])


def _workload(arrival: ArrivalSpec, requests: int = 20, seed: int = 5) -> WorkloadSpec:
    return WorkloadSpec(
        requests=requests,
        input_tokens=LengthDist(LengthDistKind.UNIFORM, low=64, high=512),
        output_tokens=LengthDist(LengthDistKind.UNIFORM, low=4, high=40),
        arrival=arrival,
        seed=seed,
    )


def _system(mapping: str = "h2m2", max_batch: int = 8) -> SystemSpec:
    return SystemSpec(
        mapping,
        "h2m2",
        (DevicePlacement(_board(), 1, _runtime()),),
        {"mapping": mapping, "max_batch": max_batch},
    )


def _run(workload: WorkloadSpec, rng_seed: int = 0, **system: object) -> dict:
    return get_policy("h2m2")().run(
        _system(**system),  # type: ignore[arg-type]
        MODEL,
        workload,
        SloSpec(),
        np.random.default_rng(rng_seed),
        None,
    )


def _back_to_back(requests: RequestSet, bmax: int, mapping: str) -> tuple[np.ndarray, ...]:
    """Closed arrivals served by hand: batches of ``bmax`` requests in order, back to back
    from time 0; the prefill emits the first token, each further token takes one decode
    iteration (first token, finish)."""
    ins, outs = requests.input_tokens, requests.output_tokens
    n = len(requests)
    first_token, finish = np.zeros(n), np.zeros(n)
    clock = 0.0
    for start in range(0, n, bmax):
        idx = np.arange(start, min(start + bmax, n))
        b_in, b_dec = ins[idx], outs[idx] - 1
        steps = int(b_dec.max())
        first = clock + prefill_s(SHAPES, HW, b_in)
        first_token[idx] = first
        finish[idx] = first
        clock = first
        if steps == 0:
            continue
        sample = np.unique(np.linspace(0, steps - 1, min(steps, 9)).round()).astype(np.int64)
        times = []
        for t in sample:
            active = b_dec > t
            point = Point(int(active.sum()), float((b_in[active] + t + 1).sum()) / active.sum())
            times.append(run_system(SHAPES, HW, point, mapping).seconds)
        cum = np.cumsum(np.interp(np.arange(steps), sample, times))
        finish[idx] = first + np.where(b_dec > 0, cum[np.maximum(b_dec - 1, 0)], 0.0)
        clock = first + float(cum[-1])
    return first_token, finish


def test_it_serves_the_workloads_requests_whatever_generator_it_is_handed() -> None:
    workload = _workload(ArrivalSpec(ArrivalKind.POISSON, rate_per_s=2.0))
    a, b = _run(workload, rng_seed=0), _run(workload, rng_seed=99)
    assert a == b
    requests = generate_requests(workload, MODEL)
    assert a["generated_tokens"] == int(requests.output_tokens.sum())
    assert a["requests"] == len(requests)


def test_it_clips_requests_to_the_context_window_like_every_policy() -> None:
    workload = WorkloadSpec(
        requests=4,
        input_tokens=LengthDist(LengthDistKind.FIXED, value=4000),
        output_tokens=LengthDist(LengthDistKind.FIXED, value=200),
        arrival=ArrivalSpec(ArrivalKind.CLOSED),
    )
    res = _run(workload)
    assert res["clipped_requests"] == 4
    assert res["generated_tokens"] == 4 * 200


@pytest.mark.parametrize("mapping", ["h2m2", "hierarchical"])
def test_with_closed_arrivals_batches_run_back_to_back_from_time_zero(mapping: str) -> None:
    requests = generate_requests(_workload(ArrivalSpec(ArrivalKind.CLOSED)), MODEL)
    served = serve_static_batches(SHAPES, HW, requests, mapping, 8)
    first_token, finish = _back_to_back(requests, 8, mapping)
    assert served.batches == [(0, 8), (8, 16), (16, 20)]
    np.testing.assert_allclose(served.first_token_s, first_token, rtol=1e-12)
    np.testing.assert_allclose(served.finish_s, finish, rtol=1e-12)
    assert served.busy_s == pytest.approx(float(finish.max()), rel=1e-12)


def test_the_result_of_a_closed_workload_counts_from_time_zero() -> None:
    workload = _workload(ArrivalSpec(ArrivalKind.CLOSED))
    requests = generate_requests(workload, MODEL)
    first_token, finish = _back_to_back(requests, 8, "h2m2")
    res = _run(workload)
    assert res["span_s"] == pytest.approx(float(finish.max()), rel=1e-12)
    assert res["ttft_ms"]["p90"] == pytest.approx(np.percentile(first_token, 90) * 1e3, rel=1e-12)
    assert res["devices"][0]["busy_fraction"] == pytest.approx(1.0, rel=1e-12)


def test_it_waits_for_arrivals_and_batches_only_the_requests_that_have_arrived() -> None:
    # 0 and 1 arrive together; 2 arrives while their batch runs; 3 and 4 long after
    requests = RequestSet.from_lists(
        [0.0, 0.0, 0.01, 500.0, 500.0], [100, 200, 300, 100, 100], [5, 10, 5, 3, 3]
    )
    served = serve_static_batches(SHAPES, HW, requests, "h2m2", 8)
    assert served.batches == [(0, 2), (2, 3), (3, 5)]
    first_end = float(served.finish_s[:2].max())
    assert 0.01 < first_end < 500.0
    # request 2 starts as soon as the boards are free; the last batch at its arrival
    pre2 = prefill_s(SHAPES, HW, np.array([300]))
    assert served.first_token_s[2] == pytest.approx(first_end + pre2, rel=1e-12)
    pre3 = prefill_s(SHAPES, HW, np.array([100, 100]))
    assert served.first_token_s[3] == pytest.approx(500.0 + pre3, rel=1e-12)
    assert served.busy_s < float(served.finish_s.max()) - 400.0


def test_it_takes_at_most_max_batch_arrived_requests_first_come_first_served() -> None:
    requests = RequestSet.from_lists([0.0] * 3 + [0.001] * 4, [64] * 7, [4] * 7)
    served = serve_static_batches(SHAPES, HW, requests, "h2m2", 2)
    assert served.batches == [(0, 2), (2, 4), (4, 6), (6, 7)]


def test_latencies_count_from_arrival_and_throughput_from_the_first_arrival() -> None:
    workload = _workload(ArrivalSpec(ArrivalKind.POISSON, rate_per_s=0.5))
    requests = generate_requests(workload, MODEL)
    served = serve_static_batches(SHAPES, HW, requests, "h2m2", 8)
    res = _run(workload)
    span = float(served.finish_s.max() - requests.arrival_s[0])
    assert res["span_s"] == pytest.approx(span, rel=1e-12)
    assert res["throughput_tok_s"] == pytest.approx(requests.output_tokens.sum() / span, rel=1e-12)
    ttft = served.first_token_s - requests.arrival_s
    assert res["ttft_ms"]["p50"] == pytest.approx(np.percentile(ttft, 50) * 1e3, rel=1e-12)
    e2e = served.finish_s - requests.arrival_s
    assert res["e2e_s"]["p90"] == pytest.approx(np.percentile(e2e, 90), rel=1e-12)
    # at this rate the boards idle between batches, so TTFT is far below the span
    assert res["ttft_ms"]["p90"] < 0.1 * span * 1e3
    assert res["devices"][0]["busy_fraction"] < 1.0


def test_its_latencies_follow_the_engines_definitions() -> None:
    # TPOT = (last token - first token) / (output tokens - 1): the prefill emits the first
    # token, so a one-token request decodes nothing and has no TPOT
    requests = RequestSet.from_lists([0.0, 0.0, 0.0], [100, 200, 300], [1, 2, 9])
    served = serve_static_batches(SHAPES, HW, requests, "h2m2", 8)
    assert served.finish_s[0] == served.first_token_s[0]
    assert served.finish_s[1] > served.first_token_s[1]
    # request 1's single decode step is the batch's first iteration (two requests decode)
    point = Point(2, float(200 + 1 + 300 + 1) / 2)
    step0 = run_system(SHAPES, HW, point, "h2m2").seconds
    assert served.finish_s[1] - served.first_token_s[1] == pytest.approx(step0, rel=1e-12)
    lat = request_latencies(
        requests.arrival_s,
        served.first_token_s,
        served.finish_s,
        requests.output_tokens,
        SloSpec(),
    )
    tpots = [step0, (served.finish_s[2] - served.first_token_s[2]) / 8]
    assert lat["tpot_ms"]["mean"] == pytest.approx(np.mean(tpots) * 1e3, rel=1e-12)


def test_it_reports_slo_attainment_and_whether_the_percentile_targets_hold() -> None:
    workload = _workload(ArrivalSpec(ArrivalKind.CLOSED))
    res = get_policy("h2m2")().run(
        _system(), MODEL, workload, SloSpec(ttft_p99_ms=1e-3), np.random.default_rng(0), None
    )
    assert res["slo_met"] is False and res["slo_attainment"] == 0.0
    res = get_policy("h2m2")().run(
        _system(), MODEL, workload, SloSpec(tpot_p99_ms=1e9), np.random.default_rng(0), None
    )
    assert res["slo_met"] is True and res["slo_attainment"] == 1.0
