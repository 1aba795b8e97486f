"""Celery signal receivers: a worker (main process) and beat start a heartbeat thread."""

from __future__ import annotations

import os
import socket
from typing import Any

from celery import signals
from django.conf import settings

from ops.models import ProcessRole
from ops.services import ProcessBeater

_beaters: list[ProcessBeater] = []


def _start(role: str, name: str, queues: list[str]) -> None:
    beater = ProcessBeater(
        role=role,
        name=name,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=queues,
        interval=float(settings.HETPLANNER_PROCESS_HEARTBEAT_S),
    )
    beater.start()
    _beaters.append(beater)


@signals.worker_ready.connect
def worker_started(sender: Any, **kwargs: Any) -> None:
    """The worker consumes: beat as ``worker`` with its node name and queues."""
    queues = sorted(sender.app.amqp.queues.consume_from or sender.app.amqp.queues)
    _start(ProcessRole.WORKER, str(sender.hostname), queues)


@signals.beat_init.connect
def beat_started(sender: Any, **kwargs: Any) -> None:
    """Beat (stand-alone, or embedded in a worker with ``--beat``) started."""
    _start(ProcessRole.BEAT, f"beat@{socket.gethostname()}", [])


@signals.worker_shutdown.connect
def worker_stopping(sender: Any, **kwargs: Any) -> None:
    """Stop the threads of this process."""
    for beater in _beaters:
        beater.stop()
