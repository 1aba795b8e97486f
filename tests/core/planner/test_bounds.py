"""The screen's building blocks: the percentile allowance, the finite-horizon work bound and
the monotonicity of the device models that the per-request floors rely on."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.planner.screen import _partitions, allowed_late, late_by_capacity


@given(
    st.integers(min_value=1, max_value=400),
    st.sampled_from([50.0, 90.0, 99.0]),
    st.integers(min_value=0, max_value=400),
)
def test_more_late_values_than_allowed_always_push_the_percentile_over(
    n: int, q: float, late: int
) -> None:
    late = min(late, n)
    values = np.concatenate([np.full(n - late, 1.0), np.full(late, 2.0)])
    over = float(np.percentile(values, q)) > 1.0
    if late > allowed_late(n, q):
        assert over
    if late <= allowed_late(n, q) - 1:
        assert not over  # the allowance is tight up to the interpolation step


def _brute_late(a: np.ndarray, work: np.ndarray, horizon: float, c: int) -> int:
    """Fewest late jobs on ``c`` identical machines, each job needing ``work`` time within
    [a, a + horizon] (preemption and splitting allowed: a relaxation), by trying every
    subset of jobs and checking the fluid interval condition (Horn's criterion)."""
    n = len(a)
    best = n
    for size in range(n, -1, -1):
        if n - size >= best:
            break
        for subset in itertools.combinations(range(n), size):
            ok = True
            for s, e in itertools.product(a[list(subset)], a[list(subset)] + horizon):
                if e <= s:
                    continue
                inside = sum(work[i] for i in subset if a[i] >= s and a[i] + horizon <= e)
                if inside > c * (e - s) + 1e-12:
                    ok = False
                    break
            if ok:
                best = n - size
                break
    return best


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=0, max_value=10), min_size=1, max_size=7),
    st.lists(st.floats(min_value=0.01, max_value=3), min_size=7, max_size=7),
    st.floats(min_value=0.2, max_value=4),
    st.integers(min_value=1, max_value=3),
)
def test_the_work_bound_never_exceeds_what_a_relaxed_schedule_achieves(
    arrivals: list[float], works: list[float], horizon: float, c: int
) -> None:
    a = np.sort(np.array(arrivals))
    w = np.array(works[: len(a)])
    floor = late_by_capacity(
        a,
        np.full(len(a), horizon),
        lambda idx, end: w[idx],
        np.ones(len(a), dtype=bool),
        c,
        _partitions(a, horizon),
    )[c]
    assert floor <= _brute_late(a, w, horizon, c)


def test_the_work_bound_falls_with_capacity_and_catches_overload() -> None:
    rng = np.random.default_rng(1)
    a = np.cumsum(rng.exponential(1.0, 400))  # 1 job/s
    w = np.full(400, 2.0)  # 2 s of work each: needs 2 devices
    late = late_by_capacity(
        a, np.full(400, 1.0), lambda idx, end: w[idx], np.ones(400, bool), 4, _partitions(a, 1.0)
    )
    assert np.all(np.diff(late) <= 0)
    assert late[1] > 100  # one device: at least half of the jobs are late
    assert late[4] == 0


CAT = builtin_catalog()
MODEL = CAT.model("llama2-7b")
PAIRS = [
    (CAT.device(d), CAT.default_runtime(CAT.device(d)))
    for d in ("a100-80gb", "v100s", "h100-sxm", "u280")
] + [(CAT.device("a100-80gb"), CAT.runtime("vllm-fp16"))]


@pytest.mark.parametrize("device,runtime", PAIRS, ids=lambda x: getattr(x, "slug", ""))
@settings(max_examples=40, deadline=None)
@given(lens=st.lists(st.integers(min_value=1, max_value=1500), min_size=2, max_size=4))
def test_a_packed_prefill_takes_at_least_its_longest_prompt_alone_and_its_flops(
    device: object, runtime: object, lens: list[int]
) -> None:
    dm = build_device_model(device, runtime)  # type: ignore[arg-type]
    packed = dm.prefill(MODEL, lens)
    assert packed.seconds >= max(dm.prefill(MODEL, [x]).seconds for x in lens) * (1 - 1e-12)
    assert packed.flops == pytest.approx(sum(dm.prefill(MODEL, [x]).flops for x in lens))


@pytest.mark.parametrize("device,runtime", PAIRS, ids=lambda x: getattr(x, "slug", ""))
@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(min_value=1, max_value=3000),
    extra=st.integers(min_value=0, max_value=3000),
    batch=st.integers(min_value=1, max_value=32),
)
def test_a_batched_decode_step_takes_at_least_one_of_its_sequences_alone(
    device: object, runtime: object, k: int, extra: int, batch: int
) -> None:
    dm = build_device_model(device, runtime)  # type: ignore[arg-type]
    alone = dm.decode_step(MODEL, 1, k).seconds
    together = dm.decode_step(MODEL, batch, k + extra).seconds
    assert together >= alone * (1 - 1e-9)
