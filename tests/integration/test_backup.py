"""Backup and restore, as the README's "Backup and restore" section documents them:
a dump of a populated database restored into an EMPTY database holds the same number of rows
of every model.

* ``dumpdata`` / ``loaddata`` (SQLite's way; works on PostgreSQL too): the new database is
  created by ``migrate``, then loaded;
* ``pg_dump -Fc`` / ``pg_restore`` (PostgreSQL's way): restored into a freshly created
  database. Skipped on SQLite or when the client tools are not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from api.models import ApiToken
from ops.models import ProcessRole
from ops.services import process_heartbeat
from simulations.plans import services as plan_services
from simulations.plans.models import PlanResult
from simulations.runs import services as run_services
from simulations.scenarios import services as scenario_services
from simulations.sweeps import services as sweep_services
from simulations.sweeps.models import SweepResult
from tests.conftest import REPO_ROOT
from tests.core.planner.helpers import small_doc
from tests.factories import SimulationRunFactory, TraceFactory, UserFactory, WorkloadFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: Counts rows of every model of every installed app, as JSON.
COUNT_ROWS = (
    "import json, django; django.setup(); from django.apps import apps; "
    "print(json.dumps({m._meta.label: m._base_manager.count() for m in apps.get_models()}))"
)


def manage_env(db_name: str) -> dict[str, str]:
    """The environment of a management command run against database ``db_name``."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hetplanner.settings.test",
        "HETPLANNER_DB_NAME": db_name,
    }


def run(args: list[str], env: dict[str, str], **kwargs: Any) -> str:
    result = subprocess.run(
        args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, **kwargs
    )
    assert result.returncode == 0, f"{args}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def counts(db_name: str) -> dict[str, int]:
    return json.loads(run([sys.executable, "-c", COUNT_ROWS], manage_env(db_name)))


@pytest.fixture
def populated(builtin_catalog_rows: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Rows in every kind of table (catalog, users, traces, workloads, scenarios, runs,
    sweeps with chunks, plans, heartbeats); returns the database's name."""
    for module, name in (
        (run_services, "_enqueue"),
        (sweep_services, "_enqueue_chunks"),
        (plan_services, "_enqueue_stage"),
    ):
        monkeypatch.setattr(module, name, lambda *args: None)
    owner = UserFactory(username="backup-owner")
    TraceFactory()
    WorkloadFactory(owner=owner)
    # sent "just now": a reconciler still alive from an earlier test (a housekeeping
    # worker with beat) would re-send a queued run never sent, and a worker would add
    # its events to the source while it is dumped
    SimulationRunFactory(scenario__owner=owner, enqueued_at=timezone.now())
    template = json.loads((REPO_ROOT / "examples" / "glitches-vs-8xa100.json").read_text())
    scenario = scenario_services.scenario_create(owner=owner, document=template)
    run_services.simulation_run_create(scenario=scenario, owner=owner)  # with its "created" event
    ApiToken.objects.create(user=owner, name="ci", key_hash="0" * 64, key_hint="hp_0000")
    Client().force_login(owner)  # a session row
    sweep = sweep_services.sweep_create(
        owner=owner,
        name="backup",
        template=template,
        axes=[{"name": "seed", "path": "workload.seed", "values": [1, 2, 3]}],
        chunk_size=1,
    )
    SweepResult.objects.create(
        sweep=sweep, index=0, parameters={"seed": 1}, status="failed", error="lost"
    )
    plan = plan_services.plan_create(spec=small_doc(), owner=owner)
    PlanResult.objects.create(
        plan=plan, key="k", round=1, feasible=False, capex_usd=1.0, evaluation={"key": "k"}
    )
    process_heartbeat(
        role=ProcessRole.BEAT,
        name="beat@backup",
        hostname="backup",
        pid=1,
        started_at=owner.date_joined,
    )
    return str(connection.settings_dict["NAME"])


def assert_same_rows(
    before: dict[str, int], restored: dict[str, int], after: dict[str, int]
) -> None:
    """The restored database holds every row the source held when the dump started; rows a
    live process wrote while it was being dumped (a heartbeat of a worker still alive from an
    earlier test) may or may not be in it, so a table that grew meanwhile is compared with a
    range rather than one count."""
    assert restored.keys() == before.keys()
    assert {
        label: count
        for label, count in restored.items()
        if not before[label] <= count <= after.get(label, before[label])
    } == {}, (before, restored, after)
    source = before
    # The comparison means something: the dump held data in the app's own tables.
    for label, model in source.items():
        print(f"{label:40} {model}")
    for label in (
        "simulations.Device",
        "simulations.SimulationRun",
        "simulations.SweepChunk",
        "simulations.Plan",
        "simulations.PlanResult",
        "simulations.SweepResult",
        "simulations.RunEvent",
        "sessions.Session",
        "api.ApiToken",
        "ops.ProcessHeartbeat",
        "auth.User",
    ):
        assert source[label] > 0, label


def test_dumpdata_then_loaddata_into_an_empty_database_restores_every_row(
    populated: str, tmp_path: Path
) -> None:
    dump = tmp_path / "backup.json"
    before = counts(populated)
    run(
        [
            sys.executable,
            "manage.py",
            "dumpdata",
            "--natural-foreign",
            "--natural-primary",
            "--exclude",
            "contenttypes",
            "--exclude",
            "auth.permission",
            "--output",
            str(dump),
        ],
        manage_env(populated),
    )
    with empty_database(tmp_path) as target:
        run([sys.executable, "manage.py", "migrate", "--noinput"], manage_env(target))
        run([sys.executable, "manage.py", "loaddata", str(dump)], manage_env(target))
        assert_same_rows(before, counts(target), counts(populated))


@pytest.mark.skipif(
    connection.vendor != "postgresql"
    or not (shutil.which("pg_dump") and shutil.which("pg_restore")),
    reason="needs PostgreSQL and its client tools (pg_dump, pg_restore)",
)
def test_pg_dump_then_pg_restore_into_a_fresh_database_restores_every_row(
    populated: str, tmp_path: Path
) -> None:
    dump = tmp_path / "backup.dump"
    before = counts(populated)
    run(
        ["pg_dump", "--format=custom", "--no-owner", f"--file={dump}", *pg_args(populated)],
        pg_env(),
    )
    with empty_database(tmp_path) as target:
        run(["pg_restore", "--no-owner", "--exit-on-error", *pg_args(target), str(dump)], pg_env())
        assert_same_rows(before, counts(target), counts(populated))


def pg_args(db_name: str) -> list[str]:
    s = connection.settings_dict
    args = [f"--dbname={db_name}"]
    if s.get("HOST"):
        args.append(f"--host={s['HOST']}")
    if s.get("PORT"):
        args.append(f"--port={s['PORT']}")
    if s.get("USER"):
        args.append(f"--username={s['USER']}")
    return args


def pg_env() -> dict[str, str]:
    password = connection.settings_dict.get("PASSWORD")
    return {**os.environ, **({"PGPASSWORD": str(password)} if password else {})}


class empty_database:  # noqa: N801  (used as a context manager, like a function)
    """A new, empty database beside the test database: a PostgreSQL database created for
    the test (dropped afterwards), or a new SQLite file."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.name = ""

    def __enter__(self) -> str:
        if connection.vendor == "postgresql":
            self.name = f"{connection.settings_dict['NAME']}_restore_{uuid.uuid4().hex[:8]}"
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{self.name}"')
        else:
            self.name = str(self.tmp_path / "restored.sqlite3")
        return self.name

    def __exit__(self, *exc: Any) -> None:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
