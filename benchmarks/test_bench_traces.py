"""Trace upload row cap: a 1,000,000-row Azure trace is refused well
under a second.

Before the fix the cap was checked after parsing every row (about 22 s for 1M rows on this
2-core machine, holding a web worker). Now a cheap line scan stops at ``MAX_TRACE_ROWS + 1``
lines before any cell is parsed. Measured: ``parse_azure_trace`` with the cap on the text
of a 1M-row trace (about 26 MB), and the service ``trace_parse`` on the same bytes (UTF-8
decoding included), each until the SpecError / ValidationError naming the cap.
"""

from __future__ import annotations

from typing import Any

import pytest

from simulations.core.errors import SpecError
from simulations.core.scenario import MAX_TRACE_ROWS
from simulations.core.traces import parse_azure_trace

TARGET_MS = 250.0
ROWS = 1_000_000
TEXT = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n" + "\r\n".join(
    "2023-11-16 18:15:46.1,5,5" for _ in range(ROWS)
)


def test_bench_trace_cap_rejects_a_million_rows(benchmark: Any) -> None:
    def reject() -> str:
        try:
            parse_azure_trace(TEXT, name="huge", max_rows=MAX_TRACE_ROWS)
        except SpecError as exc:
            return exc.message
        raise AssertionError("the 1M-row trace was accepted")

    message = benchmark.pedantic(reject, rounds=5, iterations=1, warmup_rounds=1)
    assert f"at most {MAX_TRACE_ROWS} rows" in message
    benchmark.extra_info.update(
        name="trace: refuse a 1,000,000-row upload (core scan)", unit="ms", target=TARGET_MS
    )


def test_bench_trace_service_rejects_a_million_rows(benchmark: Any) -> None:
    from django.core.exceptions import ValidationError

    from simulations.scenarios.services import trace_parse

    raw = TEXT.encode()

    def reject() -> str:
        with pytest.raises(ValidationError) as err:
            trace_parse(slug="huge", text=raw)
        return str(err.value.message_dict["text"][0])

    message = benchmark.pedantic(reject, rounds=5, iterations=1, warmup_rounds=1)
    assert f"at most {MAX_TRACE_ROWS} rows" in message
    benchmark.extra_info.update(
        name="trace: refuse a 1,000,000-row upload (service, bytes)", unit="ms", target=TARGET_MS
    )
