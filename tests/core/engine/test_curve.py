"""Fast-forward of decode runs: closed-form sums must equal step-by-step sums."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.engine.curve import PROBES, DecodeCurve


def roofline(batch: int, kv: int) -> tuple[float, float]:
    """max(compute, memory) + launch: piecewise affine in kv with a breakpoint."""
    compute = (1.3e10 * batch + 5.2e5 * kv) / 1.2e14
    memory = (1.35e10 + 5.2e5 * kv) / 9.6e11
    t = 2e-3 + max(compute, memory)
    return t, 250.0 * t


def kinked(batch: int, kv: int) -> tuple[float, float]:
    """Non-convex piecewise-affine: a cheaper regime between 3000 and 9000 tokens."""
    base = 0.01 + 1e-6 * kv
    if 3000 <= kv <= 9000:
        base -= 1e-3
    return base * (1 + 0.01 * batch), 100.0 * base


def tiled(batch: int, kv: int) -> tuple[float, float]:
    """Step function in kv (tile quantisation): nowhere affine over long ranges."""
    t = 0.02 + 4e-6 * math.ceil(kv / 64) + 1e-4 * batch
    return t, 50.0 * t


def _exact(fn, batch: int, k0: int, n: int) -> float:  # type: ignore[no-untyped-def]
    return sum(fn(batch, k0 + i * batch)[0] for i in range(n))


@pytest.mark.parametrize("fn", [roofline, kinked, tiled])
@pytest.mark.parametrize(("batch", "k0", "n"), [(1, 1, 1), (1, 1536, 511), (64, 9000, 300)])
def test_run_cost_equals_the_step_by_step_sum(fn, batch: int, k0: int, n: int) -> None:  # type: ignore[no-untyped-def]
    fast = DecodeCurve(fn)
    ref = DecodeCurve(fn, exact=True)
    s_fast, j_fast = fast.run_cost(batch, k0, n)
    s_ref, j_ref = ref.run_cost(batch, k0, n)
    assert s_fast == pytest.approx(s_ref, rel=1e-11)
    assert j_fast == pytest.approx(j_ref, rel=1e-11)
    assert s_ref == pytest.approx(_exact(fn, batch, k0, n), rel=1e-12)


def test_an_affine_model_costs_a_handful_of_evaluations_however_long_the_run() -> None:
    curve = DecodeCurve(lambda b, k: (0.01 + 1e-7 * k, 1.0 + 1e-5 * k))
    curve.run_cost(1, 100, 100_000)
    first = curve.evaluations
    curve.run_cost(1, 100, 1_000_000)
    # Ends, their neighbours and the interior probes: a fixed number, not one per step.
    assert first <= PROBES + 6
    assert curve.evaluations - first <= PROBES + 4


def test_learned_pieces_are_reused_by_later_runs() -> None:
    curve = DecodeCurve(roofline)
    curve.run_cost(8, 800, 4000)
    before = curve.evaluations
    curve.run_cost(8, 1600, 1000)
    assert curve.evaluations == before


@settings(max_examples=60, deadline=None)
@given(
    fn=st.sampled_from([roofline, kinked, tiled]),
    batch=st.integers(1, 40),
    k0=st.integers(1, 20000),
    n=st.integers(1, 600),
    frac=st.floats(0.0, 1.2),
)
def test_steps_within_a_budget_matches_the_step_by_step_answer(  # type: ignore[no-untyped-def]
    fn, batch: int, k0: int, n: int, frac: float
) -> None:
    ref = DecodeCurve(fn, exact=True)
    total = ref.run_cost(batch, k0, n)[0]
    budget = frac * total
    m_ref, t_ref = ref.steps_within(batch, k0, n, budget)
    m_fast, t_fast = DecodeCurve(fn).steps_within(batch, k0, n, budget)
    assert t_ref <= budget
    assert m_ref == n or t_ref + fn(batch, k0 + m_ref * batch)[0] > budget
    # Budgets within rounding of a step boundary may land on either side of it.
    if m_fast != m_ref:
        assert abs(m_fast - m_ref) == 1
        assert abs(max(t_fast, t_ref) - budget) <= 1e-9 * max(budget, 1e-12)
    else:
        assert t_fast == pytest.approx(t_ref, rel=1e-10)


def test_it_rejects_a_model_that_returns_a_bad_cost() -> None:
    curve = DecodeCurve(lambda b, k: (float("nan"), 0.0))
    with pytest.raises(ValueError, match="bad step cost"):
        curve.run_cost(1, 10, 5)


def test_a_roofline_kink_is_found_with_a_few_evaluations() -> None:
    curve = DecodeCurve(roofline)
    curve.run_cost(1, 1, 60_000)
    # One failed try of the whole range, then the two verified pieces either side of the kink.
    assert curve.evaluations <= 3 * (PROBES + 4)
    assert not curve._is_dense(1)


def test_a_staircase_switches_to_dense_prefix_sums_bounded_by_the_token_range() -> None:
    curve = DecodeCurve(tiled)
    for k0 in range(1, 3000, 37):  # many runs over the same range of cached tokens
        s, _ = curve.run_cost(1, k0, 500)
        assert s == pytest.approx(_exact(tiled, 1, k0, 500), rel=1e-12)
    assert curve._is_dense(1)
    assert curve.evaluations <= 2 * 3500
    curve.run_cost(1, 1, 3600)
    before = curve.evaluations
    for k0 in range(1, 3000, 37):
        curve.run_cost(1, k0, 500)
        curve.steps_within(1, k0, 500, 1.0)
    assert curve.evaluations == before
