"""``/healthz`` and ``manage.py healthcheck``: database, broker and the
heartbeats of the jobs' worker, the housekeeping worker and beat."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from ops.models import ProcessRole
from ops.services import process_heartbeat
from tests.helpers import celery_broker

pytestmark = pytest.mark.django_db


def beat(
    role: str, name: str, *, queues: tuple[str, ...] = (), age_s: float = 0.0, host: str = ""
) -> None:
    now = timezone.now()
    process_heartbeat(
        role=role,
        name=name,
        hostname=host or socket.gethostname(),
        pid=1,
        queues=queues,
        started_at=now - timedelta(hours=1),
        now=now - timedelta(seconds=age_s),
    )


def all_alive(worker_age_s: float = 0.0) -> None:
    beat(
        ProcessRole.WORKER,
        "jobs@h",
        queues=(settings.CELERY_TASK_DEFAULT_QUEUE,),
        age_s=worker_age_s,
    )
    beat(ProcessRole.WORKER, "housekeeping@h", queues=(settings.HETPLANNER_HOUSEKEEPING_QUEUE,))
    beat(ProcessRole.BEAT, "beat@h")


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_healthz_answers_200_without_sign_in_when_everything_is_alive() -> None:
    all_alive()
    response = Client().get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "broker", "worker", "housekeeping", "beat"}
    assert body["checks"]["worker"]["name"] == "jobs@h"
    assert response["Cache-Control"].startswith("max-age=0")


def test_healthz_answers_503_naming_a_stale_worker_and_its_age() -> None:
    all_alive(worker_age_s=settings.HETPLANNER_PROCESS_STALE_S + 30)
    response = Client().get("/healthz/")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["worker"]["ok"] is False
    assert checks["worker"]["age_s"] >= settings.HETPLANNER_PROCESS_STALE_S + 30
    assert checks["housekeeping"]["ok"] and checks["beat"]["ok"] and checks["database"]["ok"]


def test_healthz_answers_503_when_no_worker_consumes_the_housekeeping_queue() -> None:
    beat(ProcessRole.WORKER, "jobs@h", queues=(settings.CELERY_TASK_DEFAULT_QUEUE,))
    beat(ProcessRole.BEAT, "beat@h")
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["housekeeping"] == {
        "ok": False,
        "age_s": None,
        "stale_after_s": settings.HETPLANNER_PROCESS_STALE_S,
    }


def test_healthz_answers_503_when_the_broker_is_down() -> None:
    all_alive()
    with celery_broker(f"redis://127.0.0.1:{unused_port()}/0"):
        response = Client().get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["broker"]["ok"] is False and "error" in checks["broker"]
    assert "127.0.0.1" not in json.dumps(checks)  # no connection details leak
    assert checks["database"]["ok"] and checks["worker"]["ok"]


def test_the_worker_and_beat_healthchecks_look_at_this_host_only() -> None:
    beat(ProcessRole.WORKER, "celery@elsewhere", queues=("q",), host="elsewhere")
    with pytest.raises(CommandError):
        call_command("healthcheck", role="worker", stdout=StringIO())
    beat(ProcessRole.WORKER, "celery@here", queues=("q",))
    out = StringIO()
    call_command("healthcheck", role="worker", stdout=out)
    assert json.loads(out.getvalue())["ok"] is True
    with pytest.raises(CommandError):
        call_command("healthcheck", role="beat", stdout=StringIO())
    beat(ProcessRole.BEAT, "beat@here", age_s=settings.HETPLANNER_PROCESS_STALE_S + 1)
    with pytest.raises(CommandError):
        call_command("healthcheck", role="beat", stdout=StringIO())


@pytest.mark.django_db(transaction=True)
def test_the_web_healthcheck_reads_healthz_and_passes_while_only_workers_are_down(
    live_server: Any,
) -> None:
    out = StringIO()
    # No worker or beat heartbeat: /healthz answers 503, but the web process serves.
    call_command("healthcheck", role="web", url=f"{live_server.url}/healthz", stdout=out)
    result = json.loads(out.getvalue())
    assert result["ok"] is True and result["status"] == 503
    with pytest.raises(CommandError):
        call_command(
            "healthcheck",
            role="web",
            url=f"http://127.0.0.1:{unused_port()}/healthz",
            timeout=2,
            stdout=StringIO(),
        )
