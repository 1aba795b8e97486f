"""The schemathesis CLI against a live server: ``schemathesis run <schema url>
--checks all`` on a real gunicorn process serving this session's test database, signed in
with a real user's API token, finds no server error and no disagreement between the schema
and the server.

Every check is on (``--checks all``: server errors, status codes, content types, response
schemas and headers, schema-violating requests accepted, schema-valid requests rejected,
missing auth, methods, …) over every operation and every phase (examples, coverage,
fuzzing, stateful), with a bounded number of examples so it takes a minute or two.

Two settings are not defaults, both on purpose:

- ``--generation-allow-x00 false``: a NUL character is valid in a JSON string, but the
  server refuses it in every text (PostgreSQL cannot store it; tests/api/test_input_safety.py
  covers that refusal). Putting ``pattern: "^[^\\u0000]*$"`` on every string of the schema
  would say the same thing far more noisily.
- Throttles and quotas are lifted on the server, so generated requests exercise validation
  rather than the 429 paths (tested in test_runs.py and test_auth.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.conftest import REPO_ROOT, _test_db_name

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: Generated test cases per operation and phase (bounded: the run takes 1–3 minutes).
MAX_EXAMPLES = 5

#: Operations whose schema-valid bodies may still be refused with 400, and why. Each of them
#: carries a reference or a document that only the server's data can judge; the schema
#: describes their shape exactly, the rest is semantics:
SEMANTIC_400 = {
    # scenario and plan documents: model, device and trace slugs must exist in the catalog,
    # workload distributions must be consistent (low <= high), models must fit memory
    "POST /api/scenarios/": "a scenario document's slugs and consistency",
    "PUT /api/scenarios/{id}/": "a scenario document's slugs and consistency",
    "PATCH /api/scenarios/{id}/": "a scenario document's slugs and consistency",
    "POST /api/sweeps/": "a sweep template is a scenario document; axis paths must exist in it",
    "POST /api/plans/": "a plan document's slugs and consistency",
    # references to rows by id or slug
    "POST /api/runs/": "the scenario id must be one the user can read",
    "POST /api/workloads/": "a trace slug must exist; length distributions must be consistent",
    "PUT /api/workloads/{id}/": "a trace slug must exist; length distributions must be consistent",
    "PATCH /api/workloads/{id}/": "a trace slug must exist; distributions must be consistent",
    # file contents
    "POST /api/traces/": "the CSV text must parse as an Azure trace",
    "POST /api/measurements/": "the stack, device and model slugs must exist; CSV rows must parse",
    "POST /api/calibrations/": "the measurement set must be one the user can see; CSV must parse",
}

#: The check of "schema-valid request rejected" (positive_data_acceptance).
REJECTED_POSITIVE = "ST202"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(db_name: str) -> dict[str, str]:
    """The test settings on this session's database, with throttles and quotas lifted."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="hetplanner.settings.test",
        HETPLANNER_TEST_SESSION=settings.HETPLANNER_TEST_SESSION,
        HETPLANNER_DB_NAME=db_name,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
        HETPLANNER_MAX_ACTIVE_RUNS_PER_USER="1000000",
        HETPLANNER_MAX_ACTIVE_SWEEPS_PER_USER="1000000",
        HETPLANNER_MAX_TOKENS_PER_USER="1000000",
    )
    for name in ("USER", "ANON", "RUN_SUBMIT", "SWEEP_SUBMIT", "PLAN_SUBMIT", "UPLOAD", "TOKEN"):
        env[f"HETPLANNER_THROTTLE_{name}"] = "1000000/min"
    return env


def get_status(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.fixture
def token(user: Any) -> str:
    """A real API token of the planner alice."""
    from api.models import ApiToken, hash_key, new_key

    key = new_key()
    ApiToken.objects.create(
        user=user, name="schemathesis", key_hash=hash_key(key), key_hint=key[:10]
    )
    return key


@pytest.fixture
def live_server_url(builtin_catalog_rows: Any, token: str, tmp_path: Path) -> Iterator[str]:
    """A gunicorn process (2 sync workers) serving the test database; its URL."""
    port = free_port()
    log = (tmp_path / "gunicorn.log").open("ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "hetplanner.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--timeout",
            "120",
        ],
        cwd=REPO_ROOT,
        env=server_env(_test_db_name()),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError((tmp_path / "gunicorn.log").read_text(errors="replace"))
            with contextlib.suppress(OSError):
                if get_status(f"{url}/api/schema/", {"Authorization": f"Token {token}"}) == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not answer within 120 s")
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_schemathesis_finds_no_server_error_and_no_schema_mismatch(
    live_server_url: str, token: str, tmp_path: Path
) -> None:
    report = tmp_path / "schemathesis.json"
    cmd = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{live_server_url}/api/schema/?format=json",
        "--header",
        f"Authorization: Token {token}",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--generation-deterministic",
        "--generation-allow-x00",
        "false",
        "--continue-on-failure",
        "--workers",
        "2",
        "--request-timeout",
        "60",
        "--no-color",
        "--report",
        "json",
        "--report-json-path",
        str(report),
    ]
    proc = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    output = proc.stdout[-20000:] + proc.stderr[-5000:]
    assert report.exists(), output
    run = json.loads(report.read_text())

    assert run["complete"], output
    assert run["operations"]["tested"] >= 50, run["operations"]
    assert run["operations"]["errored"] == 0 and not run["errors"], output
    assert run["test_cases"]["generated"] > 500, run["test_cases"]
    unexpected = []
    for failure in run["failures"]:
        operations = set(failure["operations"])
        if failure["code"] == REJECTED_POSITIVE:
            operations -= set(SEMANTIC_400)
        if operations:
            unexpected.append(f"{failure['code']} {failure['title']}: {sorted(operations)}")
    assert not unexpected, "\n".join(unexpected) + "\n\n" + output
