"""Sweeps on real Celery worker processes: chunked fan-out, exactly-once recording when a
worker child is killed mid-sweep, the finaliser."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from simulations.choices import ChunkStatus
from simulations.sweeps import services as sweep_services
from simulations.sweeps.models import (
    ConfigurationStatus,
    Sweep,
    SweepChunk,
    SweepResult,
    SweepStatus,
)
from tests.helpers import stopped_if, wait_for
from tests.integration.tuned_workers import (  # noqa: F401  (the fixture)
    TunedWorker,
    tuned_worker_factory_fixture,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


TEMPLATE = {
    "name": "A100 count × Poisson rate",
    "model": "llama3.2-3b",
    "workload": {
        "requests": 300,
        "input_tokens": {"dist": "uniform", "low": 64, "high": 512},
        "output_tokens": {"dist": "uniform", "low": 16, "high": 128},
        "arrival": {"kind": "poisson", "rate_per_s": 10.0},
        "seed": 11,
    },
    "systems": [
        {
            "name": "A100s",
            "policy": "homogeneous",
            "devices": [{"device": "a100-80gb", "count": 1}],
            "options": {"max_batch": 16},
        }
    ],
    "slo": {"ttft_p90_ms": 500, "tpot_p90_ms": 50},
}
AXES = [
    {"name": "gpus", "path": "systems[0].devices[0].count", "values": [1, 2, 3, 4, 5]},
    {
        "name": "rate",
        "path": "workload.arrival.rate_per_s",
        "values": [float(r) for r in range(5, 205, 5)],
    },
]


def sweep_row(sweep: Sweep) -> dict[str, Any]:
    return Sweep.objects.filter(pk=sweep.pk).values().get()


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.fixture
def catalog(builtin_catalog_rows: Any) -> Any:
    return builtin_catalog_rows


@pytest.mark.usefixtures("catalog")
def test_sigkill_of_a_worker_child_mid_sweep_records_every_configuration_exactly_once(
    tuned_worker_factory: Any, user: Any
) -> None:
    worker: TunedWorker = tuned_worker_factory()
    sweep = sweep_services.sweep_create(
        owner=user, name="kill a child", template=TEMPLATE, axes=AXES, chunk_size=10
    )
    assert sweep.total == 200
    assert SweepChunk.objects.filter(sweep=sweep).count() == 20

    def chunk_on_our_child() -> dict[str, Any] | None:
        if sweep_row(sweep)["succeeded_count"] < 30:
            return None
        for chunk in SweepChunk.objects.filter(sweep=sweep, status=ChunkStatus.RUNNING).values():
            if chunk["worker"]:
                pid = int(chunk["worker"].rsplit(":", 1)[1])
                if pid in worker.pool_children():
                    return chunk
        return None

    def stopped_holding_a_chunk() -> tuple[str, list[int]] | None:
        """A pool child frozen (SIGSTOP) while it still holds a running chunk: a chunk takes
        a fraction of a second, so without the freeze it may finish between the look-up and
        the kill."""
        chunk = chunk_on_our_child()
        if chunk is None:
            return None
        victim = int(chunk["worker"].rsplit(":", 1)[1])
        held = stopped_if(
            victim,
            lambda: list(
                SweepChunk.objects.filter(
                    sweep=sweep, status=ChunkStatus.RUNNING, worker=chunk["worker"]
                ).values_list("pk", flat=True)
            ),
        )
        return (chunk["worker"], held) if held else None

    try:
        holder, interrupted = wait_for(stopped_holding_a_chunk, timeout_s=120, interval_s=0.05)
    except pytest.fail.Exception:
        print(worker.log_text()[-5000:])
        raise
    victim = int(holder.rsplit(":", 1)[1])
    assert parent_of(victim) == worker.proc.pid, "must be a pool child, not the worker"
    # The chunk(s) the child held when it died: frozen, so still running in the database.
    os.kill(victim, signal.SIGKILL)
    recorded_at_kill = sweep_row(sweep)["succeeded_count"]
    assert recorded_at_kill < 200, "the sweep finished before the kill; make it longer"

    try:
        final = wait_for(
            lambda: (r := sweep_row(sweep))["status"] == SweepStatus.FINISHED and r,
            timeout_s=180,
        )
    except pytest.fail.Exception:
        print(worker.log_text()[-5000:])
        raise
    indexes = sorted(SweepResult.objects.filter(sweep=sweep).values_list("index", flat=True))
    assert indexes == list(range(200))  # every configuration, exactly once
    assert final["succeeded_count"] == 200 and final["failed_count"] == 0
    assert (
        not SweepResult.objects.filter(sweep=sweep)
        .exclude(status=ConfigurationStatus.SUCCEEDED)
        .exists()
    )
    for killed in SweepChunk.objects.filter(pk__in=interrupted):
        assert killed.status == ChunkStatus.DONE
        assert killed.attempts >= 2  # delivered again after its worker child died
    assert set(SweepChunk.objects.filter(sweep=sweep).values_list("status", flat=True)) == {
        ChunkStatus.DONE
    }
    summary = final["summary"]
    assert summary["configurations"] == 200 and summary["succeeded"] == 200
    best = summary["best"]["throughput_tok_s"]
    top = max(
        s["throughput_tok_s"]
        for r in SweepResult.objects.filter(sweep=sweep).values_list("result", flat=True)
        for s in r["systems"]
    )
    assert best["value"] == pytest.approx(top)
    # Parameters recorded per configuration follow the axes (last axis fastest).
    r43 = SweepResult.objects.get(sweep=sweep, index=43)
    assert r43.parameters == {"gpus": 2, "rate": 20.0}
