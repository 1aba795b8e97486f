"""Refactoring guard: ``reproduce``, ``simulate`` and ``plan`` give the values they gave
before, compared with copies recorded from the code as it was (``tests/core/recorded/``).

Each document is produced through the simulation core alone, with the built-in catalog and
no database: the four papers' reproductions (``reproduce all --format json``, one document
per paper) and every example of ``examples/`` (``plan-*.json`` through the planner, the
others through :func:`~simulations.core.simulate.simulate`). Every value must be equal —
floats exactly — except the wall-clock timings of a plan report (:data:`TIMING`), which are
left out of the recorded copies.

A change that moves a number on purpose re-records the copies in its own commit, saying why:
``PYTHONPATH=. .venv/bin/python -m tests.core.test_outputs_unchanged [NAME ...]``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.jsonsafe import finite

REPO = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).resolve().parent / "recorded"
EXAMPLES = REPO / "examples"

#: The papers in the order ``reproduce all`` prints them (fixed here: the recorded copies
#: must not follow a change of the registry's order silently).
PAPERS = ("glitches", "neo", "heterollm", "h2m2")
#: (section, key) of a plan report holding wall-clock time: never compared.
TIMING = (
    ("screen", "seconds"),
    ("screen", "configurations_per_s"),
    ("screen", "cost_tables_seconds"),
    ("confirmation", "engine_seconds"),
)
#: Documents that take tens of seconds (they still run in CI).
SLOW = {
    "reproduce-neo",
    "reproduce-h2m2",
    "plan-h2m2-llama2-70b-memory",
    "plan-disaggregated-llama2-7b-conv",
    "splitwise-h100-a100-azure-conv",
    "splitwise-h100-a100-azure-code",
}


def _examples() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.json"))


NAMES = [f"reproduce-{p}" for p in PAPERS] + _examples()


def produce(name: str) -> Any:
    """The document ``name`` as the core produces it now (JSON-ready, timings removed)."""
    if name.startswith("reproduce-"):
        from simulations.core.reproduce import reproduce

        doc = finite(reproduce(name.removeprefix("reproduce-")))
    elif name.startswith("plan-"):
        from simulations.core.planner import Search, parse_plan

        path = EXAMPLES / f"{name}.json"
        plan = parse_plan(json.loads(path.read_text()), builtin_catalog(), trace_dir=EXAMPLES)
        doc = finite(Search(plan).run())
        for section, key in TIMING:
            doc[section].pop(key, None)
    else:
        from simulations.core.scenario import parse_scenario
        from simulations.core.simulate import simulate

        path = EXAMPLES / f"{name}.json"
        spec = parse_scenario(json.loads(path.read_text()), builtin_catalog(), trace_dir=EXAMPLES)
        doc = finite(simulate(spec))
    # Through JSON, as the commands print it (tuples become lists, keys strings).
    return json.loads(json.dumps(doc, allow_nan=False))


def differences(recorded: Any, now: Any, path: str = "$", limit: int = 20) -> list[str]:
    """Where ``now`` differs from ``recorded`` (JSON paths), at most ``limit`` of them.
    Floats must be equal; an int and a float of the same value are equal (as in JSON)."""
    out: list[str] = []

    def walk(a: Any, b: Any, p: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in a.keys() | b.keys():
                if k not in b:
                    out.append(f"{p}.{k}: missing now")
                elif k not in a:
                    out.append(f"{p}.{k}: new key")
                else:
                    walk(a[k], b[k], f"{p}.{k}")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{p}: {len(a)} items recorded, {len(b)} now")
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                walk(x, y, f"{p}[{i}]")
        elif isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float):
            if a != b or type(a) is not type(b):
                out.append(f"{p}: {a!r} recorded, {b!r} now")
        elif not isinstance(b, int | float) or not (a == b or (math.isnan(a) and math.isnan(b))):
            out.append(f"{p}: {a!r} recorded, {b!r} now")

    walk(recorded, now, path)
    return out


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NAMES]
)
def test_the_output_is_the_recorded_one(name: str) -> None:
    recorded = json.loads((RECORDED / f"{name}.json").read_text())
    diffs = differences(recorded, produce(name))
    assert not diffs, f"{name} changed:\n" + "\n".join(diffs)


def test_every_example_and_paper_has_a_recorded_copy() -> None:
    """A new example must be recorded too (and a removed one's copy deleted)."""
    recorded = {p.stem for p in RECORDED.glob("*.json")}
    assert sorted(recorded) == sorted(NAMES)


def record(names: list[str]) -> None:
    """Write the recorded copies of ``names`` (all when empty) from the code as it is."""
    RECORDED.mkdir(exist_ok=True)
    for name in names or NAMES:
        doc = produce(name)
        (RECORDED / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"recorded {name}", file=sys.stderr)


if __name__ == "__main__":
    record(sys.argv[1:])
