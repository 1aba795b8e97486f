"""A large trace upload is parsed by a real worker process."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.choices import TraceParseStatus
from simulations.scenarios import services
from simulations.scenarios.models import Trace
from tests.helpers import wait_for
from tests.simulations.test_services import MINI_TRACE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_worker_parses_a_large_upload_to_done(live_worker: Any, settings: Any) -> None:
    settings.HETPLANNER_TRACE_ASYNC_BYTES = 64
    row = services.trace_import(slug="worker-big", name="big", text=MINI_TRACE)
    assert row.parse_status == TraceParseStatus.QUEUED

    def parsed() -> Trace | None:
        t = Trace.objects.get(pk=row.pk)
        return t if t.parse_status in (TraceParseStatus.DONE, TraceParseStatus.FAILED) else None

    done = wait_for(parsed, timeout_s=120)
    assert (done.parse_status, done.parse_error) == (TraceParseStatus.DONE, "")
    assert done.request_count == 3 and done.parse_attempts == 1
