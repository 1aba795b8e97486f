"""Helpers shared by the three job systems' Celery tasks: runs (:mod:`simulations.tasks`),
sweeps (:mod:`simulations.sweeps.tasks`) and plans (:mod:`simulations.plans.tasks`).

Each system keeps its own claims and records; what is the same in all of them — how long a
transient error waits before the retry, and which time limit a delivery ran under — lives
here once.
"""

from __future__ import annotations

from typing import Any

from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings


def backoff(task: Any) -> float:
    """Seconds before the next retry of a bound ``task``: exponential in its retries, with
    full jitter, at most a minute."""
    return get_exponential_backoff_interval(
        factor=2, retries=task.request.retries, maximum=60, full_jitter=True
    )


def soft_time_limit(task: Any) -> float:
    """The soft time limit a bound ``task``'s delivery ran under, in seconds.

    A message may carry its own limits (hard, soft); else the settings' soft limit.
    """
    return (task.request.timelimit or (None, None))[1] or settings.CELERY_TASK_SOFT_TIME_LIMIT
