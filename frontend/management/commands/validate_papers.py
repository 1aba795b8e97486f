"""``manage.py validate_papers [PAPER ...]``: reproduce the papers now and store the reports
the validation page shows (all four by default; Neo's takes a few minutes)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from frontend.validation import compute
from simulations.core.reproduce.base import PAPERS
from simulations.core.reproduce.basis import headline, summary


class Command(BaseCommand):
    """Compute and store the validation page's reproduction reports."""

    help = "Reproduce the papers' figures and store them for the validation page."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("papers", nargs="*", help=f"Papers ({', '.join(PAPERS)}); default all.")

    def handle(self, *args: Any, **options: Any) -> None:
        papers = options["papers"] or list(PAPERS)
        unknown = [p for p in papers if p not in PAPERS]
        if unknown:
            raise CommandError(
                f"unknown paper(s): {', '.join(unknown)}; choose from {', '.join(PAPERS)}"
            )
        for paper in papers:
            row = compute(paper)
            checks = (row.document or {}).get("checks", [])
            ok = sum(1 for c in checks if c.get("ok"))
            if row.status == row.Status.READY:
                self.stdout.write(
                    f"{paper}: {headline(summary(checks))}; {ok}/{len(checks)} checks in all "
                    f"within tolerance ({row.seconds:.1f} s)"
                )
            else:
                self.stderr.write(f"{paper}: failed: {row.error}")
