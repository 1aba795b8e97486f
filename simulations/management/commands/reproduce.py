"""``manage.py reproduce PAPER [--format json|table]``: each reproduced figure beside the
paper's (DESIGN.md §2 and §6).

Runs on the simulation core alone (``simulations.core.reproduce.reproduce``): it needs no
database and works before ``migrate``. With ``--format json`` a single paper prints the
DESIGN.md §6 document ``{"paper": ..., "checks": [...]}``; ``all`` prints a JSON *list* of
those documents, one per paper in the order glitches, neo, heterollm, h2m2. Non-finite
numbers are printed as ``null``. The exit status is 1 when any check is outside its
tolerance, 0 otherwise.
"""

from __future__ import annotations

import json
import math
import textwrap
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulations.core.jsonsafe import finite
from simulations.core.reproduce import PAPERS, reproduce

WIDTH = 80


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


def render_table(doc: dict[str, Any]) -> str:
    """A paper's checks as text no wider than 80 columns."""
    checks = doc["checks"]
    failed = sum(1 for c in checks if not c["ok"])
    lines = [
        f"{doc['paper'].upper()}: {len(checks)} checks, {len(checks) - failed} ok, "
        f"{failed} outside tolerance",
        f"{'figure':<33} {'paper':>9} {'simulated':>9} {'rel.err':>7} {'tol':>6} {'ok':>3}",
        "-" * WIDTH,
    ]
    prefix = doc["paper"] + "."
    for c in checks:
        cid = c["id"][len(prefix) :] if c["id"].startswith(prefix) else c["id"]
        if len(cid) > 33:
            cid = cid[:32] + "…"
        tol = f"±{_num(c['tolerance'])}" if c.get("abs_tolerance") else f"{c['tolerance']:.0%}"
        lines.append(
            f"{cid:<33} {_num(c['paper_value']):>9} {_num(c['simulated']):>9} "
            f"{_pct(c['rel_err']):>7} {tol:>6} {'ok' if c['ok'] else 'NO':>3}"
        )
        text = f"{c['quantity']} [{c['unit']}]"
        if c.get("note"):
            text += f" — {c['note']}"
        lines += textwrap.wrap(
            text, WIDTH, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
        )
    return "\n".join(lines)


class Command(BaseCommand):
    """Print reproduced paper figures beside the published ones."""

    help = "Reproduce a paper's published figures (glitches, neo, heterollm, h2m2 or all)."
    requires_system_checks: list[str] = []  # no database needed: runs before migrations

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paper", choices=[*PAPERS, "all"])
        parser.add_argument("--format", choices=("json", "table"), default="table")

    def handle(self, *args: Any, **options: Any) -> None:
        papers = list(PAPERS) if options["paper"] == "all" else [options["paper"]]
        docs = [finite(reproduce(p)) for p in papers]
        if options["format"] == "json":
            out: Any = docs if options["paper"] == "all" else docs[0]
            self.stdout.write(json.dumps(out, indent=2, allow_nan=False))
        else:
            blocks = []
            for doc in docs:
                if doc["checks"]:
                    blocks.append(render_table(doc))
                else:
                    blocks.append(f"{doc['paper'].upper()}: no reproduction registered yet")
            self.stdout.write("\n\n".join(blocks))
        failed = [c["id"] for d in docs for c in d["checks"] if not c["ok"]]
        if failed:
            raise CommandError(
                f"{len(failed)} check(s) outside tolerance: " + ", ".join(failed), returncode=1
            )
