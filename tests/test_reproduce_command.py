"""``manage.py reproduce``: JSON and table output grouped by basis, the
summary, the exit status (0 unless ``--strict``), no database."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from simulations.management.commands import reproduce as cmd

REPO = Path(__file__).resolve().parent.parent
KEYS = {
    "id",
    "quantity",
    "unit",
    "paper_value",
    "simulated",
    "rel_err",
    "tolerance",
    "ok",
    "basis",
    "basis_why",
    "discriminating",
}


def run(*args: str) -> tuple[str, int]:
    """stdout and the exit status of ``reproduce args`` (stderr is :func:`run_err`'s)."""
    out, _, status = run_err(*args)
    return out, status


def run_err(*args: str) -> tuple[str, str, int]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("reproduce", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return out.getvalue(), err.getvalue(), int(exc.code or 0)
    return out.getvalue(), err.getvalue(), 0


def fake(paper: str, ok: bool = True, **extra: Any) -> dict[str, Any]:
    check = {
        "id": f"{paper}.x.y",
        "quantity": "a quantity",
        "unit": "ms",
        "paper_value": 1.0,
        "simulated": 1.01 if ok else float("inf"),
        "rel_err": 0.01 if ok else float("inf"),
        "tolerance": 0.05,
        "ok": ok,
        "note": "why",
        "basis": "prediction",
        "basis_why": "nothing fitted",
        "discriminating": True,
        **extra,
    }
    return {"paper": paper, "checks": [check]}


def test_json_is_the_design_document_with_a_basis_and_misses_exit_0() -> None:
    """Runs without the database (no django_db mark: any query would error)."""
    out, status = run("glitches", "--format", "json")
    doc = json.loads(out)
    assert doc["paper"] == "glitches"
    assert len(doc["checks"]) >= 68
    assert all(set(c) >= KEYS for c in doc["checks"])
    assert {c["basis"] for c in doc["checks"]} == {"prediction", "calibration", "input"}
    assert any(not c["ok"] for c in doc["checks"])  # GLITCHES' GPU decode powers miss
    assert status == 0


def test_strict_exits_1_naming_the_misses_without_a_traceback() -> None:
    out, err, status = run_err("glitches", "--format", "json", "--strict")
    failed = [c["id"] for c in json.loads(out)["checks"] if not c["ok"]]
    assert failed and status == 1
    assert "outside tolerance" in err and failed[0] in err
    assert "Traceback" not in err and "CommandError" not in err


def test_strict_exits_0_when_every_check_is_within(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd, "reproduce", lambda paper, **_: fake(paper))
    _, status = run("neo", "--strict")
    assert status == 0


def test_json_prints_the_summary_by_basis_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd, "reproduce_many", lambda papers, **_: [fake(p) for p in papers])
    out, err, _ = run_err("all", "--format", "json")
    json.loads(out)  # stdout stays one JSON document
    assert "Summary by basis" in err
    assert "predictions within tolerance: 4 of 4" in err


def test_table_groups_checks_by_basis_under_the_predictions_headline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = fake("h2m2")
    base = doc["checks"][0]
    doc["checks"] = [
        {**base, "id": "h2m2.fig1.pred_ok"},
        {**base, "id": "h2m2.fig1.pred_off", "ok": False},
        {**base, "id": "h2m2.fig1.no_effect", "unit": "x", "discriminating": False},
        {**base, "id": "h2m2.fig1.fitted", "basis": "calibration", "basis_why": "fit X"},
        {**base, "id": "h2m2.fig1.echo", "basis": "input", "basis_why": "catalog Y"},
    ]
    monkeypatch.setattr(cmd, "reproduce", lambda paper, **_: doc)
    out, status = run("h2m2")
    assert status == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "predictions within tolerance: 1 of 2" in " ".join(lines[:3])
    order = [
        out.index("Predictions (nothing fitted"),
        out.index("fig1.pred_ok"),
        out.index("Predictions that would also pass"),
        out.index("fig1.no_effect"),
        out.index("Calibration ("),
        out.index("fig1.fitted"),
        out.index("Inputs ("),
        out.index("fig1.echo"),
        out.index("Summary by basis"),
    ]
    assert order == sorted(order)
    assert "basis: fit X" in out and "would also pass at no effect" in out


def test_table_fits_eighty_columns_and_shows_every_check() -> None:
    out, _ = run("glitches", "--format", "table")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "table1.a100.prefill_ms" in out and "fig9.best_ratio" in out
    assert lines[0].startswith("GLITCHES: predictions within tolerance:")


def test_all_prints_a_list_of_per_paper_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd, "reproduce_many", lambda papers, **_: [fake(p) for p in papers])
    out, status = run("all", "--format", "json")
    assert status == 0
    docs = json.loads(out)
    assert [d["paper"] for d in docs] == ["glitches", "neo", "heterollm", "h2m2"]


def test_non_finite_values_print_as_null_and_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd, "reproduce", lambda paper, **_: fake(paper, ok=False))
    out, status = run("neo", "--format", "json")
    assert json.loads(out)["checks"][0]["simulated"] is None
    assert status == 0
    assert run("neo", "--format", "json", "--strict")[1] == 1


def test_table_marks_failures_and_wraps_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = fake("h2m2", ok=False)
    doc["checks"][0]["note"] = "a long explanation " * 20
    monkeypatch.setattr(cmd, "reproduce", lambda paper, **_: doc)
    out, _ = run("h2m2")
    assert " NO" in out and "n/a" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_unknown_paper_is_rejected() -> None:
    with pytest.raises(CommandError):
        call_command("reproduce", "nope")


def test_command_line_exits_0_on_misses_and_1_with_strict_without_a_traceback() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hetplanner.settings.test"}

    def command(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "reproduce", "glitches", "--format", "json", *extra],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    plain = command()
    doc = json.loads(plain.stdout)
    assert not all(c["ok"] for c in doc["checks"])
    assert plain.returncode == 0 and "Summary by basis" in plain.stderr
    strict = command("--strict")
    assert strict.returncode == 1
    assert "outside tolerance" in strict.stderr and "Traceback" not in strict.stderr


def test_jobs_reach_the_reproduction_and_zero_is_rejected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []

    def spy(paper: str, *, jobs: int = 1) -> dict[str, Any]:
        seen.append(jobs)
        return fake(paper)

    monkeypatch.setattr(cmd, "reproduce", spy)
    run_err("neo", "--format", "json", "--jobs", "3")
    assert seen == [3]

    def spy_many(papers: list[str], *, jobs: int = 1) -> list[dict[str, Any]]:
        seen.append(jobs)
        return [fake(p) for p in papers]

    monkeypatch.setattr(cmd, "reproduce_many", spy_many)
    run_err("all", "--format", "json", "--jobs", "2")
    assert seen == [3, 2]
    with pytest.raises(CommandError, match="--jobs"):
        call_command("reproduce", "neo", "--jobs", "0")
