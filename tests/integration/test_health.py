"""Real worker and beat processes write the heartbeats ``/healthz`` reads: healthy while they
run, 503 naming them once they are killed."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tests.helpers import wait_for
from tests.integration.tuned_workers import tuned_worker_factory_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_healthz_follows_a_real_worker_and_beat(tuned_worker_factory: Any, settings: Any) -> None:
    settings.HETPLANNER_PROCESS_STALE_S = 5.0
    client = Client()
    assert client.get("/healthz").status_code == 503  # nothing runs yet
    worker = tuned_worker_factory(HETPLANNER_PROCESS_HEARTBEAT_S="0.5")
    body = wait_for(
        lambda: (r := client.get("/healthz")).status_code == 200 and r.json(), timeout_s=60
    )
    assert body["checks"]["worker"]["name"].startswith("test-")
    for role in ("worker", "beat"):
        call_command("healthcheck", role=role, stdout=StringIO())  # raises if unhealthy

    worker.kill_all()
    # Both go stale (their last beats were up to one interval apart).
    checks = wait_for(
        lambda: (
            (c := client.get("/healthz").json()["checks"])
            and not c["worker"]["ok"]
            and not c["beat"]["ok"]
            and c
        ),
        timeout_s=60,
    )
    assert client.get("/healthz").status_code == 503
    assert checks["database"]["ok"] and checks["broker"]["ok"]
