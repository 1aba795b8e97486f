"""Measurement sets for calibrating a runtime profile: the two CSV formats and their parser.

A measurement set is what a user measured of one serving stack: rows of one of two formats,
told apart by their header.

*Operator rows* (Vidur's profiler layout, ``data/measurements/*_operators.csv``): the GPU
time of one kernel of one decoder layer.

========================  ==================================================================
column                    meaning
========================  ==================================================================
device, model             catalog slugs
stack, precision, tp      the software measured (free text, e.g. ``fp16``; ``tp`` = 1)
op                        a kernel of :data:`~simulations.core.devices.gpu_kernels.MEASURED_KERNELS`
phase                     ``any`` for the linear kernels, else ``prefill`` / ``decode``
tokens                    tokens in the batch (decode: the batch size)
batch, kv_tokens          attention rows: requests in the batch, KV context of each
time_ms_per_layer         milliseconds for one layer (> 0)
source                    where the figure comes from (optional)
========================  ==================================================================

*End-to-end rows* (what any benchmark client measures):

========================  ==================================================================
column                    meaning
========================  ==================================================================
device, model, stack,     as above
precision, tp
phase                     ``prefill`` or ``decode``
tokens                    prefill: prompt tokens of each request; decode: leave empty (or
                          the batch size)
batch                     prefill: prompts prefilled together; decode: sequences decoding
kv_tokens                 decode: KV context of each sequence before the step (prefill:
                          empty or 0)
latency_ms                prefill: the prefill pass (time to first token with no queueing);
                          decode: one iteration (inter-token latency at a steady batch)
power_w                   average board power over the phase (optional)
source                    where the figure comes from (optional)
========================  ==================================================================

Every bad cell is reported with its line (the header is line 1) and column; nothing of a
file with an error is used.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from simulations.core.devices.gpu_kernels import MEASURED_KERNELS
from simulations.core.errors import CoreError

#: Largest file and row count a set may have (a profile is fitted from tens of rows).
MAX_BYTES = 2 * 1024 * 1024
MAX_ROWS = 20_000
#: Largest token count, batch and context a row may name.
MAX_TOKENS = 10**7


class MeasurementFormat(StrEnum):
    """The two row layouts."""

    OPERATORS = "operators"
    END_TO_END = "end_to_end"


COMMON_COLUMNS = ("device", "model", "stack", "precision", "tp", "phase", "tokens")
COLUMNS: Mapping[MeasurementFormat, tuple[str, ...]] = {
    MeasurementFormat.OPERATORS: (
        *COMMON_COLUMNS,
        "op",
        "batch",
        "kv_tokens",
        "time_ms_per_layer",
        "source",
    ),
    MeasurementFormat.END_TO_END: (
        *COMMON_COLUMNS,
        "batch",
        "kv_tokens",
        "latency_ms",
        "power_w",
        "source",
    ),
}
#: Columns a header may leave out.
OPTIONAL_COLUMNS: Mapping[MeasurementFormat, frozenset[str]] = {
    MeasurementFormat.OPERATORS: frozenset(
        {"stack", "precision", "tp", "batch", "kv_tokens", "source"}
    ),
    MeasurementFormat.END_TO_END: frozenset(
        {"stack", "precision", "tp", "tokens", "kv_tokens", "power_w", "source"}
    ),
}
_ATTENTION_OPS = frozenset({"attn_prefill", "attn_decode", "attn_output_reshape"})


@dataclass(frozen=True, slots=True)
class CellError:
    """One bad cell (or header) of a measurement file."""

    line: int
    column: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", column {self.column}" if self.column else "")
        return f"{where}: {self.message}"


class MeasurementError(CoreError, ValueError):
    """A measurement file has bad cells; ``errors`` lists each with its line and column."""

    def __init__(self, errors: Iterable[CellError]) -> None:
        self.errors = tuple(errors)
        shown = "; ".join(str(e) for e in self.errors[:10])
        more = len(self.errors) - 10
        super().__init__(shown + (f"; and {more} more" if more > 0 else ""))


@dataclass(frozen=True, slots=True)
class MeasurementRow:
    """One measured figure (either format; unused fields are 0 / empty).

    ``op`` is empty for end-to-end rows; ``time_ms`` is the kernel time of one layer
    (operator rows) or the pass's latency (end-to-end rows).
    """

    line: int
    device: str
    model: str
    stack: str
    precision: str
    tp: int
    phase: str
    op: str
    tokens: int
    batch: int
    kv_tokens: int
    time_ms: float
    power_w: float | None
    source: str

    @property
    def label(self) -> str:
        """A short description (``attn_pre_proj @ 512 tokens``, ``decode b=32 ctx=1024``)."""
        if self.op:
            if self.op in _ATTENTION_OPS:
                return f"{self.op} {self.phase} b={self.batch} ctx={self.kv_tokens} @ {self.tokens}"
            return f"{self.op} @ {self.tokens} tokens"
        if self.phase == "prefill":
            return f"prefill {self.batch}x{self.tokens} tokens"
        return f"decode b={self.batch} ctx={self.kv_tokens}"

    @property
    def shape(self) -> tuple[str, int, int, int]:
        """The shape measured (phase, tokens, batch, context), without the kernel: rows of
        one shape are not independent evidence about a parameter's curve."""
        return (self.phase, self.tokens, self.batch, self.kv_tokens)

    @property
    def group(self) -> str:
        """The hold-out group: operator rows by token count (decode: batch size), end-to-end
        prefill rows by prompt tokens in the pass, decode rows by batch size."""
        if self.op:
            return f"{self.tokens} tokens"
        if self.phase == "prefill":
            return f"prefill {self.tokens * self.batch} tokens"
        return f"decode batch {self.batch}"


