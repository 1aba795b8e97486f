"""Azure LLM inference trace files (``TIMESTAMP,ContextTokens,GeneratedTokens``).

The format is the one of the Azure public dataset (``AzureLLMInferenceTrace_{conv,code}.csv``):
a header row, then one request per row with its arrival timestamp
(``YYYY-MM-DD HH:MM:SS.fffffff``, up to 7 fractional digits, which :mod:`datetime` cannot
parse), its prompt length and its output length. Files use CRLF line endings and have no
newline after the last row; LF files and a trailing newline are accepted too.

Bad rows raise :class:`~simulations.core.errors.SpecError` whose field names the line
(1-based, the header is line 1) and the column, so a user can find the cell.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

from simulations.core.errors import SpecError
from simulations.core.spec import TraceData

HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

#: The Azure LLM inference traces shipped with the repository (exact copies; see the README
#: there): the conversation trace and the code trace the papers use.
BUNDLED_TRACE_DIR = Path(__file__).resolve().parents[2] / "examples" / "traces"
AZURE_CONV = "AzureLLMInferenceTrace_conv.csv"
AZURE_CODE = "AzureLLMInferenceTrace_code.csv"

#: Tokens per request above this are rejected as absurd (no model has a 10M-token window).
MAX_TOKENS = 10_000_000

_ONE_SECOND = timedelta(seconds=1)
_TS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")


def _field(name: str, line: int, column: int) -> str:
    prefix = f"{name}: " if name else ""
    return f"{prefix}trace line {line}, column {column} ({HEADER[column - 1]})"


def _parse_timestamp(cell: str, where: str) -> int:
    """Nanoseconds since the epoch (naive, so only differences are meaningful).

    Integer nanoseconds keep 7-digit fractions exact; a float of epoch seconds would not.
    """
    m = _TS.match(cell.strip())
    if m is None:
        raise SpecError(
            where, f"expected a timestamp like 2023-11-16 18:15:46.6805900, got {cell!r}"
        )
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or ""
    try:
        base = datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise SpecError(where, f"invalid date or time {cell!r}: {exc}") from None
    whole = (base - datetime(1970, 1, 1)) // _ONE_SECOND
    return whole * 1_000_000_000 + int(frac.ljust(9, "0") if frac else 0)


def _parse_tokens(cell: str, where: str) -> int:
    text = cell.strip()
    if not re.fullmatch(r"\d+", text):
        raise SpecError(where, f"expected a whole number of tokens, got {cell!r}")
    value = int(text)
    if value < 1:
        raise SpecError(where, "must be at least 1 token")
    if value > MAX_TOKENS:
        raise SpecError(where, f"is absurdly large (> {MAX_TOKENS} tokens)")
    return value


def _text_lines(source: str | Iterable[str]) -> Iterator[str]:
    """Lines of ``source`` without their terminators, read lazily.

    A string is wrapped in a universal-newline :class:`io.StringIO` (CRLF, LF and CR
    all end a line), so a 30 MB upload is never split into a million-element list up front.
    """
    stream: Iterable[str] = io.StringIO(source, newline=None) if isinstance(source, str) else source
    for line in stream:
        yield line.rstrip("\r\n")


def count_rows_upto(source: str, cap: int) -> int | None:
    """The 1-based line number of the first request row past ``cap`` rows, or None.

    A cheap scan (no cell is parsed): it reads at most ``cap + 1`` lines, then only asks
    whether any non-blank text follows. This is what lets a 1,000,000-row upload be
    refused in milliseconds instead of after parsing every row.
    """
    buf = io.StringIO(source, newline=None)
    lineno = 0
    for _ in range(cap + 1):  # the header and ``cap`` rows
        if not buf.readline():
            return None
        lineno += 1
    rest = buf.read()
    if not rest.strip():
        return None
    # the first non-blank line after the allowed ones
    skipped = rest[: len(rest) - len(rest.lstrip())].count("\n")
    return lineno + skipped + 1


def _check_header(first: str | None, rest: Iterable[str], label: str) -> None:
    if first is not None and first.startswith("\ufeff"):
        first = first[1:]
    if first is None or (not first.strip() and not any(line.strip() for line in rest)):
        raise SpecError(f"{label}trace line 1", "the trace is empty (expected a header row)")
    header = tuple(c.strip() for c in first.split(","))
    if header != HEADER:
        raise SpecError(
            f"{label}trace line 1",
            f"expected the header {','.join(HEADER)}, got {first.strip()!r}",
        )


def check_azure_header(text: str, name: str = "") -> None:
    """Raise SpecError unless ``text`` starts with the Azure header row (reads one line:
    the cheap check an upload gets before its rows are parsed later)."""
    lines = _text_lines(text[1:] if text.startswith("\ufeff") else text)
    _check_header(next(lines, None), lines, f"{name}: " if name else "")


def parse_azure_trace(
    source: str | Iterable[str], name: str = "", *, max_rows: int | None = None
) -> TraceData:
    """Parse an Azure-format trace (its text, or an iterable of its lines) into arrival
    offsets and token lengths.

    Arrival offsets are seconds from the first row, so the first request arrives at 0.
    Rows must be sorted by timestamp (non-decreasing), as the Azure files are. With
    ``max_rows``, a trace with more request rows is refused naming the line past the cap,
    before any row is parsed when ``source`` is text, and as soon as that line is read
    when it is a stream of lines.
    """
    label = f"{name}: " if name else ""
    if isinstance(source, str):
        if source.startswith("\ufeff"):
            source = source[1:]
        if max_rows is not None:
            over = count_rows_upto(source, max_rows)
            if over is not None:
                raise SpecError(
                    f"{label}trace line {over}",
                    f"the trace has more than {max_rows} rows; at most {max_rows} rows are allowed",
                )
    lines = _text_lines(source)
    _check_header(next(lines, None), lines, label)

    stamps: list[int] = []
    inputs: list[int] = []
    outputs: list[int] = []
    blank_at: int | None = None  # a blank line is an error only if a row follows it
    for lineno, line in enumerate(lines, start=2):
        if not line.strip():
            if blank_at is None:
                blank_at = lineno
            continue
        if blank_at is not None:
            raise SpecError(f"{label}trace line {blank_at}", "blank line inside the trace")
        if max_rows is not None and len(stamps) >= max_rows:
            raise SpecError(
                f"{label}trace line {lineno}",
                f"the trace has more than {max_rows} rows; at most {max_rows} rows are allowed",
            )
        cells = line.split(",")
        if len(cells) != len(HEADER):
            raise SpecError(
                f"{label}trace line {lineno}",
                f"expected {len(HEADER)} comma-separated columns, got {len(cells)}",
            )
        ts = _parse_timestamp(cells[0], _field(name, lineno, 1))
        if stamps and ts < stamps[-1]:
            raise SpecError(
                _field(name, lineno, 1),
                "timestamps must not decrease (rows must be sorted by arrival)",
            )
        stamps.append(ts)
        inputs.append(_parse_tokens(cells[1], _field(name, lineno, 2)))
        outputs.append(_parse_tokens(cells[2], _field(name, lineno, 3)))
    if not stamps:
        raise SpecError(f"{label}trace line 2", "the trace has a header but no requests")

    t0 = stamps[0]
    arrival = tuple((s - t0) / 1e9 for s in stamps)
    if not all(math.isfinite(a) for a in arrival):
        raise SpecError(f"{label}trace", "arrival offsets must be finite")
    return TraceData(
        arrival_s=arrival,
        input_tokens=tuple(inputs),
        output_tokens=tuple(outputs),
        name=name,
    )


def load_azure_trace(path: str | Path) -> TraceData:
    """Read and parse an Azure-format trace file; the trace is named after the file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise SpecError("trace", f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError("trace", f"{p.name} is not UTF-8 text (byte {exc.start})") from None
    return parse_azure_trace(text, name=p.name)


def load_bundled_trace(filename: str) -> TraceData:
    """Load one of the Azure traces shipped in ``examples/traces/`` (e.g. :data:`AZURE_CODE`)."""
    return load_azure_trace(BUNDLED_TRACE_DIR / filename)
