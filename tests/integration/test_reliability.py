"""Worker loss, poison tasks and time limits, on real Celery worker processes.

Against PostgreSQL and Redis when ``DATABASE_URL``/``REDIS_URL`` are set (``.ci/run`` sets
them), against the embedded defaults otherwise. Workers are started with short timings
(``tests/integration/tuned_workers.py``) so each recovery takes seconds. The misbehaving
policies (``test-double-*``, ``tests/integration/worker_doubles.py``) are registered in the
workers only; this process never imports them.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from simulations.choices import FINAL_STATUSES, RunEventKind, RunStatus
from simulations.runs import services as run_services
from simulations.runs import tasks
from simulations.runs.models import RunEvent, SimulationRun
from simulations.scenarios import services as scenario_services
from tests.helpers import wait_for
from tests.integration.tuned_workers import (  # noqa: F401  (the fixture)
    TunedWorker,
    tuned_worker_factory_fixture,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def a100_doc(*, policy: str = "homogeneous", requests: int = 200, systems: int = 1) -> dict:
    """Homogeneous serving of Llama-3.2-3B on A100s (built-in catalog)."""
    return {
        "name": f"{policy}, {requests} requests",
        "model": "llama3.2-3b",
        "workload": {
            "requests": requests,
            "input_tokens": {"dist": "uniform", "low": 64, "high": 512},
            "output_tokens": {"dist": "uniform", "low": 16, "high": 128},
            "arrival": {"kind": "poisson", "rate_per_s": 50.0},
            "seed": 5,
        },
        "systems": [
            {
                "name": f"{i + 1}xA100",
                "policy": policy,
                "devices": [{"device": "a100-80gb", "count": i + 1}],
                **({"options": {"max_batch": 16}} if policy == "homogeneous" else {}),
            }
            for i in range(systems)
        ],
    }


def submit(user: Any, document: dict) -> SimulationRun:
    scenario = scenario_services.scenario_create(owner=user, document=document)
    return run_services.simulation_run_create(scenario=scenario, owner=user)


def row(run: SimulationRun) -> dict[str, Any]:
    return SimulationRun.objects.filter(pk=run.pk).values().get()


def final_row(run: SimulationRun, workers: list[TunedWorker], timeout_s: float) -> dict[str, Any]:
    try:
        return wait_for(
            lambda: (r := row(run))["status"] in FINAL_STATUSES and r, timeout_s=timeout_s
        )
    except pytest.fail.Exception:
        for worker in workers:
            print(worker.log_text()[-4000:])
        raise


def kinds(run: SimulationRun) -> list[str]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True))


def pid_of(worker_field: str) -> int:
    return int(worker_field.rsplit(":", 1)[1])


@pytest.fixture
def catalog(builtin_catalog_rows: Any) -> Any:
    return builtin_catalog_rows


@pytest.mark.usefixtures("catalog")
def test_a_task_that_kills_its_process_every_time_ends_failed_after_three_attempts(
    tuned_worker_factory: Any, user: Any
) -> None:
    worker = tuned_worker_factory()
    run = submit(user, a100_doc(policy="test-double-self-kill"))
    stored = final_row(run, [worker], timeout_s=120)
    assert stored["status"] == RunStatus.FAILED
    assert stored["attempts"] == 3
    assert stored["error"].startswith("gave up after 3 attempts: the worker running it was lost")
    assert stored["result"] is None
    events = kinds(run)
    assert events.count(RunEventKind.CLAIMED) == 3
    assert events[-1] == RunEventKind.FAILED
    assert worker.proc is not None and worker.proc.poll() is None  # the worker itself survived


@pytest.mark.usefixtures("catalog")
def test_a_soft_time_limit_fails_the_run_and_the_worker_keeps_serving(
    tuned_worker_factory: Any, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = tuned_worker_factory()
    # This run's message carries a 2 s soft limit (hard 8 s), whichever worker takes it.
    original = tasks.run_simulation.apply_async
    monkeypatch.setattr(
        tasks.run_simulation,
        "delay",
        lambda run_id: original((run_id,), soft_time_limit=2, time_limit=8),
    )
    doc = a100_doc(policy="test-double-spin")
    doc["systems"][0]["options"] = {"spin_s": 60.0}
    run = submit(user, doc)
    stored = final_row(run, [worker], timeout_s=60)
    assert stored["status"] == RunStatus.FAILED
    assert stored["error"] == "exceeded the time limit of 2 s"
    assert stored["attempts"] == 1
    child = pid_of(stored["worker"])
    os.kill(child, 0)  # the pool process that hit the limit is still alive
    monkeypatch.undo()

    follow_up = submit(user, a100_doc())
    done = final_row(follow_up, [worker], timeout_s=60)
    assert done["status"] == RunStatus.SUCCEEDED, done["error"]
    assert kinds(run).count(RunEventKind.FAILED) == 1


@pytest.mark.usefixtures("catalog")
def test_sigkill_of_the_whole_worker_then_a_restart_finishes_every_run(
    tuned_worker_factory: Any, user: Any
) -> None:
    first = tuned_worker_factory()
    runs = [submit(user, a100_doc(requests=100_000, systems=2)) for _ in range(2)]

    def running_on_first() -> dict[str, Any] | None:
        for run in runs:
            r = row(run)
            if (
                r["status"] == RunStatus.RUNNING
                and r["progress"] >= 5
                and pid_of(r["worker"]) in first.pool_children()
            ):
                return r
        return None

    victim = wait_for(running_on_first, timeout_s=90)
    first.kill_all()  # main process, pool child and beat: no warm shutdown, no ack
    assert row(SimulationRun(pk=victim["id"]))["status"] == RunStatus.RUNNING

    second = tuned_worker_factory()
    for run in runs:
        stored = final_row(run, [first, second], timeout_s=120)
        assert stored["status"] == RunStatus.SUCCEEDED, stored["error"]
        events = kinds(run)
        assert events.count(RunEventKind.SUCCEEDED) == 1
        assert events.count(RunEventKind.CLAIMED) == stored["attempts"]
        assert len(stored["result"]["systems"]) == 2
    resumed = row(SimulationRun(pk=victim["id"]))
    assert resumed["attempts"] >= 2
    assert pid_of(resumed["worker"]) != pid_of(victim["worker"])
