"""REST API load benchmark: gunicorn on loopback, 20 users on list and detail
endpoints; p50/p95 latency, requests per second and errors.

The server is ``gunicorn hetplanner.wsgi`` (2 worker processes × 4 threads) on the
benchmark's test database (SQLite file by default, PostgreSQL when ``DATABASE_URL`` is set)
with the built-in catalog and, per user, 5 scenarios and 25 runs (20 of them succeeded with
their result documents). The load generator is plain Python: 20 user threads, each with its
own API token and keep-alive connection, each sending one request after another with a
uniform random think time of 0–200 ms, in a fixed rotation over list and detail endpoints
(devices, models, runtimes, policies, scenarios, runs, run results). Every response must be
200 with a JSON body; anything else counts as an error.

Targets: p95 ≤ 250 ms and zero errors on this 2-core machine.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers import start_gunicorn

USERS = 20
DURATION_S = 20.0
WARMUP_S = 2.0
THINK_S = (0.0, 0.2)
P95_TARGET_MS = 250.0
REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seed(users: int) -> list[dict[str, Any]]:
    """Users with a token, scenarios and runs; returns what each load user may request."""
    from django.contrib.auth import get_user_model

    from api.models import ApiToken, hash_key, new_key
    from simulations.adapters import catalog_from_db
    from simulations.catalog import services as catalog_services
    from simulations.core.scenario import parse_scenario
    from simulations.core.simulate import simulate
    from simulations.runs import services as run_services
    from simulations.scenarios import services as scenario_services

    catalog_services.catalog_seed()
    doc = {
        "name": "load test",
        "model": "llama3.2-3b",
        "workload": {"requests": 20, "input_tokens": 256, "output_tokens": 32, "seed": 1},
        "systems": [
            {
                "name": "a100",
                "policy": "homogeneous",
                "devices": [{"device": "a100-80gb", "count": 1}],
            },
            {
                "name": "h100",
                "policy": "homogeneous",
                "devices": [{"device": "h100-sxm", "count": 1}],
            },
        ],
    }
    result = simulate(parse_scenario(doc, catalog_from_db()))
    out = []
    for u in range(users):
        user = get_user_model().objects.create_user(f"load{u}")
        key = new_key()
        ApiToken.objects.create(user=user, name="load", key_hash=hash_key(key), key_hint=key[:10])
        scenarios = [
            scenario_services.scenario_create(owner=user, document={**doc, "name": f"s{u}-{i}"})
            for i in range(5)
        ]
        runs = []
        for i in range(25):
            run = run_services.simulation_run_create(scenario=scenarios[i % 5], owner=user)
            if i < 20:
                claim = run_services.run_claim(run.pk, worker="bench:0")
                assert claim is not None
                run_services.run_mark_succeeded(run.pk, claim.attempt, result)
            runs.append(run.pk)
        out.append({"key": key, "scenarios": [s.pk for s in scenarios], "runs": runs[:20]})
    return out


def _paths(user: dict[str, Any], rng: random.Random) -> list[str]:
    return [
        "/api/devices/",
        "/api/devices/a100-80gb/",
        "/api/models/",
        f"/api/runs/{rng.choice(user['runs'])}/",
        "/api/runs/?status=succeeded",
        f"/api/scenarios/{rng.choice(user['scenarios'])}/",
        "/api/scenarios/",
        f"/api/runs/{rng.choice(user['runs'])}/result/",
        "/api/runtimes/",
        "/api/policies/homogeneous/",
        "/api/runs/",
        "/api/models/llama2-7b/",
    ]


class LoadUser(threading.Thread):
    """One simulated user: a keep-alive connection, requests in rotation with think time."""

    def __init__(self, port: int, user: dict[str, Any], seed: int, stop_at: float) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.user = user
        self.rng = random.Random(seed)
        self.stop_at = stop_at
        self.samples: list[tuple[float, float, bool]] = []  # (start, latency s, ok)
        self.failures: list[str] = []

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": f"Token {self.user['key']}", "Accept": "application/json"}
        i = self.rng.randrange(100)
        while time.monotonic() < self.stop_at:
            path = _paths(self.user, self.rng)[i % 12]
            i += 1
            start = time.monotonic()
            ok = False
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                body = response.read()
                ok = response.status == 200 and bool(json.loads(body))
                if not ok:
                    self.failures.append(f"{path}: {response.status} {body[:200]!r}")
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self.failures.append(f"{path}: {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.samples.append((start, time.monotonic() - start, ok))
            time.sleep(self.rng.uniform(*THINK_S))
        conn.close()


def _start_gunicorn(port: int, db_name: str, log: Path) -> subprocess.Popen[bytes]:
    args = ["hetplanner.wsgi:application", "--workers", "2", "--threads", "4"]
    args += ["--worker-class", "gthread", "--log-level", "warning"]
    return start_gunicorn(args, port=port, db_name=db_name, log=log, timeout_s=60)


def test_bench_api_20_users_on_gunicorn(
    benchmark: Any, transactional_db: Any, tmp_path: Path
) -> None:
    from django.db import connection

    from benchmarks.report import record

    users = _seed(USERS)
    port = _free_port()
    server = _start_gunicorn(port, str(connection.settings_dict["NAME"]), tmp_path / "gunicorn.log")
    stats: dict[str, Any] = {}

    def load() -> None:
        begin = time.monotonic()
        threads = [
            LoadUser(port, users[u], seed=u, stop_at=begin + WARMUP_S + DURATION_S)
            for u in range(USERS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        measured = [s for t in threads for s in t.samples if s[0] >= begin + WARMUP_S]
        latencies = np.array([s[1] for s in measured]) * 1e3
        stats.update(
            requests=len(measured),
            errors=sum(1 for s in measured if not s[2]),
            failures=[f for t in threads for f in t.failures][:5],
            p50=float(np.percentile(latencies, 50)),
            p95=float(np.percentile(latencies, 95)),
            rps=len(measured) / DURATION_S,
        )

    try:
        benchmark.pedantic(load, rounds=1, iterations=1)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
    assert stats["requests"] > 0
    benchmark.extra_info.update(
        name=f"api: p95 latency, {USERS} users, list+detail, gunicorn",
        unit="ms",
        value=stats["p95"],
        target=P95_TARGET_MS,
    )
    record(
        f"api: p50 latency, {USERS} users",
        stats["p50"],
        "ms",
        P95_TARGET_MS,
        higher_is_better=False,
    )
    record(
        f"api: requests/s, {USERS} users (think time 0-200 ms)",
        stats["rps"],
        "req/s",
        # The offered load if every response took no time: 20 users / 0.1 s mean think time
        # would be 200 req/s; ask for at least half of it.
        USERS / (sum(THINK_S) / 2) / 2,
        higher_is_better=True,
    )
    record(
        f"api: errors in {stats['requests']} requests",
        stats["errors"],
        "count",
        0,
        higher_is_better=False,
    )
    assert stats["errors"] == 0, stats["failures"]
