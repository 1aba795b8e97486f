"""``manage.py runstack`` (what ``make run`` starts): web server + worker, stopped together."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import REPO_ROOT
from tests.helpers import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def test_runstack_serves_the_catalog_and_stops_both_processes(builtin_catalog_rows: Any) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hetplanner.settings.test",
        "HETPLANNER_TEST_SESSION": settings.HETPLANNER_TEST_SESSION,
        "HETPLANNER_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runstack", "--port", str(port), "--concurrency", "1"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        page = wait_for(lambda: fetch(f"http://127.0.0.1:{port}/"), timeout_s=60)
        assert "<code>a100-80gb</code>" in page
        css = fetch(f"http://127.0.0.1:{port}/static/frontend/site.css")
        assert css is not None and "font-family" in css
        children = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        # The web server, the jobs' worker and the housekeeping worker (with the beat).
        assert len(children) == 3
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, output.decode()[-3000:]
    assert b"Stopped." in output
    for pid in children:
        assert not os.path.exists(f"/proc/{pid}"), f"child {pid} outlived runstack"
