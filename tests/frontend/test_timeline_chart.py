"""The per-device timeline draws the whole run for every device: past the chart's budget of
bars the intervals are aggregated to time bins, never cut after the first N."""

from __future__ import annotations

from typing import Any

from frontend.charts.timeline import MAX_INTERVALS, timeline_figure


def _unit(index: int, n: int, span_s: float) -> dict[str, Any]:
    step = span_s / n
    intervals = [
        {
            "start_s": i * step,
            "end_s": (i + 1) * step,
            "kind": "decode" if i % 2 else "prefill",
            "request": i,
            "batch": 1,
        }
        for i in range(n)
    ]
    return {"device": "a100-80gb", "index": index, "intervals": intervals}


def test_every_device_row_reaches_the_end_of_the_run() -> None:
    n = MAX_INTERVALS  # two devices: twice the budget
    system = {"name": "s", "timeline": [_unit(0, n, 100.0), _unit(1, n, 100.0)]}
    fig = timeline_figure(system)
    ends: dict[str, float] = {}
    bars = 0
    for trace in fig.data:
        bars += len(trace.x)
        for y, base, x in zip(trace.y, trace.base, trace.x, strict=True):
            ends[y] = max(ends.get(y, 0.0), base + x)
    assert set(ends) == {"a100-80gb #0", "a100-80gb #1"}
    assert all(abs(end - 100.0) < 1e-6 for end in ends.values()), ends
    assert bars <= MAX_INTERVALS
    assert "not drawn" not in fig.layout.title.text


def test_a_small_timeline_is_drawn_interval_by_interval() -> None:
    system = {"name": "s", "timeline": [_unit(0, 10, 1.0)]}
    fig = timeline_figure(system)
    assert sum(len(t.x) for t in fig.data) == 10
