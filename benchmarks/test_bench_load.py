"""Load benchmark of pages and API: 20 signed-in users on a real gunicorn
for a fixed duration; p50/p95/max latency and errors per endpoint group, and what else ran.

The server is gunicorn with the project's configuration (``hetplanner/gunicorn.py``: the
worker class, workers and threads deployed) on the benchmark's test database (PostgreSQL
when ``DATABASE_URL`` is set) holding the built-in catalog and, per user, one scenario and
two succeeded runs of the 10-system LLaMA2-7B comparison of ``test_bench_pages`` (a result
document of about 1 MB of JSON, the run page the issue measured at 828 KB).

The load generator is plain Python: 20 user threads, each signed in (its own session
cookie) on its own keep-alive connection, sending one request after another with a uniform
0–200 ms think time, in a fixed rotation over the dashboard, the catalog pages (overview,
device and model lists and details), the run list, the run page — followed, as a browser
does, by every figure or chart-data URL the page asks for (``data-figure-src``) — and API
lists and details. A request is an error unless it answers 200 (JSON for the API).

Duration: 60 s (``HETPLANNER_BENCH_LOAD_S`` overrides, e.g. 15 for a quick look), after
2 s of warm-up. The machine is shared: the report prints the load average before and after
and the other processes that used the CPU during the run (from ``/proc``), so a figure can
be read against what ran beside it. Target: p95 ≤ 250 ms over all requests and 0 errors.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import start_gunicorn

USERS = 20
DURATION_S = float(os.environ.get("HETPLANNER_BENCH_LOAD_S", "60"))
WARMUP_S = 2.0
THINK_S = (0.0, 0.2)
P95_TARGET_MS = 250.0
REPO = Path(__file__).resolve().parent.parent
GUNICORN_CONFIG = REPO / "hetplanner" / "gunicorn.py"
REPORT = REPO / ".bench" / "load.json"
_FIGURE_SRC = re.compile(rb'data-figure-src="([^"]+)"')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seed(users: int) -> list[dict[str, Any]]:
    """Signed-in users with a scenario and two succeeded runs each; returns per user its
    session cookie and ids."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from benchmarks.test_bench_pages import DOCUMENT
    from simulations.catalog import services as catalog_services
    from simulations.core.simulate import simulate
    from simulations.runs import services as run_services
    from simulations.scenarios import services as scenario_services

    catalog_services.catalog_seed()
    result = simulate(scenario_services.scenario_validate(DOCUMENT))
    out = []
    for u in range(users):
        user = get_user_model().objects.create_user(f"load{u}", password="x")
        scenario = scenario_services.scenario_create(
            owner=user, document={**DOCUMENT, "name": f"s{u}"}
        )
        runs = []
        for _ in range(2):
            run = run_services.simulation_run_create(scenario=scenario, owner=user)
            claim = run_services.run_claim(run.pk, worker="bench:load")
            assert claim is not None
            run_services.run_mark_succeeded(run.pk, claim.attempt, result)
            runs.append(run.pk)
        client = Client()
        client.force_login(user)  # a real session row, as after signing in
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        out.append({"cookie": cookie, "scenario": scenario.pk, "runs": runs})
    return out


def _rotation(user: dict[str, Any], rng: random.Random) -> list[tuple[str, str]]:
    """(group, path) pairs one user cycles through."""
    run = rng.choice(user["runs"])
    return [
        ("dashboard", "/"),
        ("catalog list", "/catalog/devices/"),
        ("api list", "/api/devices/"),
        ("catalog detail", "/catalog/devices/a100-80gb/"),
        ("run page", f"/runs/{run}/"),
        ("api detail", f"/api/runs/{run}/"),
        ("catalog list", "/catalog/"),
        ("api list", "/api/models/"),
        ("catalog detail", "/catalog/models/llama2-7b/"),
        ("catalog list", "/catalog/models/"),
        ("api detail", "/api/devices/h100-sxm/"),
        ("run list", "/runs/"),
        ("api list", "/api/runs/"),
        ("api detail", f"/api/scenarios/{user['scenario']}/"),
        ("api list", "/api/scenarios/"),
        ("catalog detail", "/catalog/devices/u280/"),
    ]


