"""``manage.py healthcheck --role web|worker|beat``: exit 0 when this container's process is
healthy, 1 otherwise (compose healthchecks run it; the detail is printed as JSON).

* ``web``: the HTTP server answers ``/healthz`` on this host and reports the database
  reachable (a 503 because workers are down still means the web process serves);
* ``worker``: a worker process on this host wrote its heartbeat within
  ``HETPLANNER_PROCESS_STALE_S`` seconds;
* ``beat``: likewise for beat.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ops.models import ProcessRole
from ops.selectors import database_check, process_check, this_host


def _host_header() -> str:
    """A host name the web process accepts (its first concrete ALLOWED_HOSTS entry)."""
    for host in settings.ALLOWED_HOSTS:
        if host and host != "*" and not host.startswith("."):
            return host
    return "localhost"


def web_check(url: str, timeout_s: float) -> dict[str, Any]:
    """GET ``url`` as the proxy would (HTTPS already terminated) and read its report."""
    request = urllib.request.Request(
        url, headers={"Host": _host_header(), "X-Forwarded-Proto": "https"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:  # 503: the server answered, some check failed
        status, body = exc.code, exc.read()
    except OSError as exc:
        return {"ok": False, "error": f"no answer from {url}: {type(exc).__name__}"}
    try:
        report = json.loads(body)
        database_ok = bool(report["checks"]["database"]["ok"])
    except (ValueError, KeyError, TypeError):
        return {"ok": False, "status": status, "error": "not a health report"}
    return {"ok": database_ok, "status": status, "report": report}


class Command(BaseCommand):
    """Exit 0 if this host's process of the given role is healthy."""

    help = "Health of this host's web, worker or beat process (exit 0 healthy, 1 not)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--role", required=True, choices=["web", "worker", "beat"])
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000/healthz", help="The web role's /healthz."
        )
        parser.add_argument("--timeout", type=float, default=5.0, help="Seconds (web role).")

    def handle(self, *args: Any, **options: Any) -> None:
        role = options["role"]
        if role == "web":
            check = web_check(options["url"], options["timeout"])
        else:
            check = database_check()
            if check["ok"]:
                kind = ProcessRole.WORKER if role == "worker" else ProcessRole.BEAT
                check = process_check(kind, hostname=this_host())
        self.stdout.write(json.dumps({"role": role, **check}))
        if not check["ok"]:
            raise CommandError(f"{role} unhealthy")
