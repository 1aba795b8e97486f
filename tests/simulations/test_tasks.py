"""The Celery task's outcomes, executed in-process with ``Task.apply`` (no broker).

The same code runs in a real worker in ``tests/integration``; here each outcome (success,
domain error, unknown policy, soft time limit, transient error, bug) is forced directly.
``transaction=True``: the task's heartbeat thread uses its own database connection, which
must see the committed run.
"""

from __future__ import annotations

import json
import time
from typing import Any
from unittest import mock

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.db import OperationalError

from simulations.adapters import catalog_from_db
from simulations.choices import RunEventKind, RunStatus
from simulations.core.jsonsafe import finite
from simulations.core.policies import policy_names
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.runs import services as run_services
from simulations.runs import tasks
from simulations.runs.models import RunEvent, SimulationRun
from simulations.scenarios import services as scenario_services

pytestmark = pytest.mark.django_db(transaction=True)


def phone_doc(policy: str = "homogeneous", **workload: Any) -> dict[str, Any]:
    """A small scenario on the built-in catalog: the Snapdragon 8 Gen 3 GPU and NPU."""
    return {
        "name": "phone GPU vs NPU",
        "model": "llama3.2-3b",
        "workload": {
            "requests": 20,
            "input_tokens": {"dist": "uniform", "low": 64, "high": 512},
            "output_tokens": 64,
            "seed": 7,
            **workload,
        },
        "systems": [
            {
                "name": "adreno",
                "policy": policy,
                "devices": [{"device": "adreno-750", "count": 1, "runtime": "w4a16-opencl-adreno"}],
            },
            {
                "name": "hexagon",
                "policy": policy,
                "devices": [{"device": "hexagon-npu", "count": 1}],
            },
        ],
    }


def submit(user: Any, document: dict[str, Any]) -> SimulationRun:
    scenario = scenario_services.scenario_create(owner=user, document=document)
    with mock.patch("simulations.runs.tasks.run_simulation.delay"):
        return run_services.simulation_run_create(scenario=scenario, owner=user)


def execute(run: SimulationRun) -> Any:
    return tasks.run_simulation.apply(args=(run.pk,)).get()


def row(run: SimulationRun) -> dict[str, Any]:
    return SimulationRun.objects.filter(pk=run.pk).values().get()


def events(run: SimulationRun) -> list[str]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True))


@pytest.fixture
def catalog(builtin_catalog_rows: Any) -> Any:
    return builtin_catalog_rows


@pytest.mark.usefixtures("catalog")
def test_a_run_stores_the_cores_result_document(user: Any) -> None:
    run = submit(user, phone_doc())
    assert execute(run) == "succeeded"
    stored = row(run)
    assert stored["status"] == RunStatus.SUCCEEDED
    assert (stored["progress"], stored["attempts"], stored["error"]) == (100, 1, "")
    expected = simulate(parse_scenario(run.document, catalog_from_db()))
    assert stored["result"] == json.loads(json.dumps(finite(expected)))
    assert [s["name"] for s in stored["result"]["systems"]] == ["adreno", "hexagon"]
    assert events(run) == [RunEventKind.CREATED, RunEventKind.CLAIMED, RunEventKind.SUCCEEDED]


@pytest.mark.usefixtures("catalog")
def test_an_unregistered_policy_fails_the_run_with_the_cores_message(user: Any) -> None:
    assert "no-such-policy" not in policy_names()
    run = submit(user, phone_doc(policy="no-such-policy"))
    assert execute(run) == "failed"
    stored = row(run)
    assert stored["status"] == RunStatus.FAILED
    assert stored["error"].startswith(
        "policy 'no-such-policy' is not implemented in the simulation core (available: "
    )
    assert "homogeneous" in stored["error"]
    assert stored["result"] is None
    assert stored["attempts"] == 1


@pytest.mark.usefixtures("catalog")
def test_a_model_that_does_not_fit_fails_without_retry(user: Any) -> None:
    doc = phone_doc()
    doc["model"] = "llama2-70b"
    run = submit(user, doc)
    assert execute(run) == "failed"
    stored = row(run)
    assert stored["attempts"] == 1
    assert stored["error"].startswith("does not fit:"), stored["error"]