class LoadUser(threading.Thread):
    """One signed-in user: a keep-alive connection, requests in rotation with think time."""

    def __init__(self, port: int, user: dict[str, Any], seed: int, stop_at: float) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.user = user
        self.rng = random.Random(seed)
        self.stop_at = stop_at
        self.samples: list[tuple[str, float, float, bool, int]] = []  # group, start, s, ok, bytes
        self.failures: list[str] = []
        self.conn = self._connect()

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def _get(self, group: str, path: str) -> bytes:
        from django.conf import settings

        headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={self.user['cookie']}"}
        api = path.startswith("/api/") or path.endswith(".json")
        if api:
            headers["Accept"] = "application/json"
        start = time.monotonic()
        ok, body = False, b""
        try:
            self.conn.request("GET", path, headers=headers)
            response = self.conn.getresponse()
            body = response.read()
            ok = response.status == 200 and (not api or json.loads(body) is not None)
            if not ok:
                self.failures.append(f"{path}: {response.status} {body[:200]!r}")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.failures.append(f"{path}: {exc!r}")
            self.conn.close()
            self.conn = self._connect()
        self.samples.append((group, start, time.monotonic() - start, ok, len(body)))
        return body

    def run(self) -> None:
        i = self.rng.randrange(100)
        while time.monotonic() < self.stop_at:
            rotation = _rotation(self.user, self.rng)
            group, path = rotation[i % len(rotation)]
            i += 1
            body = self._get(group, path)
            if group == "run page":
                # what a browser asks for next: the figures and chart data the page loads
                for src in _FIGURE_SRC.findall(body):
                    self._get("run page data", src.decode().replace("&amp;", "&"))
            time.sleep(self.rng.uniform(*THINK_S))
        self.conn.close()


def _start_gunicorn(port: int, db_name: str, log: Path) -> subprocess.Popen[bytes]:
    args = ["-c", str(GUNICORN_CONFIG), "hetplanner.wsgi:application", "--log-level", "warning"]
    env = {
        "GUNICORN_ACCESSLOG": "",
        # the deployed setting (base.py); the test settings default to 0 for the test suite
        "DATABASE_CONN_MAX_AGE": os.environ.get("DATABASE_CONN_MAX_AGE", "60"),
    }
    return start_gunicorn(args, port=port, db_name=db_name, log=log, timeout_s=90, env=env)


# --- what else ran: CPU time per process from /proc --------------------------------------------


