"""``manage.py runstack``: the web server and Celery workers together (used by ``make run``).

Starts, as child processes with the current settings (embedded defaults unless
``DATABASE_URL`` / ``REDIS_URL`` are set):

* ``celery -A hetplanner worker -Q <jobs queue>``: runs, sweep chunks, plan stages;
* ``celery -A hetplanner worker -Q <housekeeping queue> --beat --concurrency 1``: the beat
  and the reconcilers it schedules, on their own queue so a backlog of jobs never delays
  them;
* ``manage.py runserver --noreload HOST:PORT``;

and stops them all on Ctrl-C, SIGTERM or SIGHUP, or when any of them exits. Each child runs
in its own session (a Ctrl-C reaches only this command, which stops the children in order)
and, on Linux, asks the kernel to SIGTERM it when this command dies: a ``kill -9`` of
runstack, or of ``make run``'s whole process group, leaves no server answering.
"""

from __future__ import annotations

import contextlib
import functools
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

#: Signals that stop the stack (SIGHUP: the terminal running ``make run`` went away).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent (pid ``parent``) dies
    (Linux ``prctl(PR_SET_PDEATHSIG)``; elsewhere nothing). Meant for ``preexec_fn``: it runs
    in the child between fork and exec, and the setting survives the exec."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(sig), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), sig)


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
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
        procs: dict[str, subprocess.Popen[bytes]] = {}
        exited: tuple[str, int] | None = None
        try:
            for name, cmd in commands.items():
                # Own session: Ctrl-C reaches only this command, which stops the children in
                # order instead of each of them reacting on its own. Being in another session
                # also means a signal to our process group never reaches them, so each asks
                # the kernel for a SIGTERM should this command die without stopping them.
                procs[name] = subprocess.Popen(
                    cmd,
                    cwd=settings.BASE_DIR,
                    start_new_session=True,
                    preexec_fn=functools.partial(die_with_parent, os.getpid()),
                )
                if stop.is_set():  # stopped while starting: stop what is running
                    break
            else:
                self.stdout.write(
                    f"Serving http://{options['host']}:{options['port']}/ with a Celery worker "
                    f"and a housekeeping worker (pids {procs['web'].pid}, {procs['worker'].pid}, "
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
