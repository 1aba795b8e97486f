"""Measurement CSVs (simulations.core.calibration.measurements): both formats, errors by
line and column, nothing kept from a bad file."""

from __future__ import annotations

import pytest

from simulations.core.calibration.measurements import (
    MeasurementError,
    MeasurementFormat,
    load_measurements,
    parse_measurements,
)
from simulations.core.catalog import DATA_DIR

COMMON = "device,model,stack,precision,tp"
OPS_HEADER = f"{COMMON},op,phase,tokens,batch,kv_tokens,time_ms_per_layer,source"
E2E_HEADER = f"{COMMON},phase,tokens,batch,kv_tokens,latency_ms,power_w,source"


def errors_of(text: str) -> list[tuple[int, str]]:
    with pytest.raises(MeasurementError) as exc:
        parse_measurements(text)
    return [(e.line, e.column) for e in exc.value.errors]


def test_the_shipped_operator_set_parses() -> None:
    s = load_measurements(DATA_DIR / "measurements" / "a100_llama2-7b_vllm_operators.csv")
    assert s.format is MeasurementFormat.OPERATORS
    assert s.name == "a100_llama2-7b_vllm_operators"
    assert len(s.rows) == 62
    assert s.devices == ("a100-80gb",) and s.models == ("llama2-7b",)
    decode = [r for r in s.rows if r.op == "attn_decode"]
    assert [(r.batch, r.kv_tokens, r.time_ms) for r in decode] == [
        (1, 1024, 0.02),
        (32, 1024, 0.326),
    ]
    assert {r.group for r in s.rows} == {f"{n} tokens" for n in (1, 32, 128, 512, 1024, 2048)}
    assert s.rows[0].line == 2


def test_an_end_to_end_set_parses_with_optional_power() -> None:
    text = "\n".join(
        [
            E2E_HEADER,
            "a100-80gb,llama2-7b,vllm,fp16,1,prefill,1024,2,,160.5,280,bench",
            "a100-80gb,llama2-7b,vllm,fp16,1,decode,,32,1024,24.0,,bench",
        ]
    )
    s = parse_measurements(text, "mine")
    assert s.format is MeasurementFormat.END_TO_END
    pre, dec = s.rows
    assert (pre.phase, pre.tokens, pre.batch, pre.time_ms, pre.power_w) == (
        "prefill",
        1024,
        2,
        160.5,
        280.0,
    )
    assert (dec.tokens, dec.batch, dec.kv_tokens, dec.power_w) == (32, 32, 1024, None)
    assert pre.group == "prefill 2048 tokens" and dec.group == "decode batch 32"


def test_bad_cells_are_reported_by_line_and_column_and_nothing_is_kept() -> None:
    text = "\n".join(
        [
            OPS_HEADER,
            "a100-80gb,llama2-7b,vllm,fp16,1,attn_pre_proj,any,512,,,0.234,ok",
            "a100-80gb,llama2-7b,vllm,fp16,1,attn_pre_proj,any,many,,,0.234,bad tokens",
            "a100-80gb,llama2-7b,vllm,fp16,1,attn_pre_proj,any,512,,,-1,negative",
            "a100-80gb,llama2-7b,vllm,fp16,1,attn_pre_proj,any,512,,,nan,not finite",
            "a100-80gb,llama2-7b,vllm,fp16,1,qkv,any,512,,,0.2,unknown kernel",
            "a100-80gb,llama2-7b,vllm,fp16,2,attn_pre_proj,any,512,,,0.2,tensor parallel",
            "a100-80gb,llama2-7b,vllm,fp16,1,attn_decode,decode,32,16,1024,0.3,batch mismatch",
            "a100-80gb,llama2-7b,vllm,fp16,1,attn_prefill,prefill,1024,1,512,0.3,chunked",
        ]
    )
    assert errors_of(text) == [
        (3, "tokens"),
        (4, "time_ms_per_layer"),
        (5, "time_ms_per_layer"),
        (6, "op"),
        (7, "tp"),
        (8, "tokens"),
        (9, "kv_tokens"),
    ]


def test_a_header_of_neither_format_or_with_unknown_columns_is_rejected() -> None:
    assert errors_of("a,b,c\n1,2,3\n") == [(1, "")]
    assert (1, "colour") in errors_of(OPS_HEADER + ",colour\n")
    assert errors_of("op,time_ms_per_layer\n") == [
        (1, c) for c in ("device", "model", "phase", "tokens")
    ]


def test_an_empty_set_is_rejected() -> None:
    assert errors_of(OPS_HEADER + "\n") == [(2, "")]


def test_a_decode_row_needs_its_context() -> None:
    text = E2E_HEADER + "\na100-80gb,llama2-7b,vllm,fp16,1,decode,,8,,12.0,,x\n"
    assert errors_of(text) == [(2, "kv_tokens")]
