"""The capacity-search job on real Celery worker processes: the screen, rounds
fanned out as groups of chunk tasks, the decide stage and the load sensitivity, and
exactly-once recording when a worker child is killed mid-plan.

Against PostgreSQL and Redis when ``DATABASE_URL``/``REDIS_URL`` are set (``.ci/run`` sets
them), against the embedded defaults (SQLite file, filesystem broker) otherwise.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from simulations.choices import FINAL_STATUSES, ChunkStatus, RunStatus
from simulations.core.planner import Search
from simulations.plans import selectors, services
from simulations.plans.models import Plan, PlanChunk, PlanResult
from tests.conftest import WorkerProcess
from tests.core.planner.helpers import parse, small_doc
from tests.helpers import stopped_if, wait_for
from tests.integration.tuned_workers import (  # noqa: F401  (the fixture)
    TunedWorker,
    tuned_worker_factory_fixture,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def plan_row(plan: Plan) -> dict[str, Any]:
    return Plan.objects.filter(pk=plan.pk).values().get()


def final(plan: Plan, worker: WorkerProcess, timeout_s: float) -> dict[str, Any]:
    try:
        return wait_for(
            lambda: (r := plan_row(plan))["status"] in FINAL_STATUSES and r,
            timeout_s=timeout_s,
            interval_s=0.1,
        )
    except pytest.fail.Exception:
        print(worker.log_text()[-5000:])
        raise


def same_answer(stored: dict[str, Any], local: dict[str, Any]) -> None:
    assert (stored["recommendation"] or {}).get("key") == (local["recommendation"] or {}).get("key")
    assert [e["key"] for e in stored["evaluated"]] == [e["key"] for e in local["evaluated"]]
    assert stored["pareto"]["capex_vs_throughput"] == local["pareto"]["capex_vs_throughput"]
    assert stored["per_device_type"] == local["per_device_type"]


@pytest.mark.usefixtures("builtin_catalog_rows")
def test_a_plan_runs_on_a_real_worker_to_the_in_process_answer(
    live_worker: WorkerProcess, user: Any
) -> None:
    doc = small_doc(search={"round_size": 4, "sensitivity": True, "load_tolerance": 0.05})
    plan = services.plan_create(spec=doc, owner=user)
    seen = []

    def progressed() -> bool:
        row = Plan.objects.get(pk=plan.pk)
        seen.append(selectors.plan_progress(row))
        return row.is_final

    wait_for(progressed, timeout_s=180, interval_s=0.05)
    row = final(plan, live_worker, 5)
    assert row["status"] == RunStatus.SUCCEEDED, row["error"]
    assert seen[-1] == 100 and seen == sorted(seen)
    stored = row["result"]
    local = Search(parse(doc)).run()
    same_answer(stored, local)
    assert stored["sensitivity"]["holds_up_to_load_factor"] == pytest.approx(
        local["sensitivity"]["holds_up_to_load_factor"]
    )
    keys = list(PlanResult.objects.filter(plan=plan).values_list("key", flat=True))
    assert len(keys) == len(set(keys)) == row["confirmed"] == len(local["evaluated"])
    assert row["round"] == local["confirmation"]["rounds"] >= 2
    chunks = PlanChunk.objects.filter(plan=plan)
    assert chunks.count() > row["round"]  # rounds were split into several chunk tasks
    assert not chunks.exclude(status=ChunkStatus.DONE).exists()


@pytest.mark.usefixtures("builtin_catalog_rows")
def test_sigkill_of_a_worker_child_mid_plan_records_every_configuration_once(
    tuned_worker_factory: Any, user: Any
) -> None:
    worker: TunedWorker = tuned_worker_factory()
    doc = small_doc(search={"round_size": 6, "sensitivity": False})
    doc["workload"]["requests"] = 600
    plan = services.plan_create(spec=doc, owner=user)

    def chunk_on_our_child() -> dict[str, Any] | None:
        if PlanResult.objects.filter(plan=plan).count() < 3:
            return None
        for chunk in PlanChunk.objects.filter(plan=plan, status=ChunkStatus.RUNNING).values():
            if chunk["worker"]:
                pid = int(chunk["worker"].rsplit(":", 1)[1])
                if pid in worker.pool_children():
                    return chunk
        return None

    def stopped_holding_a_chunk() -> dict[str, Any] | None:
        chunk = chunk_on_our_child()
        if chunk is None:
            return None
        keys = [c["key"] for c in chunk["configs"]]

        def holds_unrecorded_work() -> bool:
            # A chunk whose configurations are all recorded needs no second delivery: the
            # round completes without it, so a kill then would test nothing (and leave the
            # chunk at one attempt).
            running = PlanChunk.objects.filter(pk=chunk["id"], status=ChunkStatus.RUNNING)
            return running.exists() and len(services.recorded_keys(plan.pk, keys)) < len(keys)

        return stopped_if(int(chunk["worker"].rsplit(":", 1)[1]), holds_unrecorded_work) and chunk

    try:
        chunk = wait_for(stopped_holding_a_chunk, timeout_s=180, interval_s=0.02)
    except pytest.fail.Exception:
        print(worker.log_text()[-5000:])
        raise
    os.kill(int(chunk["worker"].rsplit(":", 1)[1]), signal.SIGKILL)
    assert plan_row(plan)["status"] == RunStatus.RUNNING, "finished before the kill"
    row = final(plan, worker, 240)
    assert row["status"] == RunStatus.SUCCEEDED, row["error"]
    keys = list(PlanResult.objects.filter(plan=plan).values_list("key", flat=True))
    assert len(keys) == len(set(keys)) == row["confirmed"]
    assert not PlanResult.objects.filter(plan=plan, evaluation__unknown=True).exists()
    assert PlanChunk.objects.get(pk=chunk["id"]).attempts >= 2
    assert row["result"]["recommendation"] is not None
    same_answer(row["result"], Search(parse(doc)).run())
