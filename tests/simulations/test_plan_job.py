"""The capacity-search job's services and tasks, executed in-process with ``Task.apply``
(no broker): rounds fanned out as chunks, each configuration recorded once, redelivery,
give-up after repeated worker loss, cancellation, quotas and visibility.

``transaction=True``: the tasks' heartbeat threads use their own database connections,
and ``on_commit`` must fire to queue (here: record) the next messages.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from simulations.choices import ChunkStatus, RunStatus
from simulations.core.errors import ScenarioValidationError
from simulations.core.planner import Search
from simulations.jobs import QuotaExceededError
from simulations.plans import selectors, services, tasks
from simulations.plans.models import Plan, PlanChunk, PlanResult, PlanStage
from tests.core.planner.helpers import neo_doc, parse, small_doc

pytestmark = pytest.mark.django_db(transaction=True)


class Outbox:
    """Captures the messages the services would send, and delivers them on demand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.stages: list[int] = []
        self.chunks: list[int] = []
        monkeypatch.setattr(services, "_enqueue_stage", self.stages.append)
        monkeypatch.setattr(services, "_enqueue_chunks", self.chunks.extend)

    def deliver_all(self, *, limit: int = 500) -> None:
        for _ in range(limit):
            if self.chunks:
                tasks.run_plan_chunk.apply(args=(self.chunks.pop(0),))
            elif self.stages:
                tasks.advance_plan.apply(args=(self.stages.pop(0),))
            else:
                return
        raise AssertionError("the plan did not settle")


@pytest.fixture
def outbox(monkeypatch: pytest.MonkeyPatch) -> Outbox:
    return Outbox(monkeypatch)


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    tasks._searches.clear()
    tasks._specs.clear()


def _doc(**search: Any) -> dict[str, Any]:
    return small_doc(search={"sensitivity": False, "round_size": 4, **search})


