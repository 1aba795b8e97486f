"""Small helpers shared by the Django-side tests."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest


def wait_for(predicate: Callable[[], Any], *, timeout_s: float, interval_s: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)


def stopped_if(pid: int, holds: Callable[[], Any]) -> Any:
    """Freeze process ``pid`` (SIGSTOP), then ask ``holds()``: if truthy, return it with the
    process left frozen (for a SIGKILL that lands while it still holds what ``holds`` saw);
    otherwise let the process go on (SIGCONT) and return None.

    A worker child finishes a chunk of work in a fraction of a second, so a kill aimed at
    "the child holding chunk X" races the child unless the child is frozen first.
    """
    os.kill(pid, signal.SIGSTOP)
    value = holds()
    if value:
        return value
    os.kill(pid, signal.SIGCONT)
    return None


def _reset_celery_pools() -> None:
    from hetplanner.celery import app

    # The app caches its connection and producer pools: drop them so the next send
    # connects to the broker URL in force now.
    if app._pool is not None:
        app._pool.force_close_all()
    app._pool = None
    app.amqp._producer_pool = None


@contextlib.contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """Point this process's Celery app at the broker ``url`` (e.g. a port where nothing
    listens) for the duration of the block."""
    from hetplanner.celery import app

    saved = app.conf.broker_url
    app.conf.broker_url = url
    _reset_celery_pools()
    try:
        yield
    finally:
        app.conf.broker_url = saved
        _reset_celery_pools()


def start_gunicorn(
    args: Sequence[str],
    *,
    port: int,
    db_name: str,
    log: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """A gunicorn process serving this test session's database ``db_name`` on ``port``
    (``args``: the app and its options after ``-m gunicorn``), once it answers ``/api/``;
    its output goes to ``log``. Fails the test if it exits or stays silent ``timeout_s``."""
    from django.conf import settings

    repo = Path(__file__).resolve().parent.parent
    full_env = dict(os.environ)
    full_env.update(
        DJANGO_SETTINGS_MODULE="hetplanner.settings.test",
        HETPLANNER_TEST_SESSION=settings.HETPLANNER_TEST_SESSION,
        HETPLANNER_DB_NAME=db_name,
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        PYTHONPATH=str(repo),
        **(env or {}),
    )
    cmd = [sys.executable, "-m", "gunicorn", *args, "--bind", f"127.0.0.1:{port}"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=repo, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"gunicorn exited:\n{log.read_text()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/")
            if conn.getresponse().status == 401:  # up: the API asks who is calling
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail(f"gunicorn did not answer within {timeout_s:g} s")
