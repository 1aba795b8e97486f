"""Worker processes with short lifecycle timings, for the worker-loss tests.

Same as the session's live worker (``tests/conftest.py``: a real ``celery worker`` with the
reconciler's beat, on this session's test database and queue) but started with lower
limits through the environment, so recovery after a SIGKILL takes seconds:

* heartbeat every 0.3 s, stale after 3 s, reconciler every 0.5 s;
* soft/hard time limits 20/25 s, so the Redis visibility timeout (2 × hard) is 50 s and
  unacknowledged messages are restored every second (``hetplanner/settings/test.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.conftest import WorkerProcess

TUNED_ENV = {
    "HETPLANNER_HEARTBEAT_STALE_S": "3",
    "HETPLANNER_HEARTBEAT_INTERVAL_S": "0.3",
    "HETPLANNER_RECONCILE_INTERVAL_S": "0.5",
    "HETPLANNER_TASK_SOFT_TIME_LIMIT_S": "20",
    "HETPLANNER_TASK_HARD_TIME_LIMIT_S": "25",
}


class TunedWorker(WorkerProcess):
    """A live worker whose environment carries :data:`TUNED_ENV` (plus ``extra_env``)."""

    def __init__(self, *, extra_env: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.extra_env = {**TUNED_ENV, **(extra_env or {})}

    def env(self) -> dict[str, str]:
        env = super().env()
        env.update(self.extra_env)
        return env

    def kill_all(self) -> None:
        """SIGKILL the whole worker: main process, pool children and beat, no warm shutdown."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def pool_children(self) -> list[int]:
        """Pids of the worker's direct children (prefork pool processes and beat)."""
        if self.proc is None:
            return []
        out = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == self.proc.pid:
                    out.append(int(stat.parent.name))
        return out


@pytest.fixture(name="tuned_worker_factory")
def tuned_worker_factory_fixture(
    django_db_setup: Any, django_db_blocker: Any, tmp_path: Path
) -> Iterator[Callable[..., TunedWorker]]:
    """Start tuned workers for one test; all are stopped (or killed) when it ends."""
    started: list[TunedWorker] = []

    def start(
        *, queues: tuple[str, ...] | None = None, beat: bool = True, **extra_env: str
    ) -> TunedWorker:
        from django.db import connection

        with django_db_blocker.unblock():
            name = str(connection.settings_dict["NAME"])
        worker = TunedWorker(
            db_name=name,
            log_path=tmp_path / f"tuned{len(started)}-{settings.HETPLANNER_TEST_SESSION}.log",
            extra_env=extra_env,
            queues=queues,
            beat=beat,
        )
        started.append(worker)
        return worker.start()  # type: ignore[return-value]

    yield start
    for worker in started:
        worker.stop(grace_s=5.0)
