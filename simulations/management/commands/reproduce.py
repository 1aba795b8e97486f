"""``manage.py reproduce PAPER [--format json|table]``: each reproduced figure beside the
paper's (docs/architecture.md, the reproduction document).

Runs on the simulation core alone (``simulations.core.reproduce.reproduce``): it needs no
database and works before ``migrate``. With ``--format json`` a single paper prints
the reproduction document ``{"paper": ..., "checks": [...]}``; ``all`` prints a JSON *list* of
those documents, one per paper in the order glitches, neo, heterollm, h2m2. Non-finite
numbers are printed as ``null``. Every check carries ``basis`` (``prediction``,
``calibration`` or ``input``), ``basis_why`` and ``discriminating`` (see
:mod:`simulations.core.reproduce.basis`).

The table groups each paper's checks by basis under the headline "predictions within
tolerance: X of Y" (predictions that would also pass at "no effect" are listed and counted
apart). Both formats end with the summary by basis (on stderr with ``--format json``, so
stdout stays one JSON document). A miss is a finding, not a failure of the command: the
exit status is 0 unless ``--strict`` is given, then 1 when any check is outside its
tolerance (with a one-line message, no traceback).
"""

from __future__ import annotations

import json
import math
import os
import sys
import textwrap
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulations.core.jsonsafe import finite
from simulations.core.reproduce import (
    PAPERS,
    grouped,
    headline,
    reproduce,
    reproduce_many,
    summary,
)
from simulations.core.reproduce.basis import PREDICTION_WHY

WIDTH = 80


def _cpus() -> int:
    """The CPUs this process may run on (at most 8)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(8, n))


def _num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-2):
        return f"{v:.3e}"
    return f"{v:.4g}"


def _pct(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    return f"{v:+.1%}"


def _row(c: dict[str, Any], prefix: str) -> list[str]:
    cid = c["id"][len(prefix) :] if c["id"].startswith(prefix) else c["id"]
    if len(cid) > 33:
        cid = cid[:32] + "…"
    tol = f"±{_num(c['tolerance'])}" if c.get("abs_tolerance") else f"{c['tolerance']:.0%}"
    lines = [
        f"{cid:<33} {_num(c['paper_value']):>9} {_num(c['simulated']):>9} "
        f"{_pct(c['rel_err']):>7} {tol:>6} {'ok' if c['ok'] else 'NO':>3}"
    ]
    text = f"{c['quantity']} [{c['unit']}]"
    if c.get("discriminating") is False:
        text += " (would also pass at no effect, 1.0)"
    if c.get("note"):
        text += f" — {c['note']}"
    why = c.get("basis_why")
    if why and why != PREDICTION_WHY:
        text += f" — basis: {why}"
    return lines + textwrap.wrap(
        text, WIDTH, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
    )


def render_table(doc: dict[str, Any]) -> str:
    """A paper's checks grouped by basis, as text no wider than 80 columns."""
    checks = doc["checks"]
    counts = summary(checks)
    failed = sum(1 for c in checks if not c["ok"])
    lines = textwrap.wrap(
        f"{doc['paper'].upper()}: {headline(counts)}; {len(checks)} checks in all, "
        f"{failed} outside tolerance",
        WIDTH,
        subsequent_indent="    ",
    )
    prefix = doc["paper"] + "."
    for g in grouped(checks):
        lines += [
            "",
            *textwrap.wrap(f"{g['title']}: {g['ok']} of {g['n']} within tolerance", WIDTH),
            f"{'figure':<33} {'paper':>9} {'simulated':>9} {'rel.err':>7} {'tol':>6} {'ok':>3}",
            "-" * WIDTH,
        ]
        for c in g["checks"]:
            lines += _row(c, prefix)
    return "\n".join(lines)


def render_summary(docs: list[dict[str, Any]]) -> str:
    """Within-tolerance counts by basis, one line per paper and the total."""
    cols = (
        ("prediction", "predictions"),
        ("non_discriminating", "no-effect"),
        ("calibration", "calibration"),
        ("input", "input"),
    )
    lines = [
        "Summary by basis (within tolerance / checks)",
        f"{'paper':<11}" + "".join(f"{title:>14}" for _, title in cols),
    ]
    every: list[dict[str, Any]] = []
    for doc in docs:
        counts = summary(doc["checks"])
        every += doc["checks"]
        lines.append(
            f"{doc['paper']:<11}"
            + "".join(f"{counts[k]['ok']:>8} / {counts[k]['n']:<3}" for k, _ in cols).rstrip()
        )
    total = summary(every)
    if len(docs) > 1:
        lines.append(
            f"{'all':<11}"
            + "".join(f"{total[k]['ok']:>8} / {total[k]['n']:<3}" for k, _ in cols).rstrip()
        )
    lines += textwrap.wrap(headline(total), WIDTH)
    return "\n".join(lines)


class Command(BaseCommand):
    """Print reproduced paper figures beside the published ones."""

    help = "Reproduce a paper's published figures (glitches, neo, heterollm, h2m2 or all)."
    requires_system_checks: list[str] = []  # no database needed: runs before migrations

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paper", choices=[*PAPERS, "all"])
        parser.add_argument("--format", choices=("json", "table"), default="table")
        parser.add_argument(
            "--strict",
            action="store_true",
            help="exit with status 1 when any check is outside its tolerance",
        )
        parser.add_argument(
            "--jobs",
            type=int,
            default=_cpus(),
            help="processes a paper's independent simulations run in (default: the CPUs "
            "this process may use); the output does not depend on it",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        papers = list(PAPERS) if options["paper"] == "all" else [options["paper"]]
        if options["jobs"] < 1:
            raise CommandError("--jobs must be at least 1")
        jobs = options["jobs"]
        if options["paper"] == "all":
            # The small papers run beside Neo's prefetch (see reproduce_many).
            raw = reproduce_many(papers, jobs=jobs)
        else:
            raw = [reproduce(papers[0], jobs=jobs)]
        docs = [finite(d) for d in raw]
        if options["format"] == "json":
            out: Any = docs if options["paper"] == "all" else docs[0]
            self.stdout.write(json.dumps(out, indent=2, allow_nan=False))
            self.stderr.write(render_summary(docs))
        else:
            blocks = []
            for doc in docs:
                if doc["checks"]:
                    blocks.append(render_table(doc))
                else:
                    blocks.append(f"{doc['paper'].upper()}: no reproduction registered yet")
            blocks.append(render_summary(docs))
            self.stdout.write("\n\n".join(blocks))
        failed = [c["id"] for d in docs for c in d["checks"] if not c["ok"]]
        if failed and options["strict"]:
            # A plain message and status 1, not a CommandError: a miss is a finding.
            self.stderr.write(
                f"reproduce --strict: {len(failed)} check(s) outside tolerance: "
                + ", ".join(failed)
            )
            sys.exit(1)
