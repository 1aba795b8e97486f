"""``manage.py runstack``: the web server and Celery workers together (used by ``make run``).

Starts, as child processes with the current settings (embedded defaults unless
``DATABASE_URL`` / ``REDIS_URL`` are set):

* ``celery -A hetplanner worker -Q <jobs queue>``: runs, sweep chunks, plan stages;
* ``celery -A hetplanner worker -Q <housekeeping queue> --beat --concurrency 1``: the beat
  and the reconcilers it schedules, on their own queue so a backlog of jobs never delays
  them;
* ``manage.py runserver --noreload HOST:PORT``;

and stops them all on Ctrl-C or SIGTERM, or when any of them exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

#: Seconds a child gets to exit after SIGTERM before it is killed.
STOP_GRACE_S = 10.0


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def stop_processes(procs: list[subprocess.Popen[bytes]], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM each child (Celery then shuts its pool down warmly), SIGKILL its process group
    if it is still there after ``grace_s``, and reap whatever is left of the group."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        _signal_group(proc, signal.SIGKILL)


class Command(BaseCommand):
    """Serve the dashboard and run the Celery workers until interrupted."""

    help = "Run the web server, a Celery worker and the housekeeping worker (with beat) together."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Address to serve on.")
        parser.add_argument("--port", type=int, default=8000, help="Port to serve on.")
        parser.add_argument(
            "--concurrency", type=int, default=2, help="Worker processes of the Celery worker."
        )
        parser.add_argument("--loglevel", default="INFO", help="Celery log level.")

    def handle(self, *args: Any, **options: Any) -> None:
        python = sys.executable
        manage = Path(settings.BASE_DIR) / "manage.py"
        Path(settings.CELERY_BEAT_SCHEDULE_FILENAME).parent.mkdir(parents=True, exist_ok=True)
        celery = [python, "-m", "celery", "-A", "hetplanner", "worker"]
        quiet = ["--loglevel", options["loglevel"], "--without-gossip", "--without-mingle"]
        commands = {
            "worker": [
                *celery,
                "--queues",
                settings.CELERY_TASK_DEFAULT_QUEUE,
                "--concurrency",
                str(options["concurrency"]),
                "--hostname",
                "jobs@%h",
                *quiet,
            ],
            "housekeeping": [
                *celery,
                "--queues",
                settings.HETPLANNER_HOUSEKEEPING_QUEUE,
                "--concurrency",
                "1",
                "--hostname",
                "housekeeping@%h",
                "--beat",
                "--schedule",
                settings.CELERY_BEAT_SCHEDULE_FILENAME,
                *quiet,
            ],
            "web": [
                python,
                str(manage),
                "runserver",
                "--noreload",
                f"{options['host']}:{options['port']}",
            ],
        }
        stop = threading.Event()
        previous = {
            sig: signal.signal(sig, lambda *_: stop.set())
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        procs: dict[str, subprocess.Popen[bytes]] = {}
        exited: tuple[str, int] | None = None
        try:
            for name, cmd in commands.items():
                # Own session: Ctrl-C reaches only this command, which stops the children in
                # order instead of each of them reacting on its own.
                procs[name] = subprocess.Popen(cmd, cwd=settings.BASE_DIR, start_new_session=True)
            self.stdout.write(
                f"Serving http://{options['host']}:{options['port']}/ with a Celery worker and "
                f"a housekeeping worker (pids {procs['web'].pid}, {procs['worker'].pid}, "
                f"{procs['housekeeping'].pid}); Ctrl-C stops them all."
            )
            while not stop.wait(0.5):
                for name, proc in procs.items():
                    if proc.poll() is not None:
                        exited = (name, proc.returncode)
                        break
                if exited:
                    break
        finally:
            stop_processes(list(procs.values()))
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if exited is not None:
            raise CommandError(f"the {exited[0]} process exited with status {exited[1]}")
        self.stdout.write("Stopped.")
