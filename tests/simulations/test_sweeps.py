"""Sweep expansion (pure) and the sweep services' reconciler, without a worker."""

from __future__ import annotations

import itertools
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from simulations.choices import ChunkStatus
from simulations.sweeps import services
from simulations.sweeps.expand import (
    SweepValidationError,
    check_count,
    check_template_paths,
    configuration_document,
    configuration_parameters,
    parse_axes,
    parse_path,
)
from simulations.sweeps.models import SweepChunk

TEMPLATE = {
    "name": "t",
    "model": "llama3.2-3b",
    "workload": {"requests": 5, "input_tokens": 64, "output_tokens": 8},
    "systems": [
        {"name": "s", "policy": "homogeneous", "devices": [{"device": "a100-80gb", "count": 1}]}
    ],
}
AXES = [
    {"name": "n", "path": "systems[0].devices[0].count", "values": [1, 2, 3]},
    {"name": "batch", "path": "systems[0].options.max_batch", "values": [1, 8]},
    {"name": "rate", "path": "workload.arrival", "values": [{"kind": "closed"}, None]},
]


def test_paths_parse_keys_and_positions() -> None:
    assert parse_path("systems[0].devices[12].count") == ("systems", 0, "devices", 12, "count")
    for bad in ("", "systems[", "systems[-1]", ".x", "a..b", "a[0]x", "a b", "1a"):
        with pytest.raises(ValueError):
            parse_path(bad)


def test_configurations_follow_itertools_product_order() -> None:
    axes = parse_axes(AXES)
    expected = list(itertools.product(*(a["values"] for a in AXES)))
    assert check_count(axes, 100) == len(expected) == 12
    for index, values in enumerate(expected):
        params = configuration_parameters(axes, index)
        assert tuple(params.values()) == values
        doc = configuration_document(TEMPLATE, axes, index)
        assert doc["systems"][0]["devices"][0]["count"] == values[0]
        assert doc["systems"][0]["options"]["max_batch"] == values[1]
        assert doc["workload"]["arrival"] == values[2]
    assert "options" not in TEMPLATE["systems"][0]  # the template is never modified
    with pytest.raises(IndexError):
        configuration_document(TEMPLATE, axes, 12)


def test_the_cap_names_the_first_axis_that_passes_it() -> None:
    axes = parse_axes(AXES)
    with pytest.raises(SweepValidationError) as exc:
        check_count(axes, 5)
    assert list(exc.value.errors) == ["axes[1].values"]
    assert "'batch'" in exc.value.errors["axes[1].values"][0]
    assert "at most 1 values fit" in exc.value.errors["axes[1].values"][0]


@pytest.mark.parametrize(
    ("axes", "key"),
    [
        ([{"path": "x", "values": [float("nan")]}], "axes[0].values[0]"),
        ([{"path": "x", "values": list(range(1001))}], "axes[0].values"),
        ([{"path": "x", "values": [1], "step": 2}], "axes[0].step"),
        ([{"path": "x[", "values": [1]}], "axes[0].path"),
        ([{"path": "x", "values": [1]}, {"path": "x", "values": [2]}], "axes[1].path"),
        ([{"path": "x", "name": "", "values": [1]}], "axes[0].name"),
        ([{"path": f"k{i}", "values": [1]} for i in range(9)], "axes"),
        ([], "axes"),
        ("x", "axes"),
    ],
)
def test_bad_axes_are_reported_by_position(axes: Any, key: str) -> None:
    with pytest.raises(SweepValidationError) as exc:
        parse_axes(axes)
    assert key in exc.value.errors


def test_an_axis_path_must_fit_the_template() -> None:
    axes = parse_axes([{"path": "systems[3].policy", "values": ["homogeneous"]}])
    with pytest.raises(SweepValidationError) as exc:
        check_template_paths(TEMPLATE, axes)
    assert "systems has no position 3 (it has 1)" in exc.value.errors["axes[0].path"][0]
    scalar = parse_axes([{"path": "model.name", "values": ["x"]}])
    with pytest.raises(SweepValidationError):
        check_template_paths(TEMPLATE, scalar)


def test_a_template_with_a_nul_character_is_refused_by_its_path() -> None:
    # the template's errors became a generator of one-entry dicts: an AttributeError (500)
    with pytest.raises(SweepValidationError) as exc:
        services.sweep_validate({**TEMPLATE, "name": "a\x00b"}, AXES)
    assert "template.name" in exc.value.errors, exc.value.errors


@pytest.mark.django_db
def test_the_reconciler_requeues_stale_chunks_and_resends_lost_messages(
    user: Any, builtin_catalog_rows: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(services, "_enqueue_chunks", lambda ids: None)
    monkeypatch.setattr(services, "_enqueue_chunk", sent.append)
    sweep = services.sweep_create(
        owner=user, name="r", template=TEMPLATE, axes=AXES[:1], chunk_size=1
    )
    a, b, c = SweepChunk.objects.filter(sweep=sweep).order_by("number")
    long_ago = timezone.now() - timedelta(seconds=settings.HETPLANNER_QUEUED_STALE_S + 5)
    claim = services.chunk_claim(a.pk, worker="dead:1")
    assert claim is not None and claim.attempt == 1
    SweepChunk.objects.filter(pk=a.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.HETPLANNER_HEARTBEAT_STALE_S + 1)
    )
    SweepChunk.objects.filter(pk=b.pk).update(enqueued_at=long_ago)
    out = StringIO()
    with pytest.MonkeyPatch.context() as m:
        m.setattr("django.db.transaction.on_commit", lambda fn, *args, **kwargs: fn())
        call_command("reconcile_sweeps", stdout=out)
    assert "requeued 1, re-sent 1 chunk(s)" in out.getvalue()
    assert sorted(sent) == sorted([a.pk, b.pk])
    a.refresh_from_db()
    assert (a.status, a.attempts, a.worker) == (ChunkStatus.QUEUED, 1, "")
    c.refresh_from_db()
    assert c.status == ChunkStatus.QUEUED
    # The re-queued chunk is claimed again as attempt 2.
    again = services.chunk_claim(a.pk, worker="alive:2")
    assert again is not None and again.attempt == 2


def test_sweep_tasks_are_configured_for_at_least_once_delivery(settings: Any) -> None:
    from simulations.sweeps.tasks import finalise_sweep, run_sweep_chunk

    for task in (run_sweep_chunk, finalise_sweep):
        assert task.acks_late and task.reject_on_worker_lost
    assert run_sweep_chunk.soft_time_limit < run_sweep_chunk.time_limit
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(
        "visibility_timeout", 2 * settings.CELERY_TASK_TIME_LIMIT
    )
    assert visibility >= 2 * run_sweep_chunk.time_limit
    assert (
        settings.CELERY_BEAT_SCHEDULE["reconcile-sweeps"]["task"] == "simulations.reconcile_sweeps"
    )
