"""Azure trace parsing: the real files, CRLF/LF handling and errors naming line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations.core.errors import SpecError
from simulations.core.traces import BUNDLED_TRACE_DIR, load_azure_trace, parse_azure_trace

TRACES = BUNDLED_TRACE_DIR
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


def _crlf(*rows: str) -> str:
    return "\r\n".join((HEADER, *rows))


def test_it_parses_offsets_from_the_first_row_with_seven_fractional_digits() -> None:
    t = parse_azure_trace(
        _crlf("2023-11-16 18:15:46.6805900,374,44", "2023-11-16 18:15:50.9951691,396,109"),
        name="x",
    )
    assert t.arrival_s[0] == 0.0
    assert t.arrival_s[1] == pytest.approx(4.3145791, abs=1e-9)
    assert t.input_tokens == (374, 396)
    assert t.output_tokens == (44, 109)
    assert t.name == "x"


def test_it_accepts_lf_line_endings_and_a_trailing_newline() -> None:
    text = HEADER + "\n2023-11-16 18:15:46.1,10,2\n2023-11-16 18:15:47.1,20,3\n"
    t = parse_azure_trace(text)
    assert t.input_tokens == (10, 20)
    assert t.arrival_s[1] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("row", "column_text"),
    [
        ("2023-11-16 18:15:4x.1,10,2", "column 1 (TIMESTAMP)"),
        ("2023-13-16 18:15:46.1,10,2", "column 1 (TIMESTAMP)"),
        ("2023-11-16 18:15:46.1,-3,2", "column 2 (ContextTokens)"),
        ("2023-11-16 18:15:46.1,ten,2", "column 2 (ContextTokens)"),
        ("2023-11-16 18:15:46.1,10,0", "column 3 (GeneratedTokens)"),
        ("2023-11-16 18:15:46.1,10,2.5", "column 3 (GeneratedTokens)"),
    ],
)
def test_it_names_line_and_column_of_a_bad_cell(row: str, column_text: str) -> None:
    text = _crlf("2023-11-16 18:15:45.0,5,5", row)
    with pytest.raises(SpecError) as err:
        parse_azure_trace(text, name="bad.csv")
    assert "line 3" in err.value.field
    assert column_text in err.value.field
    assert "bad.csv" in err.value.field


def test_it_rejects_a_row_with_the_wrong_number_of_columns() -> None:
    with pytest.raises(SpecError, match="3 comma-separated columns") as err:
        parse_azure_trace(_crlf("2023-11-16 18:15:45.0,5"))
    assert "line 2" in err.value.field


def test_it_rejects_decreasing_timestamps() -> None:
    with pytest.raises(SpecError, match="must not decrease") as err:
        parse_azure_trace(_crlf("2023-11-16 18:15:45.0,5,5", "2023-11-16 18:15:44.0,5,5"))
    assert "line 3" in err.value.field


def test_it_rejects_a_wrong_header_and_an_empty_trace() -> None:
    with pytest.raises(SpecError, match="header"):
        parse_azure_trace("time,in,out\r\n2023-11-16 18:15:45.0,5,5")
    with pytest.raises(SpecError, match="no requests"):
        parse_azure_trace(HEADER)
    with pytest.raises(SpecError, match="empty"):
        parse_azure_trace("")


def test_it_rejects_a_blank_line_inside_the_trace() -> None:
    with pytest.raises(SpecError, match="blank line") as err:
        parse_azure_trace(_crlf("2023-11-16 18:15:45.0,5,5", "", "2023-11-16 18:15:46.0,5,5"))
    assert "line 3" in err.value.field


def test_it_reports_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_azure_trace(tmp_path / "missing.csv")


@pytest.mark.parametrize(
    ("filename", "rows", "span_s"),
    [
        ("AzureLLMInferenceTrace_conv.csv", 19366, 3501.7),
        ("AzureLLMInferenceTrace_code.csv", 8819, 3435.9),
    ],
)
def test_it_loads_the_azure_files_as_documented(filename: str, rows: int, span_s: float) -> None:
    t = load_azure_trace(TRACES / filename)
    assert len(t.arrival_s) == len(t.input_tokens) == len(t.output_tokens) == rows
    assert t.arrival_s[-1] == pytest.approx(span_s, abs=0.05)
    assert all(b >= a for a, b in zip(t.arrival_s, t.arrival_s[1:], strict=False))
    assert t.name == filename


def _rows(n: int) -> list[str]:
    # one request per 0.1 s from 2023-11-16 00:00:00, all with valid cells
    return [
        f"2023-11-16 {i // 36000 % 24:02d}:{i // 600 % 60:02d}:{i // 10 % 60:02d}.{i % 10},5,5"
        for i in range(n)
    ]


def test_it_stops_at_the_row_cap_and_names_the_cap_and_the_line() -> None:
    # the rows past the cap are garbage: an error about the cap (not about the garbage)
    # shows the parser stopped there instead of reading on
    text = _crlf(*_rows(3), "2023-11-16 00:00:01.0,5,5", "not,a,row")
    with pytest.raises(SpecError, match="at most 3 rows") as err:
        parse_azure_trace(text, name="big.csv", max_rows=3)
    assert "line 5" in err.value.field
    assert "big.csv" in err.value.field


def test_it_accepts_exactly_the_row_cap_with_trailing_blank_lines() -> None:
    t = parse_azure_trace(_crlf(*_rows(3)) + "\r\n\r\n", max_rows=3)
    assert len(t.arrival_s) == 3


def test_it_rejects_a_million_row_trace_at_the_default_cap() -> None:
    from simulations.core.scenario import MAX_TRACE_ROWS

    text = _crlf(*_rows(1_000_000))
    with pytest.raises(SpecError, match=f"at most {MAX_TRACE_ROWS} rows") as err:
        parse_azure_trace(text, max_rows=MAX_TRACE_ROWS)
    assert f"line {MAX_TRACE_ROWS + 2}" in err.value.field


def test_it_reads_rows_from_a_stream_of_lines() -> None:
    import io

    stream = io.StringIO(_crlf(*_rows(4)), newline=None)
    t = parse_azure_trace(stream, name="s")
    assert len(t.input_tokens) == 4 and t.arrival_s[-1] == pytest.approx(0.3)
