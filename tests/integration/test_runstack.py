"""``manage.py runstack`` (what ``make run`` starts): web server + workers, stopped together.

However runstack is stopped — SIGTERM or SIGHUP (stopped in order, exit 0), or SIGKILL (its
children get a signal from the kernel when it dies) — no process it started survives and the
port stops answering.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
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


def port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (dead, waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their pool processes, the beat...)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@pytest.fixture
def runstack(builtin_catalog_rows: Any) -> Iterator[Any]:
    """Start runstack on a free port; yield (process, port, its descendants once serving)."""
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
    family: list[int] = []
    try:
        page = wait_for(lambda: fetch(f"http://127.0.0.1:{port}/"), timeout_s=90)
        assert "<code>a100-80gb</code>" in page
        # The web server, the jobs' worker and the housekeeping worker (with the beat).
        assert (
            len(
                subprocess.run(
                    ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
                ).stdout.split()
            )
            == 3
        )
        # Wait for the workers' own children (pool processes, beat) to be there too.
        wait_for(lambda: len(descendants(proc.pid)) >= 6, timeout_s=90)
        family.extend(descendants(proc.pid))
        yield proc, port, family
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in family:  # whatever outlived a failed test
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_runstack_serves_the_catalog_and_sigterm_stops_every_process(runstack: Any) -> None:
    proc, port, family = runstack
    css = fetch(f"http://127.0.0.1:{port}/static/frontend/site.css")
    assert css is not None and "font-family" in css
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, output.decode()[-3000:]
    assert b"Stopped." in output
    assert [pid for pid in family if alive(pid)] == []
    assert port_closed(port)


def test_sighup_stops_runstack_and_every_process_it_started(runstack: Any) -> None:
    proc, port, family = runstack
    proc.send_signal(signal.SIGHUP)  # the terminal closed
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, output.decode()[-3000:]
    assert [pid for pid in family if alive(pid)] == []
    assert port_closed(port)


def test_when_runstack_is_killed_outright_its_children_die_with_it(runstack: Any) -> None:
    proc, port, family = runstack
    proc.kill()  # SIGKILL: no handler runs, only the kernel can tell the children
    proc.wait()
    wait_for(lambda: not any(alive(pid) for pid in family), timeout_s=120)
    wait_for(lambda: port_closed(port), timeout_s=30)
