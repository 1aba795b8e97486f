"""What the health checks read: the last sign of life of each worker and beat process."""

from __future__ import annotations

from django.db import models


class ProcessRole(models.TextChoices):
    """Kinds of long-running processes that write a heartbeat."""

    WORKER = "worker", "Celery worker"
    BEAT = "beat", "Celery beat"


class ProcessHeartbeat(models.Model):
    """One row per worker or beat process name, refreshed every
    ``HETPLANNER_PROCESS_HEARTBEAT_S`` seconds while the process lives."""

    role = models.CharField(max_length=16, choices=ProcessRole.choices)
    #: Celery node name for a worker (``celery@host``), ``beat@host`` for beat.
    name = models.CharField(max_length=200)
    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    #: Queues a worker consumes, comma-separated (empty for beat).
    queues = models.CharField(max_length=1000, blank=True, default="")
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["role", "name"], name="ops_heartbeat_role_name"),
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.name} at {self.beat_at:%Y-%m-%d %H:%M:%S}"

    def queue_list(self) -> list[str]:
        """The queues as a list."""
        return [q for q in self.queues.split(",") if q]
