"""pytest plugin for `make bench`: collect every benchmark's figure into .bench/results.json.

A benchmark declares what it measures through ``benchmark.extra_info``:

- ``name``: the row's name (default: the test's name);
- ``target``: the target value, in ``unit``;
- ``unit``: ``"s"``, ``"ms"`` or ``"us"`` to report the benchmark's mean time in that unit,
  or any other unit together with an explicit ``value`` (e.g. requests per second, a ratio);
- ``higher_is_better``: true when the value must reach the target rather than stay under it.

Other pytest tests in ``benchmarks/`` (for load tests that are not timed by pytest-benchmark)
may append rows with :func:`record`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

RESULTS = Path(".bench/results.json")
_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6}
_extra_rows: list[dict[str, Any]] = []


def record(name: str, value: float, unit: str, target: float, *, higher_is_better: bool) -> None:
    """Add a row measured outside pytest-benchmark (e.g. a load test)."""
    ok = value >= target if higher_is_better else value <= target
    _extra_rows.append(
        {"name": name, "value": value, "unit": unit, "target": target, "ok": bool(ok)}
    )


def _row(bench: Any) -> dict[str, Any] | None:
    info = dict(bench.extra_info)
    if "target" not in info:
        return None
    unit = info.get("unit", "s")
    if "value" in info:
        value = float(info["value"])
    else:
        value = float(bench.stats.mean) * _SCALE.get(unit, 1.0)
    target = float(info["target"])
    ok = value >= target if info.get("higher_is_better") else value <= target
    return {
        "name": info.get("name", bench.name),
        "value": value,
        "unit": unit,
        "target": target,
        "ok": bool(ok),
    }


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    bs = getattr(session.config, "_benchmarksession", None)
    rows = [r for b in (bs.benchmarks if bs else []) if (r := _row(b))] + _extra_rows
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(rows, indent=2))
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return
    tr.write_sep("=", "hetplanner benchmarks (.bench/results.json)")
    # Wall-time targets assume an otherwise idle machine: say how busy it was.
    load1, load5, _ = os.getloadavg()
    tr.write_line(f"load average {load1:.2f} (1 min), {load5:.2f} (5 min) on {os.cpu_count()} CPUs")
    tr.write_line(f"{'benchmark':<58} {'value':>12} {'target':>10} {'unit':<8} ok")
    for r in rows:
        tr.write_line(
            f"{r['name'][:58]:<58} {r['value']:>12.4g} {r['target']:>10.4g} {r['unit']:<8} "
            f"{'yes' if r['ok'] else 'NO'}"
        )
