"""The validation page's data: each paper's reproduction report, computed and stored.

:func:`compute` runs :func:`simulations.core.reproduce.reproduce` for one paper and stores
the document in :class:`~frontend.models.ValidationReport` (one row per paper, replaced on
each computation); :func:`request` marks the row as computing and queues the Celery task
that calls :func:`compute`, unless a computation is already under way.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from frontend.models import ValidationReport
from simulations.core.jsonsafe import finite
from simulations.core.policies import get_paper, papers
from simulations.core.reproduce.basis import grouped, headline, summary

logger = logging.getLogger(__name__)

#: A computation that has not finished after this long is taken for lost (worker died).
STALE_AFTER = timedelta(minutes=30)


def _check_paper(paper: str) -> None:
    """ValueError unless ``paper`` is a registered paper (the registry, not a fixed list,
    decides: a new paper's package is all it takes)."""
    try:
        get_paper(paper)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None


def compute(paper: str) -> ValidationReport:
    """Reproduce ``paper`` now and store the report (status ``failed`` with the message if
    the reproduction raises)."""
    from simulations.core.reproduce import reproduce

    _check_paper(paper)
    started = time.perf_counter()
    try:
        document: dict[str, Any] | None = finite(reproduce(paper))
        error = ""
    except Exception as exc:  # a broken runner must not take the page down
        logger.exception("reproducing %s failed", paper)
        document, error = None, f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    values: dict[str, Any] = {"seconds": seconds, "error": error}
    if document is not None:
        values.update(
            status=ValidationReport.Status.READY, document=document, computed_at=timezone.now()
        )
    else:
        values["status"] = ValidationReport.Status.FAILED
    row, _ = ValidationReport.objects.update_or_create(paper=paper, defaults=values)
    return row


def request(paper: str) -> bool:
    """Queue a recomputation of ``paper`` once committed; False if one is already running."""
    from frontend.tasks import compute_validation

    _check_paper(paper)
    now = timezone.now()
    with transaction.atomic():
        row, created = ValidationReport.objects.select_for_update().get_or_create(
            paper=paper,
            defaults={"status": ValidationReport.Status.COMPUTING, "requested_at": now},
        )
        if not created:
            busy = (
                row.status == ValidationReport.Status.COMPUTING
                and row.requested_at is not None
                and now - row.requested_at < STALE_AFTER
            )
            if busy:
                return False
            # keep the last document on screen while the new one is computed
            ValidationReport.objects.filter(pk=row.pk).update(
                status=ValidationReport.Status.COMPUTING if row.document is None else row.status,
                requested_at=now,
                error="",
            )
        transaction.on_commit(lambda: compute_validation.delay(paper))
    return True


def reports() -> list[dict[str, Any]]:
    """Every paper with its stored report (or none yet), in the paper registry's order: its checks
    grouped by basis (``groups``, see :func:`simulations.core.reproduce.basis.grouped`),
    the counts per basis (``counts``) and the predictions headline (``headline``)."""
    rows = {r.paper: r for r in ValidationReport.objects.all()}
    titles = {p.name: p.title for p in papers()}
    out = []
    for paper in titles:
        row = rows.get(paper)
        checks = list((row.document or {}).get("checks", ())) if row is not None else []
        busy = (
            row is not None
            and row.requested_at is not None
            and (row.computed_at is None or row.requested_at > row.computed_at)
            and timezone.now() - row.requested_at < STALE_AFTER
            and row.status != ValidationReport.Status.FAILED
        )
        out.append(
            {
                "paper": paper,
                "title": titles[paper],
                "row": row,
                "checks": checks,
                "passed": sum(1 for c in checks if c.get("ok")),
                "groups": grouped(checks),
                "counts": summary(checks),
                "headline": headline(summary(checks)),
                "busy": busy,
            }
        )
    return out


def totals(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts per basis and the predictions headline over every paper of
    :func:`reports`."""
    every = [c for e in entries for c in e["checks"]]
    counts = summary(every)
    return {"counts": counts, "headline": headline(counts), "groups": grouped(every)}
