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
