"""The import contracts of ``pyproject.toml`` (``lint-imports``, also run by ``make lint``)
hold: the core never imports the Django side, device families never import policies,
policies never import the planner, reproduce and calibration do not import each other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
