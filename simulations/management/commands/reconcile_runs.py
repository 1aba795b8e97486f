"""``manage.py reconcile_runs``: re-queue runs whose worker died, re-send lost messages, now.

The same reconciliation runs periodically from celery beat; this runs it once by hand (e.g.
after restoring a broker that lost its data).
"""

from typing import Any

from django.core.management.base import BaseCommand

from simulations.runs.services import runs_reconcile


class Command(BaseCommand):
    """Run the reconciler once and print what it did."""

    help = "Re-queue runs with a stale heartbeat and re-send queued runs whose message is lost."

    def handle(self, *args: Any, **options: Any) -> None:
        report = runs_reconcile()
        self.stdout.write(
            f"requeued {len(report.requeued)}, re-sent {len(report.resent)}, "
            f"failed {len(report.failed)} run(s)"
        )
