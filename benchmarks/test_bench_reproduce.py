"""``reproduce all`` speed target: every paper's reproduction, end to end, in under
20 s. Each round runs the command in a fresh interpreter: the runners memoise their engine
runs per process (``functools.cache``), so a second call in this process would time only
the cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _reproduce_all() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "reproduce", "all", "--format", "json"],
        cwd=REPO,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_bench_reproduce_all(benchmark: Any) -> None:
    benchmark.extra_info.update(
        name="reproduce all --format json (4 papers, fresh process)", unit="s", target=20.0
    )
    benchmark.pedantic(_reproduce_all, rounds=1, iterations=1)