@dataclass(frozen=True, slots=True)
class MeasurementSet:
    """A parsed measurement file."""

    name: str
    format: MeasurementFormat
    rows: tuple[MeasurementRow, ...]

    @property
    def devices(self) -> tuple[str, ...]:
        """Device slugs measured, in first-seen order."""
        return tuple(dict.fromkeys(r.device for r in self.rows))

    @property
    def models(self) -> tuple[str, ...]:
        """Model slugs measured, in first-seen order."""
        return tuple(dict.fromkeys(r.model for r in self.rows))


def detect_format(header: Iterable[str]) -> MeasurementFormat | None:
    """The format a header belongs to (None: neither)."""
    cols = set(header)
    if {"op", "time_ms_per_layer"} <= cols:
        return MeasurementFormat.OPERATORS
    if "latency_ms" in cols:
        return MeasurementFormat.END_TO_END
    return None


class _Row:
    """Typed access to one CSV record, collecting errors by column."""

    def __init__(self, line: int, record: Mapping[str, str], errors: list[CellError]) -> None:
        self.line = line
        self.record = record
        self.errors = errors

    def bad(self, column: str, message: str) -> None:
        self.errors.append(CellError(self.line, column, message))

    def text(self, column: str, *, required: bool = True, max_len: int = 200) -> str:
        value = (self.record.get(column) or "").strip()
        if not value and required:
            self.bad(column, "is required")
        elif len(value) > max_len:
            self.bad(column, f"is longer than {max_len} characters")
            return value[:max_len]
        return value

    def integer(self, column: str, *, minimum: int, default: int | None = None) -> int:
        raw = (self.record.get(column) or "").strip()
        if not raw:
            if default is None:
                self.bad(column, "is required")
                return minimum
            return default
        try:
            value = int(raw)
        except ValueError:
            try:
                f = float(raw)
            except ValueError:
                self.bad(column, f"must be a whole number, not {raw!r}")
                return minimum
            if not (math.isfinite(f) and f == int(f)):
                self.bad(column, f"must be a whole number, not {raw!r}")
                return minimum
            value = int(f)
        if not minimum <= value <= MAX_TOKENS:
            self.bad(column, f"must lie in [{minimum}, {MAX_TOKENS}], not {value}")
            return minimum
        return value

    def number(self, column: str, *, required: bool = True) -> float | None:
        raw = (self.record.get(column) or "").strip()
        if not raw:
            if required:
                self.bad(column, "is required")
            return None
        try:
            value = float(raw)
        except ValueError:
            self.bad(column, f"must be a number, not {raw!r}")
            return None
        if not math.isfinite(value):
            self.bad(column, "must be finite")
            return None
        if value <= 0:
            self.bad(column, f"must be positive, not {raw}")
            return None
        return value


def _operator_row(r: _Row) -> MeasurementRow | None:
    op = r.text("op")
    if op and op not in MEASURED_KERNELS:
        r.bad("op", f"unknown kernel {op!r} (known: {', '.join(MEASURED_KERNELS)})")
    phase = r.text("phase")
    tokens = r.integer("tokens", minimum=1)
    time_ms = r.number("time_ms_per_layer")
    batch = kv = 0
    if op in _ATTENTION_OPS:
        batch = r.integer("batch", minimum=1)
        kv = r.integer("kv_tokens", minimum=0, default=0)
        wanted = "decode" if op == "attn_decode" else ("prefill" if op == "attn_prefill" else "")
        if phase not in ("prefill", "decode") or (wanted and phase != wanted):
            r.bad("phase", f"must be {wanted or 'prefill or decode'} for {op}")
        elif phase == "prefill":
            if kv:
                r.bad(
                    "kv_tokens", "prefill over a cached context (chunked prefill) is not modelled"
                )
            if batch and tokens % batch:
                r.bad("tokens", f"{tokens} tokens do not split into {batch} equal prompts")
        elif batch != tokens:
            r.bad("tokens", f"a decode step has one token per sequence ({batch}), not {tokens}")
    elif op and phase != "any":
        r.bad("phase", f"must be 'any' for {op} (the same kernel runs in prefill and decode)")
    return _row(r, op=op, phase=phase, tokens=tokens, batch=batch, kv=kv, time_ms=time_ms)