def test_creating_a_plan_validates_it_and_queues_its_screen(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    plan = services.plan_create(spec=_doc(), owner=user)
    assert plan.status == RunStatus.QUEUED and plan.stage == PlanStage.SCREEN
    assert outbox.stages == [plan.pk]
    bad = _doc()
    bad["space"]["devices"][0]["device"] = "a999"
    with pytest.raises(ScenarioValidationError) as err:
        services.plan_create(spec=bad, owner=user)
    assert "space.devices[0].device" in err.value.errors
    assert Plan.objects.count() == 1


def test_the_job_reaches_the_in_process_answer_recording_each_configuration_once(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    doc = _doc()
    plan = services.plan_create(spec=doc, owner=user)
    seen: list[int] = []
    # Deliver step by step to watch the progress rise.
    for _ in range(500):
        if not (outbox.chunks or outbox.stages):
            break
        if outbox.chunks:
            tasks.run_plan_chunk.apply(args=(outbox.chunks.pop(0),))
        else:
            tasks.advance_plan.apply(args=(outbox.stages.pop(0),))
        seen.append(selectors.plan_progress(Plan.objects.get(pk=plan.pk)))
    plan.refresh_from_db()
    assert plan.status == RunStatus.SUCCEEDED, plan.error
    assert seen == sorted(seen) and seen[-1] == 100
    local = Search(parse(doc)).run()
    assert plan.result["recommendation"]["key"] == local["recommendation"]["key"]
    assert [e["key"] for e in plan.result["evaluated"]] == [e["key"] for e in local["evaluated"]]
    assert plan.result["pareto"] == local["pareto"]
    keys = list(PlanResult.objects.filter(plan=plan).values_list("key", flat=True))
    assert len(keys) == len(set(keys)) == plan.confirmed == len(local["evaluated"])
    assert plan.round == local["confirmation"]["rounds"] == plan.result["confirmation"]["rounds"]
    assert not PlanChunk.objects.filter(plan=plan).exclude(status=ChunkStatus.DONE).exists()
    points = selectors.plan_pareto_points(plan)
    assert {p["key"] for p in points if p["on_front"]} == {
        p["key"] for p in local["pareto"]["capex_vs_throughput"]
    } | {p["key"] for p in local["pareto"]["capex_vs_energy_per_token"]}


def test_a_neo_plan_with_quoted_prices_runs_as_a_job_to_the_in_process_answer(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    doc = neo_doc()
    plan = services.plan_create(spec=doc, owner=user)
    outbox.deliver_all()
    plan.refresh_from_db()
    assert plan.status == RunStatus.SUCCEEDED, plan.error
    local = Search(parse(doc)).run()
    assert plan.result["recommendation"]["key"] == local["recommendation"]["key"]
    assert plan.result["pareto"] == local["pareto"]
    assert [d["price_source"] for d in plan.result["per_device_type"]] == [
        d["price_source"] for d in local["per_device_type"]
    ]
    stored = PlanResult.objects.get(plan=plan, key=local["recommendation"]["key"])
    assert stored.capex_usd == local["recommendation"]["capex_usd"]


def test_a_chunk_redelivered_after_its_worker_died_records_only_what_is_missing(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    plan = services.plan_create(spec=_doc(), owner=user)
    tasks.advance_plan.apply(args=(outbox.stages.pop(0),))
    chunk_id = outbox.chunks.pop(0)
    # A worker claims the chunk, records its first configuration and dies.
    claim = services.chunk_claim(chunk_id, worker="dead:1")
    assert claim is not None
    from simulations.core.planner import evaluate_config
    from simulations.core.planner.space import config_from_dict

    spec = services.plan_validate(plan.document)
    first = config_from_dict(claim.configs[0], spec)
    services.result_record(claim, evaluate_config(spec, first).as_dict(), capex_usd=first.capex_usd)
    # Its message comes back (acks_late) while the heartbeat is fresh: not claimable.
    assert tasks.run_plan_chunk.apply(args=(chunk_id,)).get() == "not claimed"
    # The heartbeat goes stale; the reconciler re-queues and re-sends it.
    old = timezone.now() - timedelta(seconds=settings.HETPLANNER_HEARTBEAT_STALE_S + 5)
    PlanChunk.objects.filter(pk=chunk_id).update(heartbeat_at=old)
    report = services.plans_reconcile()
    assert report.chunks_requeued == [chunk_id]
    assert outbox.chunks.count(chunk_id) == 1
    outbox.deliver_all()
    plan.refresh_from_db()
    assert plan.status == RunStatus.SUCCEEDED, plan.error
    assert PlanResult.objects.filter(plan=plan, key=first.key).count() == 1
    assert PlanChunk.objects.get(pk=chunk_id).attempts == 2
    assert plan.confirmed == PlanResult.objects.filter(plan=plan).count()


def test_a_chunk_that_keeps_losing_its_worker_gives_up_and_the_plan_says_so(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    plan = services.plan_create(spec=_doc(), owner=user)
    tasks.advance_plan.apply(args=(outbox.stages.pop(0),))
    chunk_id = outbox.chunks[0]
    PlanChunk.objects.filter(pk=chunk_id).update(attempts=settings.HETPLANNER_MAX_ATTEMPTS)
    outbox.deliver_all()
    plan.refresh_from_db()
    assert plan.status == RunStatus.SUCCEEDED, plan.error
    lost = PlanResult.objects.filter(plan=plan, evaluation__unknown=True)
    assert lost.count() == len(PlanChunk.objects.get(pk=chunk_id).configs)
    conf = plan.result["confirmation"]
    assert conf["complete"] is False and sorted(conf["no_verdict"]) == sorted(
        lost.values_list("key", flat=True)
    )


def test_a_stage_that_keeps_losing_its_worker_fails_the_plan(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    plan = services.plan_create(spec=_doc(), owner=user)
    Plan.objects.filter(pk=plan.pk).update(stage_attempts=settings.HETPLANNER_MAX_ATTEMPTS)
    assert tasks.advance_plan.apply(args=(plan.pk,)).get() == "not claimed"
    plan.refresh_from_db()
    assert plan.status == RunStatus.FAILED and "gave up after" in plan.error


def test_a_screen_whose_worker_died_is_requeued_and_the_next_claim_counts_the_attempt(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    plan = services.plan_create(spec=_doc(), owner=user)
    outbox.stages.clear()
    claim = services.stage_claim(plan.pk, worker="dead:1")
    assert claim is not None and claim.attempt == 1
    # A second delivery while the heartbeat is fresh does not take the stage.
    assert services.stage_claim(plan.pk, worker="w:2") is None
    old = timezone.now() - timedelta(seconds=settings.HETPLANNER_HEARTBEAT_STALE_S + 5)
    Plan.objects.filter(pk=plan.pk).update(heartbeat_at=old)
    report = services.plans_reconcile()
    assert report.stages_requeued == [plan.pk]
    assert outbox.stages == [plan.pk]
    row = Plan.objects.values("status", "stage_status", "stage_attempts", "worker").get(pk=plan.pk)
    assert row == {
        "status": RunStatus.RUNNING,
        "stage_status": "queued",
        "stage_attempts": 1,
        "worker": "",
    }
    again = services.stage_claim(plan.pk, worker="w:3")
    assert again is not None and again.attempt == 2 and again.stage == PlanStage.SCREEN


def test_a_cancelled_plan_stops_and_keeps_what_was_recorded(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox
) -> None:
    plan = services.plan_create(spec=_doc(), owner=user)
    tasks.advance_plan.apply(args=(outbox.stages.pop(0),))
    tasks.run_plan_chunk.apply(args=(outbox.chunks.pop(0),))
    recorded = PlanResult.objects.filter(plan=plan).count()
    assert services.plan_cancel(plan=plan, user=user) is True
    assert services.plan_cancel(plan=plan, user=user) is False
    outbox.deliver_all()
    plan.refresh_from_db()
    assert plan.status == RunStatus.CANCELLED and plan.result is None
    assert PlanResult.objects.filter(plan=plan).count() == recorded > 0


def test_only_the_owner_sees_or_cancels_a_plan(
    builtin_catalog_rows: Any, user: Any, other_user: Any, outbox: Outbox
) -> None:
    plan = services.plan_create(spec=_doc(), owner=user)
    assert list(selectors.plans_visible_to(user)) == [plan]
    assert not selectors.plans_visible_to(other_user).exists()
    with pytest.raises(Plan.DoesNotExist):
        selectors.plan_get_for(other_user, plan.pk)
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.plan_cancel(plan=plan, user=other_user)


def test_a_user_may_have_only_so_many_active_plans(
    builtin_catalog_rows: Any, user: Any, outbox: Outbox, settings: Any
) -> None:
    settings.HETPLANNER_MAX_ACTIVE_PLANS_PER_USER = 2
    services.plan_create(spec=_doc(), owner=user)
    services.plan_create(spec=_doc(), owner=user)
    with pytest.raises(QuotaExceededError):
        services.plan_create(spec=_doc(), owner=user)
    assert Plan.objects.count() == 2