@pytest.mark.usefixtures("catalog")
def test_a_catalog_change_after_submission_fails_the_run_with_the_json_path(user: Any) -> None:
    from simulations.catalog.models import Device

    run = submit(user, phone_doc())
    Device.objects.filter(slug="hexagon-npu").update(slug="hexagon-renamed")
    assert execute(run) == "failed"
    error = row(run)["error"]
    assert error.startswith("invalid scenario:")
    assert "systems[1].devices[0].device" in error


@pytest.mark.usefixtures("catalog")
def test_the_soft_time_limit_fails_the_run(user: Any) -> None:
    run = submit(user, phone_doc())
    with mock.patch("simulations.core.simulate.simulate", side_effect=SoftTimeLimitExceeded()):
        assert execute(run) == "failed"
    assert row(run)["error"].startswith("exceeded the time limit of")


@pytest.mark.usefixtures("catalog")
def test_a_bug_fails_the_run_once_instead_of_retrying(user: Any) -> None:
    run = submit(user, phone_doc())
    with mock.patch("simulations.core.simulate.simulate", side_effect=ZeroDivisionError("x")):
        assert execute(run) == "failed"
    stored = row(run)
    assert stored["error"] == "internal error: ZeroDivisionError: x"
    assert stored["attempts"] == 1


@pytest.mark.usefixtures("catalog")
def test_a_transient_database_error_is_retried(user: Any) -> None:
    run = submit(user, phone_doc())
    real = run_services.run_claim
    calls: list[int] = []

    def flaky_claim(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("db restarting")
        return real(*args, **kwargs)

    with mock.patch.object(run_services, "run_claim", side_effect=flaky_claim):
        tasks.run_simulation.apply(args=(run.pk,))
    assert len(calls) == 2
    stored = row(run)
    assert stored["status"] == RunStatus.SUCCEEDED
    assert stored["attempts"] == 1


@pytest.mark.usefixtures("catalog")
def test_a_transient_error_mid_run_resumes_the_same_claim(user: Any) -> None:
    run = submit(user, phone_doc())
    real_simulate = simulate
    calls: list[int] = []

    def flaky(spec: Any, progress: Any = None) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("connection reset")
        return real_simulate(spec, progress=progress)

    with mock.patch("simulations.core.simulate.simulate", side_effect=flaky):
        tasks.run_simulation.apply(args=(run.pk,))
    stored = row(run)
    assert stored["status"] == RunStatus.SUCCEEDED
    assert stored["attempts"] == 2  # the retry was a second delivery of the same run
    assert events(run).count(RunEventKind.SUCCEEDED) == 1


@pytest.mark.usefixtures("catalog")
def test_the_heartbeat_writes_the_runs_progress_while_it_simulates(
    user: Any, settings: Any
) -> None:
    settings.HETPLANNER_HEARTBEAT_INTERVAL_S = 0.05
    run = submit(user, phone_doc())
    real_simulate = simulate
    seen: list[int] = []

    def reporting(spec: Any, progress: Any = None) -> Any:
        progress(0.5)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not seen:
            if SimulationRun.objects.filter(pk=run.pk, progress=50).exists():
                seen.append(50)
            time.sleep(0.02)
        return real_simulate(spec, progress=progress)

    with mock.patch("simulations.core.simulate.simulate", side_effect=reporting):
        assert execute(run) == "succeeded"
    assert seen == [50]  # written by the heartbeat thread, before the result


@pytest.mark.usefixtures("catalog")
def test_a_final_run_is_not_claimed_again(user: Any) -> None:
    run = submit(user, phone_doc())
    assert execute(run) == "succeeded"
    assert execute(run) == "not claimed"
    assert row(run)["attempts"] == 1


def test_reconcile_task_reports_what_it_did() -> None:
    assert tasks.reconcile_runs.apply().get() == {"requeued": [], "resent": [], "failed": []}


def test_the_task_is_configured_for_at_least_once_delivery(settings: Any) -> None:
    task = tasks.run_simulation
    assert task.acks_late is True
    assert task.reject_on_worker_lost is True
    assert task.soft_time_limit < task.time_limit
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout")
    assert visibility is None or visibility >= 2 * task.time_limit