def _end_to_end_row(r: _Row) -> MeasurementRow | None:
    phase = r.text("phase")
    batch = r.integer("batch", minimum=1)
    latency = r.number("latency_ms")
    power = r.number("power_w", required=False)
    tokens = kv = 0
    if phase == "prefill":
        tokens = r.integer("tokens", minimum=1)
        if r.integer("kv_tokens", minimum=0, default=0):
            r.bad("kv_tokens", "prefill over a cached context (chunked prefill) is not modelled")
    elif phase == "decode":
        tokens = r.integer("tokens", minimum=1, default=batch)
        if tokens != batch:
            r.bad("tokens", f"a decode step has one token per sequence ({batch}), not {tokens}")
        kv = r.integer("kv_tokens", minimum=0)
    elif phase:
        r.bad("phase", f"must be prefill or decode, not {phase!r}")
    return _row(
        r, op="", phase=phase, tokens=tokens, batch=batch, kv=kv, time_ms=latency, power=power
    )


def _row(
    r: _Row,
    *,
    op: str,
    phase: str,
    tokens: int,
    batch: int,
    kv: int,
    time_ms: float | None,
    power: float | None = None,
) -> MeasurementRow | None:
    device = r.text("device", max_len=64)
    model = r.text("model", max_len=64)
    stack = r.text("stack", required=False)
    precision = r.text("precision", required=False, max_len=32)
    tp = r.integer("tp", minimum=1, default=1)
    if tp != 1:
        r.bad("tp", "only single-GPU measurements (tp = 1) can be fitted")
    source = r.text("source", required=False, max_len=500)
    if time_ms is None:
        return None
    return MeasurementRow(
        line=r.line,
        device=device,
        model=model,
        stack=stack,
        precision=precision,
        tp=tp,
        phase=phase,
        op=op,
        tokens=tokens,
        batch=batch,
        kv_tokens=kv,
        time_ms=time_ms,
        power_w=power,
        source=source,
    )


def parse_measurements(text: str, name: str = "measurements") -> MeasurementSet:
    """Parse a measurement CSV (either format, told apart by the header).

    Raises MeasurementError listing every bad cell by line and column; a file with any
    error yields nothing.
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_BYTES:
        raise MeasurementError([CellError(1, "", f"the file is larger than {MAX_BYTES} bytes")])
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [h.strip() for h in (reader.fieldnames or [])]
    fmt = detect_format(header)
    if fmt is None:
        raise MeasurementError(
            [
                CellError(
                    1,
                    "",
                    "header names neither format: operator rows need op and "
                    "time_ms_per_layer, end-to-end rows need latency_ms",
                )
            ]
        )
    errors: list[CellError] = []
    known = COLUMNS[fmt]
    for col in header:
        if col not in known:
            errors.append(CellError(1, col, f"unknown column (known: {', '.join(known)})"))
    for col in known:
        if col not in header and col not in OPTIONAL_COLUMNS[fmt]:
            errors.append(CellError(1, col, "missing column"))
    if len(set(header)) != len(header):
        errors.append(CellError(1, "", "a column is named twice"))
    if errors:
        raise MeasurementError(errors)
    reader.fieldnames = header
    rows: list[MeasurementRow] = []
    parse = _operator_row if fmt is MeasurementFormat.OPERATORS else _end_to_end_row
    for record in reader:
        line = reader.line_num
        if None in record:
            errors.append(CellError(line, "", "more cells than columns"))
            continue
        if not any((v or "").strip() for v in record.values()):
            continue
        if len(rows) >= MAX_ROWS:
            errors.append(CellError(line, "", f"more than {MAX_ROWS} rows"))
            break
        row = parse(_Row(line, record, errors))
        if row is not None:
            rows.append(row)
    if not rows and not errors:
        errors.append(CellError(2, "", "no measurement rows"))
    if errors:
        raise MeasurementError(errors)
    return MeasurementSet(name, fmt, tuple(rows))


def load_measurements(path: str | Path) -> MeasurementSet:
    """Parse the measurement CSV at ``path`` (named by its file stem)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MeasurementError([CellError(1, "", f"not UTF-8 text: {exc.reason}")]) from exc
    return parse_measurements(text, p.stem)


__all__ = [
    "COLUMNS",
    "CellError",
    "MeasurementError",
    "MeasurementFormat",
    "MeasurementRow",
    "MeasurementSet",
    "detect_format",
    "load_measurements",
    "parse_measurements",
]
