"""Celery tasks of the dashboard: recompute a paper's validation report."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections


@shared_task(name="frontend.compute_validation", acks_late=True, ignore_result=True)
def compute_validation(paper: str) -> str:
    """Reproduce ``paper`` and store its report (see :func:`frontend.validation.compute`)."""
    from frontend.validation import compute

    close_old_connections()
    return compute(paper).status
