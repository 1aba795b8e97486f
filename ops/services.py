"""Writes of the operations app: process heartbeats."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from ops.models import ProcessHeartbeat

logger = logging.getLogger(__name__)


def process_heartbeat(
    *,
    role: str,
    name: str,
    hostname: str,
    pid: int,
    queues: Sequence[str] = (),
    started_at: datetime,
    now: datetime | None = None,
) -> None:
    """Record that process ``name`` (of ``role``) is alive now."""
    ProcessHeartbeat.objects.update_or_create(
        role=role,
        name=name[:200],
        defaults={
            "hostname": hostname[:200],
            "pid": pid,
            "queues": ",".join(queues)[:1000],
            "started_at": started_at,
            "beat_at": now or timezone.now(),
        },
    )


class ProcessBeater(threading.Thread):
    """Writes the heartbeat of this process every ``interval`` seconds until stopped.

    A daemon thread with its own database connection (Django's are per thread); a failed
    write is logged and retried at the next beat — the row then goes stale, which is what
    the health checks should see while the database is unreachable.
    """

    def __init__(
        self,
        *,
        role: str,
        name: str,
        hostname: str,
        pid: int,
        queues: Sequence[str],
        interval: float,
    ) -> None:
        super().__init__(name=f"heartbeat-{role}", daemon=True)
        self.fields: dict[str, Any] = {
            "role": role,
            "name": name,
            "hostname": hostname,
            "pid": pid,
            "queues": queues,
        }
        self.interval = interval
        self.started_at = timezone.now()
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while True:
                close_old_connections()
                try:
                    process_heartbeat(**self.fields, started_at=self.started_at)
                except DatabaseError:
                    logger.warning("%s heartbeat write failed", self.fields["name"], exc_info=True)
                if self._stop_event.wait(self.interval):
                    return
        finally:
            connection.close()

    def stop(self) -> None:
        """Stop beating (the row stays, and goes stale)."""
        self._stop_event.set()
