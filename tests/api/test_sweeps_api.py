"""Sweeps over the API: expansion and the cap (a 400 names the axis at fault, before
anything is queued), per-value validation, chunked execution with exactly-once recording
(tasks called in this process), partial results, CSV, finaliser, cancel, quota."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.choices import ChunkStatus
from simulations.sweeps import services as sweep_services
from simulations.sweeps.models import Sweep, SweepChunk, SweepResult, SweepStatus
from simulations.sweeps.tasks import finalise_sweep, reconcile_sweeps, run_sweep_chunk

pytestmark = pytest.mark.django_db

#: Tests that execute chunks in this process commit their writes: the chunk's heartbeat
#: thread uses its own database connection. No message is sent (the enqueue is patched).
executes_chunks = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_messages"),
]


@pytest.fixture
def no_messages(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record chunk and finaliser messages instead of sending them to the broker."""
    sent: list[Any] = []
    monkeypatch.setattr(sweep_services, "_enqueue_chunks", lambda ids: sent.append(("chunks", ids)))
    monkeypatch.setattr(sweep_services, "_enqueue_chunk", lambda i: sent.append(("chunk", i)))
    monkeypatch.setattr(sweep_services, "_enqueue_finalise", lambda i: sent.append(("final", i)))
    return sent


COUNT = {"name": "gpus", "path": "systems[0].devices[0].count", "values": [1, 2, 4]}
RATE = {"name": "rate", "path": "workload.arrival.rate_per_s", "values": [1.0, 4.0]}


def body(document: dict, *axes: dict, **extra: Any) -> dict:
    return {"name": "sweep", "template": document, "axes": list(axes), **extra}


