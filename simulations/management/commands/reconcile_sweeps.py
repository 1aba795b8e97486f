"""``manage.py reconcile_sweeps``: re-queue sweep chunks whose worker died, re-send lost chunk
messages and finalise fully recorded sweeps, now.

The same reconciliation runs periodically from celery beat (``reconcile-sweeps``); this runs
it once by hand (e.g. after restoring a broker that lost its data).
"""

from typing import Any

from django.core.management.base import BaseCommand

from simulations.sweeps.services import sweeps_reconcile


class Command(BaseCommand):
    """Run the sweep reconciler once and print what it did."""

    help = "Re-queue stale sweep chunks, re-send lost chunk messages, finalise complete sweeps."

    def handle(self, *args: Any, **options: Any) -> None:
        report = sweeps_reconcile()
        self.stdout.write(
            f"requeued {len(report.requeued)}, re-sent {len(report.resent)} chunk(s); "
            f"finalised {len(report.finalised)} sweep(s)"
        )
