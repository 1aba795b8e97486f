"""Writes: scenarios, workloads, imports and the run lifecycle (the catalog,
scenarios and runs services)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from simulations.catalog import services as catalog_services
from simulations.catalog.models import LLMModel
from simulations.choices import RunEventKind, RunStatus
from simulations.core.errors import ScenarioValidationError
from simulations.jobs import QuotaExceededError
from simulations.runs import services as run_services
from simulations.runs.models import RunEvent, SimulationRun
from simulations.scenarios import services as scenario_services
from simulations.scenarios.models import Scenario, Trace, Workload
from tests.core.test_hf_config import LLAMA31_8B

pytestmark = pytest.mark.django_db

MINI_TRACE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    "2023-11-16 18:15:46.6805900,374,44\r\n"
    "2023-11-16 18:15:50.9951690,396,109\r\n"
    "2023-11-16 18:15:51.2224670,879,55"
)


def scenario_doc(**overrides: Any) -> dict[str, Any]:
    """A valid document on the test catalog (its policy is not registered in the core)."""
    doc: dict[str, Any] = {
        "name": "two GPUs",
        "model": "t-llama2-7b",
        "workload": {"requests": 20, "input_tokens": 512, "output_tokens": 64},
        "systems": [
            {
                "name": "2xA100",
                "policy": "not-registered-yet",
                "devices": [{"device": "t-a100-80gb", "count": 2}],
            }
        ],
    }
    doc.update(overrides)
    return doc


@pytest.fixture
def scenario(fixture_catalog_rows: Any, user: Any) -> Scenario:
    return scenario_services.scenario_create(owner=user, document=scenario_doc())


# --- scenarios -------------------------------------------------------------------------------


def test_scenario_create_stores_a_valid_document(fixture_catalog_rows: Any, user: Any) -> None:
    stored = scenario_services.scenario_create(owner=user, document=scenario_doc(), shared=True)
    assert stored.name == "two GPUs"
    assert stored.owner == user and stored.shared
    assert Scenario.objects.get().document == scenario_doc()


def test_a_rejected_scenario_stores_nothing(fixture_catalog_rows: Any, user: Any) -> None:
    bad = scenario_doc()
    bad["systems"][0]["devices"][0]["count"] = 0
    bad["workload"]["requests"] = math.nan
    with pytest.raises(ScenarioValidationError) as err:
        scenario_services.scenario_create(owner=user, document=bad)
    assert set(err.value.errors) == {"systems[0].devices[0].count", "workload.requests"}
    assert not Scenario.objects.exists()


def test_an_oversized_document_is_rejected(fixture_catalog_rows: Any, user: Any) -> None:
    doc = scenario_doc(description="x" * (scenario_services.MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(ScenarioValidationError) as err:
        scenario_services.scenario_create(owner=user, document=doc)
    assert list(err.value.errors) == ["document"]
    assert not Scenario.objects.exists()


def test_scenario_update_revalidates(scenario: Scenario) -> None:
    bad = scenario_doc(model="nope")
    with pytest.raises(ScenarioValidationError):
        scenario_services.scenario_update(scenario=scenario, document=bad)
    scenario.refresh_from_db()
    assert scenario.document["model"] == "t-llama2-7b"
    scenario_services.scenario_update(
        scenario=scenario, document=scenario_doc(name="renamed"), shared=True
    )
    scenario.refresh_from_db()
    assert (scenario.name, scenario.shared) == ("renamed", True)


# --- workloads, imports ----------------------------------------------------------------------


def test_workload_create_validates_as_a_scenario_workload(user: Any) -> None:
    wl = scenario_services.workload_create(
        owner=user,
        name="chat",
        requests=100,
        input_tokens={"dist": "lognormal", "median": 1020, "sigma": 1.0},
        output_tokens={"dist": "uniform", "low": 16, "high": 512},
        arrival_kind="poisson",
        rate_per_s=3.0,
    )
    assert wl.to_document()["arrival"] == {"kind": "poisson", "rate_per_s": 3.0}
    with pytest.raises(ScenarioValidationError) as err:
        scenario_services.workload_create(
            owner=user,
            name="bad",
            requests=10,
            input_tokens={"dist": "uniform", "low": 9, "high": 3},
            output_tokens=10,
        )
    assert "workload.input_tokens.high" in err.value.errors
    with pytest.raises(ValidationError) as verr:
        scenario_services.workload_create(
            owner=user,
            name="no rate",
            requests=10,
            input_tokens=5,
            output_tokens=5,
            arrival_kind="poisson",
        )
    assert verr.value.messages
    assert Workload.objects.count() == 1


def test_a_trace_workload_refers_to_its_trace(user: Any) -> None:
    trace = scenario_services.trace_import(slug="mini", name="mini", text=MINI_TRACE)
    wl = scenario_services.workload_create(
        owner=user,
        name="replay",
        requests=3,
        input_tokens={"dist": "trace"},
        output_tokens={"dist": "trace"},
        arrival_kind="trace",
        trace=trace,
        time_scale=2.0,
    )
    spec = scenario_services.workload_validate(wl)
    assert spec.trace is not None and spec.trace.output_tokens == (44, 109, 55)
    assert spec.arrival.time_scale == 2.0


def test_trace_import_stores_the_parsed_columns() -> None:
    trace = scenario_services.trace_import(slug="mini", name="Mini trace", text=MINI_TRACE.encode())
    assert trace.request_count == 3
    assert trace.duration_s == pytest.approx(4.541877)
    assert trace.data["input_tokens"] == [374, 396, 879]
    assert trace.data["arrival_s"][0] == 0.0


def test_a_bad_trace_names_the_line_and_stores_nothing() -> None:
    bad = MINI_TRACE.replace("396", "-4")
    with pytest.raises(ValidationError) as err:
        scenario_services.trace_import(slug="bad", name="bad", text=bad)
    assert "line 3" in err.value.message_dict["text"][0]
    assert not Trace.objects.exists()


def test_hf_import_creates_a_model_with_sources() -> None:
    row = catalog_services.hf_model_import(
        config=LLAMA31_8B, slug="imported-8b", name="Imported 8B", origin="meta-llama config.json"
    )
    assert (row.n_kv_heads, row.vocab_size, row.ffn_kind) == (8, 128256, "gated")
    assert row.sources["n_kv_heads"] == "meta-llama config.json: num_key_value_heads"
    assert row.hf_config["model_type"] == "llama"


def test_hf_import_rejects_bad_input_and_stores_nothing() -> None:
    with pytest.raises(ValidationError) as err:
        catalog_services.hf_model_import(config="{not json", slug="x", name="x")
    assert "config" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        catalog_services.hf_model_import(
            config={**LLAMA31_8B, "hidden_size": -1}, slug="x", name="x"
        )
    assert "config.hidden_size" in err.value.message_dict["config"][0]
    with pytest.raises(ValidationError) as err:
        catalog_services.hf_model_import(config=LLAMA31_8B, slug="Not A Slug", name="x")
    assert "slug" in err.value.message_dict
    assert not LLMModel.objects.exists()


# --- runs ------------------------------------------------------------------------------------


def test_run_create_queues_the_task_only_after_commit(
    scenario: Scenario, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with mock.patch("simulations.runs.tasks.run_simulation.delay") as delay:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            run = run_services.simulation_run_create(scenario=scenario, owner=user)
            assert not delay.called
        assert len(callbacks) == 1
        callbacks[0]()
    delay.assert_called_once_with(run.pk)
    assert run.status == RunStatus.QUEUED
    assert run.document == scenario.document
    assert list(run.events.values_list("kind", flat=True)) == [RunEventKind.CREATED]


def test_run_create_revalidates_against_todays_catalog(scenario: Scenario, user: Any) -> None:
    from simulations.catalog.models import Device

    Device.objects.filter(slug="t-a100-80gb").update(slug="renamed-a100")
    with pytest.raises(ScenarioValidationError) as err:
        run_services.simulation_run_create(scenario=scenario, owner=user)
    assert "systems[0].devices[0].device" in err.value.errors
    assert not SimulationRun.objects.exists()


def test_only_the_owner_or_a_shared_scenario_can_be_run(
    scenario: Scenario, other_user: Any
) -> None:
    with pytest.raises(PermissionDenied):
        run_services.simulation_run_create(scenario=scenario, owner=other_user)
    scenario_services.scenario_update(scenario=scenario, shared=True)
    run = run_services.simulation_run_create(scenario=scenario, owner=other_user)
    assert run.owner == other_user


def test_run_submit_refuses_a_run_past_the_quota_and_stores_nothing(
    scenario: Scenario, user: Any, settings: Any
) -> None:
    settings.HETPLANNER_MAX_ACTIVE_RUNS_PER_USER = 2
    with mock.patch("simulations.runs.tasks.run_simulation.delay"):
        first = run_services.run_submit(scenario=scenario, owner=user)
        run_services.run_submit(scenario=scenario, owner=user)
        with pytest.raises(QuotaExceededError) as err:
            run_services.run_submit(scenario=scenario, owner=user)
        assert (err.value.active, err.value.limit) == (2, 2)
        assert "active runs per user" in str(err.value)
        assert SimulationRun.objects.count() == 2
        # A final run no longer counts against the quota.
        run_services.run_cancel(run=first, user=user)
        run_services.run_submit(scenario=scenario, owner=user)
    assert SimulationRun.objects.count() == 3


@pytest.fixture
def run(scenario: Scenario, user: Any) -> SimulationRun:
    return run_services.simulation_run_create(scenario=scenario, owner=user)


def status_of(run: SimulationRun) -> dict[str, Any]:
    return SimulationRun.objects.filter(pk=run.pk).values().get()


def test_a_claim_moves_a_queued_run_to_running_once(run: SimulationRun) -> None:
    claim = run_services.run_claim(run.pk, worker="w1:1")
    assert claim is not None and claim.attempt == 1
    assert claim.document == run.document
    row = status_of(run)
    assert (row["status"], row["attempts"], row["worker"]) == (RunStatus.RUNNING, 1, "w1:1")
    assert row["started_at"] is not None and row["heartbeat_at"] is not None
    # A second delivery while the first worker is alive gets nothing.
    assert run_services.run_claim(run.pk, worker="w2:2") is None
    assert status_of(run)["attempts"] == 1


def test_a_run_with_a_stale_heartbeat_can_be_claimed_again(run: SimulationRun) -> None:
    first = run_services.run_claim(run.pk, worker="w1:1")
    assert first is not None
    later = timezone.now() + timedelta(seconds=60)
    second = run_services.run_claim(run.pk, worker="w2:2", now=later)
    assert second is not None and second.attempt == 2
    # The lost attempt can no longer write anything.
    assert not run_services.run_mark_progress(run.pk, first.attempt, 50)
    assert not run_services.run_mark_succeeded(run.pk, first.attempt, {"systems": []})
    assert run_services.run_mark_succeeded(run.pk, second.attempt, {"systems": [{"x": 1}]})
    row = status_of(run)
    assert (row["status"], row["progress"], row["result"]) == (
        RunStatus.SUCCEEDED,
        100,
        {"systems": [{"x": 1}]},
    )


def test_a_retry_resumes_its_own_claim(run: SimulationRun) -> None:
    first = run_services.run_claim(run.pk, worker="w1:1")
    assert first is not None
    resumed = run_services.run_claim(run.pk, worker="w1:1", resume_attempt=first.attempt)
    assert resumed is not None and resumed.attempt == 2
    assert run_services.run_claim(run.pk, worker="w1:1", resume_attempt=first.attempt) is None


def test_the_result_is_stored_exactly_once_and_final_states_are_kept(run: SimulationRun) -> None:
    claim = run_services.run_claim(run.pk, worker="w:1")
    assert claim is not None
    assert run_services.run_mark_succeeded(run.pk, claim.attempt, {"systems": [1]})
    assert not run_services.run_mark_succeeded(run.pk, claim.attempt, {"systems": [2]})
    assert not run_services.run_mark_failed(run.pk, claim.attempt, "late failure")
    assert not run_services.run_cancel(run=run, user=run.owner)
    assert (
        run_services.run_claim(run.pk, worker="w:2", now=timezone.now() + timedelta(hours=1))
        is None
    )
    row = status_of(run)
    assert (row["status"], row["result"], row["error"]) == (
        RunStatus.SUCCEEDED,
        {"systems": [1]},
        "",
    )
    kinds = list(RunEvent.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds == [RunEventKind.CREATED, RunEventKind.CLAIMED, RunEventKind.SUCCEEDED]


def test_results_are_stored_as_plain_json(run: SimulationRun) -> None:
    import numpy as np

    claim = run_services.run_claim(run.pk, worker="w:1")
    assert claim is not None
    run_services.run_mark_succeeded(
        run.pk,
        claim.attempt,
        {"systems": [{"n": np.int64(3), "x": np.float64(0.5), "bad": math.nan, "t": (1, 2)}]},
    )
    assert status_of(run)["result"] == {"systems": [{"n": 3, "x": 0.5, "bad": None, "t": [1, 2]}]}


def test_cancel_stops_a_running_attempt(run: SimulationRun, other_user: Any) -> None:
    claim = run_services.run_claim(run.pk, worker="w:1")
    assert claim is not None
    with pytest.raises(PermissionDenied):
        run_services.run_cancel(run=run, user=other_user)
    assert run_services.run_cancel(run=run, user=run.owner)
    assert not run_services.run_mark_progress(run.pk, claim.attempt, 10)
    assert not run_services.run_mark_succeeded(run.pk, claim.attempt, {"systems": []})
    row = status_of(run)
    assert row["status"] == RunStatus.CANCELLED and row["finished_at"] is not None


def test_progress_is_a_capped_percentage(run: SimulationRun) -> None:
    claim = run_services.run_claim(run.pk, worker="w:1")
    assert claim is not None
    assert run_services.run_mark_progress(run.pk, claim.attempt, 250)
    assert status_of(run)["progress"] == 99


def test_a_run_is_delivered_at_most_max_attempts_times(run: SimulationRun, settings: Any) -> None:
    settings.HETPLANNER_MAX_ATTEMPTS = 3
    now = timezone.now()
    for attempt in range(1, 4):
        now += timedelta(minutes=10)
        claim = run_services.run_claim(run.pk, worker=f"w:{attempt}", now=now)
        assert claim is not None and claim.attempt == attempt
    assert run_services.run_claim(run.pk, worker="w:4", now=now + timedelta(minutes=10)) is None
    row = status_of(run)
    assert row["status"] == RunStatus.FAILED
    assert row["attempts"] == 3
    assert row["error"].startswith("gave up after 3 attempts")


def test_reconcile_requeues_stale_runs_and_resends_lost_messages(
    scenario: Scenario, user: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.HETPLANNER_MAX_ATTEMPTS = 2
    stale, exhausted, waiting, fresh = (
        run_services.simulation_run_create(scenario=scenario, owner=user) for _ in range(4)
    )
    t0 = timezone.now()
    run_services.run_claim(stale.pk, worker="dead:1", now=t0)
    run_services.run_claim(exhausted.pk, worker="dead:1", now=t0)
    run_services.run_claim(exhausted.pk, worker="dead:2", now=t0 + timedelta(minutes=5))
    run_services.run_claim(fresh.pk, worker="alive:1", now=t0 + timedelta(minutes=10))
    SimulationRun.objects.filter(pk=waiting.pk).update(enqueued_at=t0 - timedelta(hours=2))
    now = t0 + timedelta(minutes=10, seconds=1)
    with (
        mock.patch("simulations.runs.tasks.run_simulation.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        report = run_services.runs_reconcile(now=now)
    assert report.requeued == [stale.pk]
    assert report.failed == [exhausted.pk]
    assert report.resent == [waiting.pk]
    assert sorted(c.args[0] for c in delay.call_args_list) == sorted([stale.pk, waiting.pk])
    assert status_of(stale)["status"] == RunStatus.QUEUED
    assert status_of(exhausted)["status"] == RunStatus.FAILED
    assert status_of(fresh)["status"] == RunStatus.RUNNING
    # The requeued run is claimable again and keeps counting attempts.
    claim = run_services.run_claim(stale.pk, worker="w:9", now=now)
    assert claim is not None and claim.attempt == 2


def test_a_broker_failure_on_submit_is_logged_not_raised(
    scenario: Scenario, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from kombu.exceptions import OperationalError

    down = OperationalError("broker down")
    with (
        mock.patch("simulations.runs.tasks.run_simulation.delay", side_effect=down) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = run_services.simulation_run_create(scenario=scenario, owner=user)
    delay.assert_called_once_with(run.pk)
    assert status_of(run)["status"] == RunStatus.QUEUED


def test_the_reconcile_command_runs_the_reconciler(
    run: SimulationRun, django_capture_on_commit_callbacks: Any
) -> None:
    from io import StringIO

    from django.core.management import call_command

    SimulationRun.objects.filter(pk=run.pk).update(enqueued_at=None)
    out = StringIO()
    with (
        mock.patch("simulations.runs.tasks.run_simulation.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        call_command("reconcile_runs", stdout=out)
    assert out.getvalue().strip() == "requeued 0, re-sent 1, failed 0 run(s)"
    delay.assert_called_once_with(run.pk)


def test_trace_import_refuses_a_million_rows_at_the_cap_naming_it_and_the_line() -> None:
    from simulations.core.scenario import MAX_TRACE_ROWS

    rows = "\r\n".join("2023-11-16 18:15:46.1,5,5" for _ in range(1_000_000))
    text = f"TIMESTAMP,ContextTokens,GeneratedTokens\r\n{rows}"
    with pytest.raises(ValidationError) as err:
        scenario_services.trace_import(slug="huge", name="huge", text=text.encode())
    message = err.value.message_dict["text"][0]
    assert f"at most {MAX_TRACE_ROWS} rows" in message
    assert f"line {MAX_TRACE_ROWS + 2}" in message
    assert not Trace.objects.exists()
