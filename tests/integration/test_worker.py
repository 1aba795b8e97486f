"""Runs on a real Celery worker process (not eager mode), through the service layer.

Against PostgreSQL and Redis when ``DATABASE_URL``/``REDIS_URL`` are set (``.ci/run`` sets
them), against the embedded defaults (SQLite file, filesystem broker) otherwise.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from simulations.adapters import catalog_from_db
from simulations.choices import FINAL_STATUSES, RunEventKind, RunStatus
from simulations.core.jsonsafe import finite
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.runs import services as run_services
from simulations.runs.models import RunEvent, SimulationRun
from simulations.scenarios import services as scenario_services
from tests.conftest import WorkerProcess
from tests.helpers import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def phone_doc(*, policy: str = "homogeneous", requests: int = 30, systems: int = 2) -> dict:
    """Homogeneous serving on the Snapdragon 8 Gen 3's GPU and NPU (built-in catalog)."""
    devices = [
        [{"device": "adreno-750", "count": 1, "runtime": "w4a16-opencl-adreno"}],
        [{"device": "hexagon-npu", "count": 1}],
    ]
    return {
        "name": f"phone, {requests} requests",
        "model": "llama3.2-3b",
        "workload": {
            "requests": requests,
            "input_tokens": {"dist": "uniform", "low": 64, "high": 512},
            "output_tokens": {"dist": "uniform", "low": 16, "high": 128},
            "arrival": {"kind": "closed"},
            "seed": 3,
        },
        "systems": [
            {
                "name": f"system {i}",
                "policy": policy,
                "devices": devices[i % 2],
                **({"options": {"max_batch": 8}} if policy == "homogeneous" else {}),
            }
            for i in range(systems)
        ],
    }


def submit(user: Any, document: dict) -> SimulationRun:
    scenario = scenario_services.scenario_create(owner=user, document=document)
    return run_services.simulation_run_create(scenario=scenario, owner=user)


def row(run: SimulationRun) -> dict[str, Any]:
    return SimulationRun.objects.filter(pk=run.pk).values().get()


def final_row(run: SimulationRun, worker: WorkerProcess, timeout_s: float) -> dict[str, Any]:
    try:
        return wait_for(
            lambda: (r := row(run))["status"] in FINAL_STATUSES and r, timeout_s=timeout_s
        )
    except pytest.fail.Exception:
        print(worker.log_text()[-5000:])
        raise


def event_kinds(run: SimulationRun) -> list[str]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True))


def parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


@pytest.fixture
def catalog(builtin_catalog_rows: Any) -> Any:
    return builtin_catalog_rows


@pytest.mark.usefixtures("catalog")
def test_a_real_worker_runs_a_submitted_scenario(live_worker: WorkerProcess, user: Any) -> None:
    run = submit(user, phone_doc())
    stored = final_row(run, live_worker, timeout_s=90)
    assert stored["status"] == RunStatus.SUCCEEDED, stored["error"]
    assert stored["attempts"] == 1
    host_pid = int(stored["worker"].rsplit(":", 1)[1])
    assert host_pid != os.getpid()
    assert parent_pid(host_pid) == live_worker.proc.pid  # a pool child of the live worker
    # The worker stored exactly what the core computes for this document.
    expected = simulate(parse_scenario(run.document, catalog_from_db()))
    assert stored["result"] == json.loads(json.dumps(finite(expected)))
    assert event_kinds(run) == [
        RunEventKind.CREATED,
        RunEventKind.CLAIMED,
        RunEventKind.SUCCEEDED,
    ]


@pytest.mark.skipif(
    settings.CELERY_BROKER_URL != "hetplanner-fs://", reason="the embedded (filesystem) broker only"
)
@pytest.mark.usefixtures("catalog")
def test_a_half_written_message_in_the_queue_folder_does_not_stop_the_worker(
    live_worker: WorkerProcess, user: Any
) -> None:
    # What kombu's own sender leaves visible between creating a message file and writing it;
    # taking it used to end the worker's main process ("unrecoverable error").
    folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    name = f"{0:020d}_half-written.{settings.CELERY_TASK_DEFAULT_QUEUE}.msg"
    (folder / name).write_bytes(b"")
    wait_for(lambda: not (folder / name).exists(), timeout_s=30)
    run = submit(user, phone_doc(systems=1))
    stored = final_row(run, live_worker, timeout_s=90)
    assert stored["status"] == RunStatus.SUCCEEDED, stored["error"]
    assert live_worker.proc is not None and live_worker.proc.poll() is None
    assert (Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["rejected_folder"]) / name).exists()
    assert f"{name} (0 bytes) in the queue folder is not a message" in live_worker.log_text()


@pytest.mark.usefixtures("catalog")
def test_an_unregistered_policy_ends_failed_with_a_clear_message(
    live_worker: WorkerProcess, user: Any
) -> None:
    run = submit(user, phone_doc(policy="policy-from-a-future-paper"))
    stored = final_row(run, live_worker, timeout_s=90)
    assert stored["status"] == RunStatus.FAILED
    assert stored["error"].startswith(
        "policy 'policy-from-a-future-paper' is not implemented in the simulation core"
    )
    assert stored["result"] is None
    assert stored["attempts"] == 1


@pytest.mark.usefixtures("catalog")
def test_sigkill_of_a_worker_child_mid_run_still_stores_the_result_once(
    live_worker: WorkerProcess, user: Any
) -> None:
    # Ten systems × 100,000 requests: long enough (seconds per attempt) to kill mid-run.
    run = submit(user, phone_doc(requests=100_000, systems=10))
    running = wait_for(
        lambda: (r := row(run))["status"] == RunStatus.RUNNING and r["progress"] >= 5 and r,
        timeout_s=120,
    )
    assert running["progress"] < 100
    victim = int(running["worker"].rsplit(":", 1)[1])
    assert parent_pid(victim) == live_worker.proc.pid, "must be a pool child, not the worker"
    os.kill(victim, signal.SIGKILL)

    stored = final_row(run, live_worker, timeout_s=300)
    assert stored["status"] == RunStatus.SUCCEEDED, stored["error"]
    assert stored["attempts"] >= 2
    assert int(stored["worker"].rsplit(":", 1)[1]) != victim
    kinds = event_kinds(run)
    assert kinds.count(RunEventKind.SUCCEEDED) == 1
    assert kinds.count(RunEventKind.CLAIMED) == stored["attempts"]
    assert RunEventKind.FAILED not in kinds
    systems = stored["result"]["systems"]
    assert len(systems) == 10
    assert {s["requests"] for s in systems} == {100_000}


@pytest.mark.usefixtures("catalog")
def test_cancel_stops_a_running_simulation_and_the_worker_keeps_serving(
    live_worker: WorkerProcess, user: Any
) -> None:
    run = submit(user, phone_doc(requests=100_000, systems=10))
    wait_for(lambda: row(run)["status"] == RunStatus.RUNNING, timeout_s=120)
    assert run_services.run_cancel(run=run, user=user)

    # The worker notices at its next heartbeat, stops, and takes the next run.
    follow_up = submit(user, phone_doc())
    stored = final_row(follow_up, live_worker, timeout_s=120)
    assert stored["status"] == RunStatus.SUCCEEDED
    cancelled = row(run)
    assert cancelled["status"] == RunStatus.CANCELLED
    assert cancelled["result"] is None
    assert RunEventKind.SUCCEEDED not in event_kinds(run)