def test_a_sweep_is_expanded_chunked_and_answers_202(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    response = alice.post("/api/sweeps/", body(document, COUNT, RATE, chunk_size=4), format="json")
    assert response.status_code == 202, response.json()
    sweep = response.json()
    assert (sweep["total"], sweep["status"], sweep["progress"]) == (6, "queued", 0)
    assert response["Location"].endswith(f"/api/sweeps/{sweep['id']}/")
    chunks = list(SweepChunk.objects.filter(sweep_id=sweep["id"]).values_list("start", "stop"))
    assert chunks == [(0, 4), (4, 6)]


def test_a_sweep_past_the_cap_is_refused_naming_the_axis_and_stores_nothing(
    alice: APIClient, catalog: Any, document: dict, settings: Any
) -> None:
    settings.HETPLANNER_SWEEP_MAX_CONFIGS = 100
    rates = {"name": "rate", "path": "workload.arrival.rate_per_s", "values": list(range(1, 51))}
    response = alice.post("/api/sweeps/", body(document, COUNT, rates), format="json")
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == ["axes[1].values"]
    message = errors["axes[1].values"][0]
    assert "'rate'" in message and "150" in message and "at most 33 values fit" in message
    assert not Sweep.objects.exists() and not SweepChunk.objects.exists()


def test_every_axis_value_is_validated_against_the_catalog(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    devices = {"path": "systems[0].devices[0].device", "values": ["a100-80gb", "h100-sxm", "nope"]}
    options = {"path": "systems[0].options.max_batch", "values": [1, 0]}
    response = alice.post("/api/sweeps/", body(document, devices, options), format="json")
    assert response.status_code == 400
    errors = response.json()
    assert "unknown device 'nope'" in errors["axes[0].values[2]"][0]
    assert errors["axes[1].values[1]"][0].startswith("systems[0].options.max_batch: ")
    bad_path = alice.post(
        "/api/sweeps/",
        body(document, {"path": "systems[5].policy", "values": ["homogeneous"]}),
        format="json",
    )
    assert bad_path.status_code == 400 and "systems has no position 5" in str(bad_path.json())
    for axes in (
        [],
        [{"path": "systems[0]..count", "values": [1]}],
        [{"path": "workload.seed", "values": []}],
        [COUNT, dict(COUNT)],
        "not a list",
    ):
        refused = alice.post("/api/sweeps/", {**body(document), "axes": axes}, format="json")
        assert refused.status_code == 400, axes
    invalid_template = alice.post(
        "/api/sweeps/", body({**document, "model": "gpt-9"}, COUNT), format="json"
    )
    assert invalid_template.status_code == 400
    assert "template.model" in invalid_template.json()
    assert not Sweep.objects.exists()


@executes_chunks[0]
@executes_chunks[1]
def test_chunks_record_each_configuration_once_and_the_finaliser_summarises(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    sweep_id = alice.post(
        "/api/sweeps/", body(document, COUNT, RATE, chunk_size=4), format="json"
    ).json()["id"]
    first, second = SweepChunk.objects.filter(sweep_id=sweep_id).order_by("number")
    assert run_sweep_chunk(first.pk) == "done"
    partial = alice.get(f"/api/sweeps/{sweep_id}/").json()
    assert (partial["status"], partial["succeeded_count"], partial["progress"]) == (
        "running",
        4,
        66,
    )
    results = alice.get(f"/api/sweeps/{sweep_id}/results/").json()
    assert [r["index"] for r in results["results"]] == [0, 1, 2, 3]
    assert results["results"][3]["parameters"] == {"gpus": 2, "rate": 4.0}

    # A duplicate delivery of a finished chunk changes nothing.
    SweepChunk.objects.filter(pk=first.pk).update(status=ChunkStatus.QUEUED)
    assert run_sweep_chunk(first.pk) == "done"
    assert SweepResult.objects.filter(sweep_id=sweep_id).count() == 4
    assert Sweep.objects.get(pk=sweep_id).succeeded_count == 4

    assert run_sweep_chunk(second.pk) == "done"
    assert finalise_sweep(sweep_id) is True
    assert finalise_sweep(sweep_id) is False  # exactly once
    done = alice.get(f"/api/sweeps/{sweep_id}/").json()
    assert done["status"] == "finished" and done["progress"] == 100
    summary = done["summary"]
    assert (summary["configurations"], summary["succeeded"], summary["failed"]) == (6, 6, 0)
    rows = SweepResult.objects.filter(sweep_id=sweep_id)
    best = max((s["throughput_tok_s"], r.index) for r in rows for s in r.result["systems"])
    assert summary["best"]["throughput_tok_s"]["index"] == best[1]

    as_csv = alice.get(f"/api/sweeps/{sweep_id}/results/?format=csv")
    table = list(csv.DictReader(io.StringIO(as_csv.content.decode())))
    assert len(table) == 12  # six configurations × two systems
    assert list(table[0])[:5] == ["index", "gpus", "rate", "status", "error"]
    assert {r["system"] for r in table} == {"1xA100", "1xH100"}


@executes_chunks[0]
@executes_chunks[1]
def test_a_failing_configuration_is_recorded_with_its_message_and_not_retried(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    # A policy the core does not implement: that configuration fails with a clear message.
    policy = {"path": "systems[0].policy", "values": ["homogeneous", "policy-of-the-future"]}
    template = dict(document)
    template["systems"] = [dict(document["systems"][1])]
    sweep_id = alice.post("/api/sweeps/", body(template, policy), format="json").json()["id"]
    (chunk,) = SweepChunk.objects.filter(sweep_id=sweep_id)
    assert run_sweep_chunk(chunk.pk) == "done"
    failed = alice.get(f"/api/sweeps/{sweep_id}/results/?status=failed").json()["results"]
    assert len(failed) == 1 and failed[0]["index"] == 1
    assert "'policy-of-the-future' is not implemented" in failed[0]["error"]
    assert alice.get(f"/api/sweeps/{sweep_id}/results/?status=bogus").status_code == 400
    assert SweepChunk.objects.get(pk=chunk.pk).attempts == 1
    reconcile_sweeps()  # the reconciler finalises a fully recorded sweep
    assert Sweep.objects.get(pk=sweep_id).status == SweepStatus.FINISHED


@executes_chunks[0]
@executes_chunks[1]
def test_cancel_stops_a_sweep_and_keeps_what_was_recorded(
    alice: APIClient, catalog: Any, document: dict
) -> None:
    sweep_id = alice.post(
        "/api/sweeps/", body(document, COUNT, RATE, chunk_size=3), format="json"
    ).json()["id"]
    first, second = SweepChunk.objects.filter(sweep_id=sweep_id).order_by("number")
    run_sweep_chunk(first.pk)
    cancelled = alice.post(f"/api/sweeps/{sweep_id}/cancel/").json()
    assert cancelled["status"] == "cancelled" and cancelled["succeeded_count"] == 3
    assert run_sweep_chunk(second.pk) == "not claimed"
    assert SweepResult.objects.filter(sweep_id=sweep_id).count() == 3
    assert len(alice.get(f"/api/sweeps/{sweep_id}/results/").json()["results"]) == 3


@executes_chunks[0]
@executes_chunks[1]
def test_a_chunk_delivered_three_times_without_finishing_gives_up_on_its_rest(
    user: Any, catalog: Any, document: dict, settings: Any
) -> None:
    sweep = sweep_services.sweep_create(
        owner=user, name="poison", template=document, axes=[COUNT], chunk_size=3
    )
    (chunk,) = SweepChunk.objects.filter(sweep=sweep)
    SweepChunk.objects.filter(pk=chunk.pk).update(
        attempts=settings.HETPLANNER_MAX_ATTEMPTS, status=ChunkStatus.QUEUED
    )
    assert run_sweep_chunk(chunk.pk) == "not claimed"
    rows = SweepResult.objects.filter(sweep=sweep)
    assert rows.count() == 3 and set(rows.values_list("status", flat=True)) == {"failed"}
    assert "gave up after 3 attempts" in rows.first().error
    assert Sweep.objects.get(pk=sweep.pk).failed_count == 3


def test_the_quota_of_active_sweeps_per_user(
    alice: APIClient, catalog: Any, document: dict, settings: Any
) -> None:
    settings.HETPLANNER_MAX_ACTIVE_SWEEPS_PER_USER = 1
    assert alice.post("/api/sweeps/", body(document, COUNT), format="json").status_code == 202
    over = alice.post("/api/sweeps/", body(document, COUNT), format="json")
    assert over.status_code == 429 and "active sweeps per user" in over.json()["detail"]
    assert Sweep.objects.count() == 1


@executes_chunks[0]
@executes_chunks[1]
def test_a_chunk_past_its_soft_time_limit_records_its_rest_as_failed(
    user: Any, catalog: Any, document: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    import simulations.core.simulate as core_simulate

    real = core_simulate.simulate
    calls: list[int] = []

    def slow_after_first(spec: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise SoftTimeLimitExceeded()
        return real(spec, **kwargs)

    monkeypatch.setattr(core_simulate, "simulate", slow_after_first)
    sweep = sweep_services.sweep_create(
        owner=user, name="slow", template=document, axes=[COUNT], chunk_size=3
    )
    (chunk,) = SweepChunk.objects.filter(sweep=sweep)
    assert run_sweep_chunk(chunk.pk) == "timed out"
    rows = {r.index: r for r in SweepResult.objects.filter(sweep=sweep)}
    assert rows[0].status == "succeeded"
    assert [rows[i].status for i in (1, 2)] == ["failed", "failed"]
    assert rows[1].error.startswith("the chunk exceeded the time limit of")
    assert SweepChunk.objects.get(pk=chunk.pk).status == ChunkStatus.DONE
