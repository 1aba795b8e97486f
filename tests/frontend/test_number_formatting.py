"""Numbers on the pages are written for people: no scientific notation for counts and
durations, tiny per-dollar figures scaled, a tie within rounding not coloured as a loss."""

from __future__ import annotations

from frontend.charts.base import fmt
from frontend.results import summary_rows
from frontend.templatetags.frontend_tags import better, num


def test_counts_are_written_in_full_with_thousands_separators() -> None:
    assert num(1150, 3) == "1,150"
    assert num(1150.4) == "1,150"
    assert fmt(3_348_000.0) == "3,348,000"
    assert fmt(235.3) == "235.3"
    assert fmt(2.5) == "2.5"
    assert fmt(0.003866) == "0.003866"
    assert fmt(None) == "n/a"


def _system(name: str, ttft_p99_ms: float, tok_s_per_usd: float) -> dict[str, object]:
    return {
        "name": name,
        "throughput_tok_s": 282.0,
        "ttft_ms": {"p50": 10.0, "p90": 20.0, "p99": ttft_p99_ms},
        "tpot_ms": {"p50": 5.0, "p90": 6.0},
        "cost_efficiency_tok_s_per_usd": tok_s_per_usd,
    }


def test_long_latencies_are_shown_in_seconds() -> None:
    rows = {r.label: r for r in summary_rows([_system("a", 3_348_000.0, 0.003866)])}
    assert rows["TTFT p99"].unit == "s"
    assert rows["TTFT p99"].values == [3348.0]
    assert num(rows["TTFT p99"].values[0]) == "3,348"
    assert rows["TTFT p50"].unit == "ms"  # short latencies stay in ms


def test_cost_efficiency_is_per_thousand_dollars() -> None:
    rows = {r.label: r for r in summary_rows([_system("a", 30.0, 0.003866)])}
    row = rows["Cost efficiency"]
    assert row.unit == "tok/s per $1k"
    assert num(row.values[0], 3) == "3.87"


def test_a_tie_within_rounding_is_neutral() -> None:
    assert better(281.9 / 282.2, True) == ""
    assert better(0.9, True) == "bad"
    assert better(1.1, True) == "good"
