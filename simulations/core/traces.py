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

import math
import re
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


def parse_azure_trace(text: str, name: str = "") -> TraceData:
    """Parse the text of an Azure-format trace into arrival offsets and token lengths.

    Arrival offsets are seconds from the first row, so the first request arrives at 0.
    Rows must be sorted by timestamp (non-decreasing), as the Azure files are.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    label = f"{name}: " if name else ""
    if not lines:
        raise SpecError(f"{label}trace line 1", "the trace is empty (expected a header row)")
    header = tuple(c.strip() for c in lines[0].split(","))
    if header != HEADER:
        raise SpecError(
            f"{label}trace line 1",
            f"expected the header {','.join(HEADER)}, got {lines[0].strip()!r}",
        )
    if len(lines) == 1:
        raise SpecError(f"{label}trace line 2", "the trace has a header but no requests")

    stamps: list[int] = []
    inputs: list[int] = []
    outputs: list[int] = []
    for lineno, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        if not line.strip():
            raise SpecError(f"{label}trace line {lineno}", "blank line inside the trace")
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
