"""``manage.py reproduce`` (DESIGN.md §2, §6): JSON and table output, exit status, no database."""

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
KEYS = {"id", "quantity", "unit", "paper_value", "simulated", "rel_err", "tolerance", "ok"}


def run(*args: str) -> tuple[str, CommandError | None]:
    out = io.StringIO()
    try:
        call_command("reproduce", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def fake(paper: str, ok: bool = True) -> dict[str, Any]:
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
    }
    return {"paper": paper, "checks": [check]}


def test_json_is_the_design_document_and_failures_set_the_exit_status() -> None:
    """Runs without the database (no django_db mark: any query would error)."""
    out, err = run("glitches", "--format", "json")
    doc = json.loads(out)
    assert doc["paper"] == "glitches"
    assert len(doc["checks"]) >= 68
    assert all(set(c) >= KEYS for c in doc["checks"])
    failed = [c["id"] for c in doc["checks"] if not c["ok"]]
    assert (err is not None) == bool(failed)
    if err is not None:
        assert err.returncode == 1 and failed[0] in str(err)


def test_table_fits_eighty_columns_and_shows_every_check() -> None:
    out, _ = run("glitches", "--format", "table")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "table1.a100.prefill_ms" in out and "fig9.best_ratio" in out
    assert lines[0].startswith("GLITCHES:")


def test_all_prints_a_list_of_per_paper_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd, "reproduce", lambda paper: fake(paper))
    out, err = run("all", "--format", "json")
    assert err is None
    docs = json.loads(out)
    assert [d["paper"] for d in docs] == ["glitches", "neo", "heterollm", "h2m2"]


def test_non_finite_values_print_as_null_and_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd, "reproduce", lambda paper: fake(paper, ok=False))
    out, err = run("neo", "--format", "json")
    assert json.loads(out)["checks"][0]["simulated"] is None
    assert err is not None and err.returncode == 1


def test_table_marks_failures_and_wraps_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = fake("h2m2", ok=False)
    doc["checks"][0]["note"] = "a long explanation " * 20
    monkeypatch.setattr(cmd, "reproduce", lambda paper: doc)
    out, _ = run("h2m2")
    assert " NO" in out and "n/a" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_unknown_paper_is_rejected() -> None:
    with pytest.raises(CommandError):
        call_command("reproduce", "nope")


def test_command_line_exit_status_matches_the_checks() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hetplanner.settings.test"}
    proc = subprocess.run(
        [sys.executable, "manage.py", "reproduce", "glitches", "--format", "json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    doc = json.loads(proc.stdout)
    assert proc.returncode == (0 if all(c["ok"] for c in doc["checks"]) else 1)
