"""Celery tasks of uploaded traces: parse one (claimed by one conditional update, retried
on transient errors) and re-send the parses whose message was refused or lost.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import close_old_connections

from simulations.jobs import (
    JOB_TASK_OPTIONS,
    TIME_LIMITS,
    TRANSIENT_ERRORS,
    backoff,
)
from simulations.scenarios import services

logger = logging.getLogger(__name__)


@shared_task(name="simulations.parse_trace", **JOB_TASK_OPTIONS, **TIME_LIMITS)
def parse_trace(self: Any, trace_id: int, resume_attempt: int | None = None) -> str:
    """Claim the parse of an uploaded trace (one conditional update) and store its columns
    or the error naming the line, once (large uploads leave the web request)."""
    close_old_connections()
    attempt = resume_attempt
    try:
        attempt = services.trace_parse_claim(trace_id, resume_attempt=resume_attempt)
        if attempt is None:
            return "skipped"
        return services.trace_parse_run(trace_id, attempt)
    except TRANSIENT_ERRORS as exc:
        countdown = backoff(self)
        logger.warning("trace %s: transient error, retrying in %ss: %s", trace_id, countdown, exc)
        raise self.retry(
            exc=exc,
            countdown=countdown,
            args=(),
            kwargs={"trace_id": trace_id, "resume_attempt": attempt},
        ) from exc


@shared_task(name="simulations.reconcile_traces")
def reconcile_traces() -> dict[str, list[int]]:
    """Re-send the parse of uploaded traces whose message was refused or lost."""
    close_old_connections()
    report = services.traces_reconcile()
    if report.resent:
        logger.info("reconcile traces: resent %s", report.resent)
    return {"resent": report.resent}
