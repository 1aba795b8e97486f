"""Shared fixtures: user personas, catalogs, and a live Celery worker process.

The live worker is a real ``celery -A hetplanner worker`` process (prefork pool, not eager
mode) pointed at this session's test database — SQLite file or PostgreSQL — and at this
session's broker queue (filesystem transport, or Redis when ``REDIS_URL`` is set). Tests
that use it must be ``@pytest.mark.django_db(transaction=True)`` so their writes are
committed where the worker can see them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

REPO_ROOT = Path(__file__).resolve().parent.parent


# --- personas --------------------------------------------------------------------------------


@pytest.fixture
def user(db: Any) -> Any:
    """A planner who owns scenarios and runs."""
    from tests.factories import UserFactory

    return UserFactory(username="alice")


@pytest.fixture
def other_user(db: Any) -> Any:
    """A second planner, to check that private rows stay private."""
    from tests.factories import UserFactory

    return UserFactory(username="bob")


@pytest.fixture
def staff(db: Any) -> Any:
    """A staff member who maintains the catalog."""
    from tests.factories import StaffFactory

    return StaffFactory(username="carol")


# --- catalogs --------------------------------------------------------------------------------


@pytest.fixture
def fixture_catalog_rows(db: Any) -> Any:
    """The records of ``tests/catalog_records.py`` stored through the seeding service."""
    from simulations.catalog.services import catalog_seed
    from tests.catalog_records import records

    return catalog_seed(**records())


@pytest.fixture
def builtin_catalog_rows(db: Any) -> Any:
    """The built-in catalog (``simulations/core/data``) stored through the seeding service."""
    from simulations.catalog.services import catalog_seed

    return catalog_seed()


# --- live worker -----------------------------------------------------------------------------


class WorkerProcess:
    """A ``celery worker`` child process of the test session (with the reconciler's beat).

    By default it consumes both of the session's queues — the jobs' and the housekeeping
    one the reconcilers are routed to — and runs the beat; ``queues`` and ``beat`` start a
    worker with a narrower role (e.g. housekeeping only, as in a deployment).
    """

    def __init__(
        self,
        *,
        db_name: str,
        log_path: Path,
        imports: tuple[str, ...] = (),
        queues: tuple[str, ...] | None = None,
        beat: bool = True,
    ) -> None:
        self.db_name = db_name
        self.log_path = log_path
        self.imports = imports
        self.queues = queues or (
            settings.CELERY_TASK_DEFAULT_QUEUE,
            settings.HETPLANNER_HOUSEKEEPING_QUEUE,
        )
        self.beat = beat
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="hetplanner.settings.test",
            HETPLANNER_TEST_SESSION=settings.HETPLANNER_TEST_SESSION,
            HETPLANNER_DB_NAME=self.db_name,
            HETPLANNER_WORKER_IMPORTS=",".join(self.imports),
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
        )
        return env

    def start(self, timeout_s: float = 60.0) -> WorkerProcess:
        """Start the worker and wait until it reports ready."""
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "hetplanner",
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            "1",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--queues",
            ",".join(self.queues),
            *(
                ["--beat", "--schedule", str(self.log_path.with_suffix(".beat"))]
                if self.beat
                else []
            ),
            "--hostname",
            f"test-{settings.HETPLANNER_TEST_SESSION}-{self.log_path.stem}@%h",
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.log_text()}")
            if " ready." in self.log_text():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"celery worker not ready after {timeout_s} s:\n{self.log_text()}")

    def log_text(self) -> str:
        """Everything the worker logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, grace_s: float = 15.0) -> None:
        """Warm shutdown (SIGTERM to the process group), then SIGKILL what is left."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        # Pool children and the beat process share the group; make sure none survives.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _test_db_name() -> str:
    from django.db import connection

    return str(connection.settings_dict["NAME"])


@pytest.fixture(scope="session")
def live_worker_factory(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start extra worker processes on this session's test database and queue."""
    started: list[WorkerProcess] = []
    logs = tmp_path_factory.mktemp("workers")

    def start(imports: tuple[str, ...] = ()) -> WorkerProcess:
        with django_db_blocker.unblock():
            name = _test_db_name()
        worker = WorkerProcess(
            db_name=name, log_path=logs / f"worker{len(started)}.log", imports=imports
        )
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def live_worker(live_worker_factory: Callable[..., WorkerProcess]) -> WorkerProcess:
    """One worker process for the session."""
    return live_worker_factory()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove this session's scratch folder (SQLite test file, broker queue, beat file)."""
    tmp = getattr(settings, "TEST_TMP_DIR", None)
    if tmp is not None and Path(tmp).name.startswith("hetplanner-test-"):
        shutil.rmtree(tmp, ignore_errors=True)
