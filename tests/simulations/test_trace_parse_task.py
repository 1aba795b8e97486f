"""Large trace uploads are parsed by a worker: the upload stores the
trace ``queued`` after cheap checks, the ``parse_trace`` task claims it with one
conditional update and stores the columns (``done``) or the line at fault (``failed``)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.core.exceptions import ValidationError

from simulations.adapters import traces_from_db
from simulations.choices import TraceParseStatus
from simulations.core.scenario import MAX_TRACE_ROWS
from simulations.scenarios import services, tasks
from simulations.scenarios.models import Trace
from tests.simulations.test_services import MINI_TRACE

pytestmark = pytest.mark.django_db

ASYNC_ABOVE = 64  # bytes: MINI_TRACE (three rows) is larger, so it goes to the worker


@pytest.fixture
def small_threshold(settings: Any) -> None:
    settings.HETPLANNER_TRACE_ASYNC_BYTES = ASYNC_ABOVE


def _task(trace_id: int) -> str:
    """The task run in this process (its connection clean-up would close the test's
    transaction, so it is skipped here; tests/integration runs it in a real worker)."""
    with mock.patch.object(tasks, "close_old_connections"):
        return str(tasks.parse_trace.apply(args=[trace_id]).get())


def _queued(slug: str, text: str, capture: Any) -> Trace:
    with capture(execute=False) as callbacks:
        row = services.trace_import(slug=slug, name=slug, text=text.encode())
    assert len(callbacks) == 1  # the task is sent when the upload's transaction commits
    return row


def test_a_large_upload_is_stored_queued_and_parsed_by_the_task(
    small_threshold: None, django_capture_on_commit_callbacks: Any
) -> None:
    row = _queued("big", MINI_TRACE, django_capture_on_commit_callbacks)
    row.refresh_from_db()
    assert row.parse_status == TraceParseStatus.QUEUED
    assert row.request_count is None and row.data is None
    assert traces_from_db(["big"]) == {}  # not usable before it is parsed

    assert _task(row.pk) == "done"
    row.refresh_from_db()
    assert row.parse_status == TraceParseStatus.DONE
    assert row.request_count == 3
    assert row.data["input_tokens"] == [374, 396, 879]
    assert row.upload_text == "" and row.parse_error == ""
    assert row.parse_attempts == 1
    assert traces_from_db(["big"])["big"].input_tokens == (374, 396, 879)


def test_a_bad_large_upload_fails_naming_the_line(
    small_threshold: None, django_capture_on_commit_callbacks: Any
) -> None:
    row = _queued("bad", MINI_TRACE.replace("396", "-4"), django_capture_on_commit_callbacks)
    assert _task(row.pk) == "failed"
    row.refresh_from_db()
    assert row.parse_status == TraceParseStatus.FAILED
    assert "line 3" in row.parse_error and "ContextTokens" in row.parse_error
    assert row.request_count is None and row.upload_text == ""


def test_a_trace_is_claimed_for_parsing_once(
    small_threshold: None, django_capture_on_commit_callbacks: Any
) -> None:
    row = _queued("once", MINI_TRACE, django_capture_on_commit_callbacks)
    assert services.trace_parse_claim(row.pk) == 1
    assert services.trace_parse_claim(row.pk) is None  # held by the first attempt
    # a redelivered message for a parsed trace does nothing
    assert services.trace_parse_run(row.pk, 1) == "done"
    assert _task(row.pk) == "skipped"
    assert Trace.objects.get(pk=row.pk).parse_attempts == 1


def test_a_large_upload_past_the_row_cap_or_with_a_bad_header_is_refused_at_once(
    small_threshold: None,
) -> None:
    rows = "\r\n".join("2023-11-16 18:15:46.1,5,5" for _ in range(MAX_TRACE_ROWS + 1))
    with pytest.raises(ValidationError) as err:
        services.trace_import(
            slug="huge", name="huge", text=f"TIMESTAMP,ContextTokens,GeneratedTokens\r\n{rows}"
        )
    assert f"line {MAX_TRACE_ROWS + 2}" in err.value.message_dict["text"][0]
    assert f"at most {MAX_TRACE_ROWS} rows" in err.value.message_dict["text"][0]
    with pytest.raises(ValidationError, match="header"):
        services.trace_import(slug="hdr", name="hdr", text="time,in,out\n" + rows[:200])
    with pytest.raises(ValidationError, match="NUL"):
        services.trace_import(slug="nul", name="nul", text=MINI_TRACE + "\x00" * 10)
    assert not Trace.objects.exists()


def test_a_small_upload_is_still_parsed_in_the_request() -> None:
    row = services.trace_import(slug="mini", name="mini", text=MINI_TRACE)
    assert row.parse_status == TraceParseStatus.DONE and row.request_count == 3


def test_an_upload_whose_message_could_not_be_sent_is_resent_by_the_reconciler(
    small_threshold: None, django_capture_on_commit_callbacks: Any
) -> None:
    # the broker is down when the upload commits: the row stays queued, marked unsent
    down = mock.patch.object(tasks.parse_trace, "delay", side_effect=OSError("broker down"))
    with down, django_capture_on_commit_callbacks(execute=True):
        row = services.trace_import(slug="lost", name="lost", text=MINI_TRACE.encode())
    row.refresh_from_db()
    assert row.parse_status == TraceParseStatus.QUEUED
    assert row.enqueued_at is None

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = services.traces_reconcile()
    assert report.resent == [row.pk] and len(callbacks) == 1
    row.refresh_from_db()
    assert row.enqueued_at is not None
    # sent just now: the next pass leaves it alone
    assert services.traces_reconcile().resent == []
    assert _task(row.pk) == "done"


def test_a_parse_whose_worker_died_is_resent_once_past_the_time_limit(
    small_threshold: None, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    row = _queued("stuck", MINI_TRACE, django_capture_on_commit_callbacks)
    assert services.trace_parse_claim(row.pk) == 1  # a worker claimed it, then died
    assert services.traces_reconcile().resent == []  # still within its time limit
    later = timezone.now() + timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 120)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = services.traces_reconcile(now=later)
    assert report.resent == [row.pk] and len(callbacks) == 1
    assert services.trace_parse_claim(row.pk, now=later) == 2
