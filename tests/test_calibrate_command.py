"""``manage.py calibrate``: the fit document, the table, and clear refusals."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from simulations.core.catalog import DATA_DIR

A100_SET = DATA_DIR / "measurements" / "a100_llama2-7b_vllm_operators.csv"
HEADER = "device,model,op,phase,tokens,time_ms_per_layer"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("calibrate", *args, stdout=out)
    return out.getvalue()


def test_json_is_the_contracts_document_and_meets_the_targets() -> None:
    doc = json.loads(run(str(A100_SET), "--stack", "vllm-fp16", "--format", "json"))
    assert {"stack", "parameters", "rows", "mape", "max_rel_err", "holdout_mape"} <= set(doc)
    assert doc["stack"] == "vllm-fp16"
    assert len(doc["rows"]) == 62
    assert {"measured_ms", "predicted_ms", "rel_err"} <= set(doc["rows"][0])
    assert doc["mape"] <= 0.08 and doc["holdout_mape"] <= 0.15
    assert doc["parameters"]["gemm_n_half"]["fitted"] is True
    assert doc["parameters"]["host_step_us"]["fitted"] is False


def test_the_table_shows_values_rows_and_hold_out() -> None:
    text = run(str(A100_SET), "--stack", "vllm-fp16", "--format", "table")
    assert text.startswith("vllm-fp16 fitted to a100_llama2-7b_vllm_operators")
    assert "compute_eff" in text and "attn_decode decode b=1 ctx=1024 @ 1" in text
    assert "hold-out" in text and "2048 tokens: MAPE" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_bad_rows_are_named_by_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{HEADER}\na100-80gb,llama2-7b,mlp_up_proj,any,512,fast\n")
    with pytest.raises(CommandError, match="line 2, column time_ms_per_layer") as exc:
        run(str(bad), "--stack", "vllm-fp16")
    assert exc.value.returncode == 1


def test_an_under_determined_set_is_refused(tmp_path: Path) -> None:
    few = tmp_path / "few.csv"
    few.write_text(f"{HEADER}\na100-80gb,llama2-7b,mlp_up_proj,any,512,0.402\n")
    with pytest.raises(CommandError, match="fit refused: under-determined"):
        run(str(few), "--stack", "vllm-fp16")


def test_an_unknown_stack_or_file_is_named() -> None:
    with pytest.raises(CommandError, match="--stack: unknown runtime profile 'vllm-fp99'"):
        run(str(A100_SET), "--stack", "vllm-fp99")
    with pytest.raises(CommandError, match="no such file"):
        run("missing.csv", "--stack", "vllm-fp16")