def _cpu_times() -> dict[int, tuple[float, str]]:
    """CPU seconds (user + system) and command line of every process readable in /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[float, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(entry.name)] = ((int(fields[11]) + int(fields[12])) / tick, cmd.strip()[:120])
    return out


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it (from the parent ids in /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return found


def _busy_others(
    before: dict[int, tuple[float, str]],
    after: dict[int, tuple[float, str]],
    ours: set[int],
    db_name: str,
) -> list[dict[str, Any]]:
    """Processes outside this benchmark that used at least 2% of a core during the run
    (PostgreSQL backends serving the benchmark's database count as the benchmark's)."""
    span = WARMUP_S + DURATION_S
    rows = []
    for pid, (cpu, cmd) in after.items():
        if pid in ours or f" {db_name} " in f" {cmd} ":
            continue
        used = cpu - before.get(pid, (0.0, ""))[0]
        if used / span >= 0.02:
            rows.append({"pid": pid, "cpu_pct": round(100 * used / span, 1), "cmd": cmd})
    return sorted(rows, key=lambda r: -r["cpu_pct"])[:12]


def _loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _stats(samples: list[tuple[str, float, float, bool, int]]) -> dict[str, Any]:
    lat = np.array([s[2] for s in samples]) * 1e3
    return {
        "requests": len(samples),
        "errors": sum(1 for s in samples if not s[3]),
        "p50_ms": round(float(np.percentile(lat, 50)), 1),
        "p95_ms": round(float(np.percentile(lat, 95)), 1),
        "max_ms": round(float(lat.max()), 1),
        "mean_kb": round(float(np.mean([s[4] for s in samples])) / 1024, 1),
    }


def test_bench_load_20_users_pages_and_api(
    benchmark: Any, transactional_db: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from django.db import connection

    from benchmarks.report import record

    users = _seed(USERS)
    port = _free_port()
    server = _start_gunicorn(port, str(connection.settings_dict["NAME"]), tmp_path / "gunicorn.log")
    report: dict[str, Any] = {}

    def load() -> None:
        begin = time.monotonic()
        threads = [
            LoadUser(port, users[u], seed=u, stop_at=begin + WARMUP_S + DURATION_S)
            for u in range(USERS)
        ]
        ours = _descendants(os.getpid())
        load_before, cpu_before = _loadavg(), _cpu_times()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu_after, load_after = _cpu_times(), _loadavg()
        ours |= _descendants(os.getpid())
        measured = [s for t in threads for s in t.samples if s[1] >= begin + WARMUP_S]
        groups = sorted({s[0] for s in measured})
        report.update(
            duration_s=DURATION_S,
            users=USERS,
            server=f"gunicorn -c {GUNICORN_CONFIG.relative_to(REPO)}",
            database=connection.vendor,
            overall=_stats(measured),
            groups={g: _stats([s for s in measured if s[0] == g]) for g in groups},
            failures=[f for t in threads for f in t.failures][:10],
            loadavg_before=load_before,
            loadavg_after=load_after,
            cpu_count=os.cpu_count(),
            others_busy=_busy_others(
                cpu_before, cpu_after, ours, str(connection.settings_dict["NAME"])
            ),
        )

    try:
        benchmark.pedantic(load, rounds=1, iterations=1)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2))
    with capsys.disabled():  # the table belongs on the terminal of `make bench`
        _print(report)
    overall = report["overall"]
    assert overall["requests"] > 0
    benchmark.extra_info.update(
        name=f"load: p95 latency, {USERS} users, pages + API, {DURATION_S:g} s",
        unit="ms",
        value=overall["p95_ms"],
        target=P95_TARGET_MS,
    )
    for group, s in report["groups"].items():
        record(f"load: p95 {group}", s["p95_ms"], "ms", P95_TARGET_MS, higher_is_better=False)
    record(
        f"load: errors in {overall['requests']} requests",
        overall["errors"],
        "count",
        0,
        higher_is_better=False,
    )
    assert overall["errors"] == 0, report["failures"]


def _print(report: dict[str, Any]) -> None:
    """The report on the terminal (also in .bench/load.json)."""
    lines = [
        f"\nload: {report['users']} users, {report['duration_s']:g} s, {report['server']}, "
        f"{report['database']}, {report['cpu_count']} CPUs",
        f"{'group':<16} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'max ms':>8} {'KB':>8}",
    ]
    for name, s in [*report["groups"].items(), ("ALL", report["overall"])]:
        lines.append(
            f"{name:<16} {s['requests']:>8} {s['errors']:>6} {s['p50_ms']:>8} {s['p95_ms']:>8} "
            f"{s['max_ms']:>8} {s['mean_kb']:>8}"
        )
    lines.append(f"loadavg before: {report['loadavg_before']}  after: {report['loadavg_after']}")
    lines.append("other processes using the CPU during the run (% of one core):")
    lines += [f"  {r['cpu_pct']:>5}%  {r['pid']:>7}  {r['cmd']}" for r in report["others_busy"]]
    if report["failures"]:
        lines.append(f"failures (first 10): {report['failures']}")
    print("\n".join(lines))
