"""``manage.py plan SPEC.json``: JSON on stdout, an 80-column table, progress on stderr,
errors naming the field. Uses the built-in catalog seeded into the test database."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.core.planner.helpers import small_doc

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

pytestmark = pytest.mark.django_db


def _write(tmp_path: Path, doc: Any, name: str = "plan.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def _run(path: Path, *args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("plan", str(path), *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_json_output_is_the_plan_result_document(builtin_catalog_rows: Any, tmp_path: Path) -> None:
    out, _ = _run(_write(tmp_path, small_doc()), "--no-progress")
    doc = json.loads(out)
    for key in ("recommendation", "pareto", "per_device_type", "space", "confirmation"):
        assert key in doc
    rec = doc["recommendation"]
    assert rec["key"] and rec["capex_usd"] > 0 and rec["reasons"]
    assert rec["metrics"]["ttft_ms"]["p90"] <= 1000 and rec["metrics"]["tpot_ms"]["p90"] <= 50


def test_the_table_fits_80_columns_and_shows_the_answer(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    out, _ = _run(_write(tmp_path, small_doc()), "--format", "table", "--no-progress")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    for needle in ("Recommendation:", "Why:", "Runner-up", "Pareto front", "per device type"):
        assert needle in text


def test_two_processes_give_the_same_answer_as_one(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    path = _write(tmp_path, small_doc())
    one = json.loads(_run(path, "--no-progress")[0])
    two = json.loads(_run(path, "--no-progress", "--processes", "2")[0])
    assert one["recommendation"]["key"] == two["recommendation"]["key"]
    assert [e["key"] for e in one["evaluated"]] == [e["key"] for e in two["evaluated"]]
    assert one["pareto"] == two["pareto"]


def test_progress_goes_to_stderr_and_stdout_stays_json(
    builtin_catalog_rows: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = _run(_write(tmp_path, small_doc()), "--progress")
    json.loads(out)
    assert "planning" in capsys.readouterr().err


def test_an_invalid_field_is_named(builtin_catalog_rows: Any, tmp_path: Path) -> None:
    doc = small_doc()
    doc["space"]["devices"][1]["max_count"] = -1
    doc["targets"] = {"tpot_p90_ms": "fast"}
    with pytest.raises(CommandError) as err:
        _run(_write(tmp_path, doc))
    msg = str(err.value)
    assert "space.devices[1].max_count" in msg and "targets.tpot_p90_ms" in msg


def test_invalid_json_and_missing_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="line 1, column"):
        _run(_write(tmp_path, "{nope"))
    with pytest.raises(CommandError, match="cannot read"):
        _run(tmp_path / "missing.json")


def test_an_empty_catalog_is_explained(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="seed_catalog"):
        _run(_write(tmp_path, small_doc()))


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("plan-*.json")), ids=lambda p: p.name)
def test_every_example_plan_is_valid(builtin_catalog_rows: Any, example: Path) -> None:
    from simulations.adapters import catalog_from_db
    from simulations.core.planner import parse_plan

    plan = parse_plan(json.loads(example.read_text()), catalog_from_db(), trace_dir=EXAMPLES)
    assert plan.devices and plan.policies


def test_the_table_of_a_plan_with_an_objective_says_what_it_minimises(
    builtin_catalog_rows: Any, tmp_path: Path
) -> None:
    costs = {"electricity_usd_per_kwh": 0.2, "amortisation_years": 4}
    doc = small_doc(costs=costs, objective="usd_per_million_tokens")
    out, _ = _run(_write(tmp_path, doc), "--format", "table", "--no-progress")
    assert "Objective usd_per_million_tokens:" in out
    assert "$ per million tokens" in " ".join(out.split())
    assert max(len(line) for line in out.splitlines()) <= 80
    plain, _ = _run(
        _write(tmp_path, small_doc(), "plain.json"), "--format", "table", "--no-progress"
    )
    assert "Objective" not in plain
