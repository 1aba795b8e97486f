"""``manage.py simulate``: JSON and table output, progress on stderr,
errors naming the field. Uses the built-in catalog seeded into the test database."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
METRICS = {
    "name",
    "policy",
    "throughput_tok_s",
    "prompt_tok_s",
    "requests_per_s",
    "ttft_ms",
    "tpot_ms",
    "e2e_s",
    "capex_usd",
    "cost_efficiency_tok_s_per_usd",
    "avg_power_w",
    "energy_j_per_token",
    "energy_efficiency_tok_s_per_w",
    "slo_attainment",
    "devices",
    "timeline",
}

pytestmark = pytest.mark.django_db


def _doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((EXAMPLES / "glitches-vs-8xa100.json").read_text())
    doc["workload"]["requests"] = 24
    doc.update(over)
    return doc


def _write(tmp_path: Path, doc: Any, name: str = "s.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def run(path: Path, *args: str) -> str:
    out = io.StringIO()
    call_command("simulate", str(path), *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_json_output_has_both_systems_with_every_metric(
    builtin_catalog_rows: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = run(_write(tmp_path, _doc()), "--format", "json", "--progress")
    result = json.loads(text)  # stdout is pure JSON even with the progress bar on
    assert [s["name"] for s in result["systems"]] == ["1xA100+7xU280", "8xA100"]
    for s in result["systems"]:
        assert set(s) >= METRICS
        assert set(s["ttft_ms"]) == {"mean", "p50", "p90", "p99"}
        assert s["throughput_tok_s"] > 0
        assert {d["device"] for d in s["devices"]} <= {"a100-80gb", "u280"}
    assert result["systems"][0]["capex_usd"] == 17000 + 7 * 8000
    assert "simulating" in capsys.readouterr().err


def test_table_output_fits_80_columns_and_compares_with_the_first_system(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    text = run(_write(tmp_path, _doc()), "--format", "table")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "1xA100+7xU280" in lines[4] and "8xA100" in lines[4]
    row = next(line for line in lines if line.startswith("throughput (tok/s)"))
    assert row.rstrip().endswith("×")
    for label in ("TTFT p90 (ms)", "cost eff (tok/s/$)", "energy (J/tok)", "SLO attainment"):
        assert any(line.startswith(label) for line in lines)


def test_a_trace_file_next_to_the_scenario_is_used(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    (tmp_path / "traces").mkdir()
    shutil.copy(EXAMPLES / "traces" / "AzureLLMInferenceTrace_conv.csv", tmp_path / "traces")
    doc = json.loads((EXAMPLES / "azure-conv-continuous-batching.json").read_text())
    doc["workload"]["requests"] = 50
    result = json.loads(run(_write(tmp_path, doc)))
    first = result["systems"][0]
    assert first["requests"] == 50
    # the conversation trace's first 50 rows, clipped to LLaMA2-7B's 4096-token window
    rows = (tmp_path / "traces" / "AzureLLMInferenceTrace_conv.csv").read_bytes()
    cells = [r.split(b",") for r in rows.split(b"\r\n")[1:51]]
    prompts = [int(c[1]) for c in cells]
    outputs = [int(c[2]) for c in cells]
    clipped = [p + o > 4096 for p, o in zip(prompts, outputs, strict=True)]
    expected = sum(min(p, 4096 - o) for p, o in zip(prompts, outputs, strict=True))
    assert first["prompt_tokens"] == expected
    assert first["generated_tokens"] == sum(outputs)
    assert first["clipped_requests"] == sum(clipped) > 0


def test_invalid_json_names_line_and_column(builtin_catalog_rows: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"line 2, column"):
        run(_write(tmp_path, '{"name": "x",\n  "model": }'))


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        run(tmp_path / "nope.json")


def test_an_invalid_field_is_named(builtin_catalog_rows: Any, tmp_path: Path) -> None:
    doc = _doc()
    doc["systems"][0]["devices"][1]["device"] = "u999"
    doc["systems"][1]["options"] = {"max_batch": 0}
    with pytest.raises(CommandError) as err:
        run(_write(tmp_path, doc))
    msg = str(err.value)
    assert "systems[0].devices[1].device" in msg
    assert "systems[1].options.max_batch" in msg


def test_a_model_that_does_not_fit_names_the_system_and_device(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    doc = _doc(model="llama2-70b")
    doc["systems"] = [doc["systems"][1]]
    doc["systems"][0]["devices"][0]["device"] = "v100s"
    with pytest.raises(CommandError) as err:
        run(_write(tmp_path, doc))
    assert "systems[0]" in str(err.value)
    assert "8xA100" in str(err.value)


@pytest.mark.parametrize(
    "example",
    # plan-*.json are capacity-search plans (tests/test_plan_command.py validates them).
    sorted(p for p in EXAMPLES.glob("*.json") if not p.name.startswith("plan-")),
    ids=lambda p: p.name,
)
def test_every_example_is_a_valid_scenario(builtin_catalog_rows: Any, example: Path) -> None:
    from simulations.adapters import catalog_from_db
    from simulations.core.scenario import parse_scenario

    doc = json.loads(example.read_text())
    spec = parse_scenario(doc, catalog_from_db(), trace_dir=example.parent)
    assert spec.systems


def test_a_wide_comparison_is_split_into_80_column_blocks(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    doc = _doc()
    base = doc["systems"][1]
    doc["systems"] += [
        dict(base, name=f"{n}xA100", devices=[dict(device="a100-80gb", count=n)]) for n in (2, 4, 6)
    ]
    text = run(_write(tmp_path, doc), "--format", "table")
    assert max(len(line) for line in text.splitlines()) <= 80
    heads = [line for line in text.splitlines() if line.startswith("metric")]
    assert len(heads) == 2
    assert all("1xA100+7xU280" in h for h in heads)


def test_json_with_costs_and_capacity_gives_tco_and_max_load_consistent_by_arithmetic(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    from tests.core.test_tco import _check_arithmetic

    doc = json.loads((EXAMPLES / "tco-capacity-glitches-vs-a100.json").read_text())
    doc["workload"]["requests"] = 40
    doc["capacity"] = {"requests": 40, "steps": 4}
    result = json.loads(run(_write(tmp_path, doc), "--format", "json"))
    for entry in result["systems"]:
        _check_arithmetic(entry, doc["costs"], rented=set())
        best = entry["max_load_rps_at_slo"]
        assert best is not None and 0 < best <= entry["capacity"]["saturation_rps"]
        assert isinstance(entry["overloaded"], bool)
        assert entry["overloaded"] is (entry["capacity"]["saturation_rps"] < 0.65)


def test_table_with_costs_and_capacity_shows_tco_and_max_load_rows(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    doc = json.loads((EXAMPLES / "tco-capacity-glitches-vs-a100.json").read_text())
    doc["workload"]["requests"] = 40
    doc["capacity"] = {"requests": 40, "steps": 3}
    text = run(_write(tmp_path, doc), "--format", "table")
    for label in ("TCO ($/year)", "capex share ($/yr)", "$ per M tokens", "max load @SLO"):
        assert label in text
    assert all(len(line) <= 80 for line in text.splitlines())
    plain = run(_write(tmp_path, _doc(), "plain.json"), "--format", "table")
    assert "TCO" not in plain and "max load" not in plain
