"""Reads of the operations app: the health of the database, the broker and the processes.

Each check answers ``{"ok": bool, ...}``; error details name the exception's type only
(messages can carry connection URLs).
"""

from __future__ import annotations

import socket
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from ops.models import ProcessHeartbeat, ProcessRole


def database_check() -> dict[str, Any]:
    """The default database answers a query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True}


def broker_check() -> dict[str, Any]:
    """The Celery broker accepts a connection (within the broker connection timeout)."""
    from hetplanner.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(
                max_retries=1, interval_start=0, timeout=settings.CELERY_BROKER_CONNECTION_TIMEOUT
            )
    except Exception as exc:  # kombu raises many kinds; any of them means "unreachable"
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True}


def _age_s(row: ProcessHeartbeat | None, now: datetime) -> float | None:
    return None if row is None else round((now - row.beat_at).total_seconds(), 1)


def process_check(
    role: str, *, queue: str | None = None, hostname: str | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """The freshest heartbeat of a ``role`` process (consuming ``queue``, on ``hostname``,
    when given) is at most ``HETPLANNER_PROCESS_STALE_S`` old."""
    now = now or timezone.now()
    rows = ProcessHeartbeat.objects.filter(role=role)
    if hostname is not None:
        rows = rows.filter(hostname=hostname)
    if queue is not None:
        # Exact membership in the comma-separated list (a prefix match would mistake
        # "hetplanner" for "hetplanner-x").
        consuming = [r for r in rows.order_by("-beat_at")[:200] if queue in r.queue_list()]
        newest = consuming[0] if consuming else None
    else:
        newest = rows.order_by("-beat_at").first()
    age = _age_s(newest, now)
    limit = float(settings.HETPLANNER_PROCESS_STALE_S)
    check: dict[str, Any] = {
        "ok": age is not None and age <= limit,
        "age_s": age,
        "stale_after_s": limit,
    }
    if newest is not None:
        check["name"] = newest.name
    return check


def health_report(*, now: datetime | None = None) -> dict[str, Any]:
    """The deployment's health: database, broker, a worker of the jobs' queue, a worker of
    the housekeeping queue, and beat (``/healthz``)."""
    checks: dict[str, Any] = {"database": database_check(), "broker": broker_check()}
    if checks["database"]["ok"]:
        try:
            checks["worker"] = process_check(
                ProcessRole.WORKER, queue=settings.CELERY_TASK_DEFAULT_QUEUE, now=now
            )
            checks["housekeeping"] = process_check(
                ProcessRole.WORKER, queue=settings.HETPLANNER_HOUSEKEEPING_QUEUE, now=now
            )
            checks["beat"] = process_check(ProcessRole.BEAT, now=now)
        except DatabaseError as exc:
            checks["database"] = {"ok": False, "error": type(exc).__name__}
    for name in ("worker", "housekeeping", "beat"):
        checks.setdefault(name, {"ok": False, "error": "database unreachable"})
    healthy = all(check["ok"] for check in checks.values())
    return {"status": "ok" if healthy else "unhealthy", "checks": checks}


def this_host() -> str:
    """The host name heartbeats record (a container's id under compose)."""
    return socket.gethostname()
