"""The run page shows each disaggregated system's pools and KV hand-over as a table: per pool
its role, device types and counts, instances, utilisation and KV peak; for the hand-over the
KV bytes moved, the transfer's share of request latency, the queueing at the hand-over (mean
and p90) and the backpressure events — the figures of the result's ``disaggregated`` block."""

from __future__ import annotations

import copy
import html as htmlmod
import re
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frontend.charts.base import fmt
from frontend.views import runs
from simulations.core.simulate import simulate
from simulations.runs.models import SimulationRun
from tests.core.policies.disaggregated.conftest import BASE, doc, parse

from .conftest import store_succeeded_run

#: The run page's queries on a cold page cache (the session, the user, the run, its events,
#: the deferred result), measured: 5; the pool table adds none (it is built from the stored
#: result and cached with the rest of the comparison).
RUN_PAGE_MAX_QUERIES = 5


def pools_document() -> dict[str, Any]:
    """LLaMA2-7B, 60 requests: a co-located A100 (no pool table), 1 H100 prefill with a mixed
    decode pool of 1 A100-80GB + 2 A100-40GB, and 1 A100 prefill + 1 A100 decode with little
    KV memory (memory_utilization 0.2), so that prefilled requests wait at the hand-over."""
    d = copy.deepcopy(BASE)
    d["name"] = "disaggregated pools"
    d["workload"]["requests"] = 60
    d["systems"] = [
        {
            "name": "1xA100 co-located",
            "policy": "homogeneous",
            "devices": [{"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16"}],
            "options": {"max_batch": 64},
        },
        {
            "name": "H100 prefill + mixed A100 decode",
            "policy": "disaggregated",
            "devices": [
                {"device": "h100-sxm", "count": 1, "runtime": "vllm-fp16", "role": "prefill"},
                {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
                {"device": "a100-40gb", "count": 2, "runtime": "vllm-fp16", "role": "decode"},
            ],
            "options": {"kv_link": "pcie4-x16", "memory_utilization": 0.5},
        },
        {
            "name": "1P + 1D, little KV memory",
            "policy": "disaggregated",
            "devices": [
                {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "prefill"},
                {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
            ],
            "options": {"memory_utilization": 0.2},
        },
    ]
    return d


def _rows(page: str, system: str) -> dict[str, str]:
    """The table's rows of ``system`` by pool role (HTML of the row's cells)."""
    found = re.findall(
        rf'<tr data-system="{re.escape(htmlmod.escape(system))}" data-pool="(\w+)">(.*?)</tr>',
        page,
        re.S,
    )
    return {role: htmlmod.unescape(cells) for role, cells in found}


def _cell(row: str, cls: str) -> str:
    m = re.search(rf'<td class="[^"]*\b{cls}\b"[^>]*>(.*?)</td>', row, re.S)
    assert m is not None, f"no {cls} cell in {row}"
    return m.group(1)


@pytest.mark.django_db
def test_the_run_page_tables_each_pool_and_the_hand_over_with_the_results_figures(
    alice_client: Any, seeded: Any, user: Any
) -> None:
    run = store_succeeded_run(user, pools_document())
    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        response = alice_client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    assert len(ctx.captured_queries) <= RUN_PAGE_MAX_QUERIES
    page = response.content.decode()
    assert 'id="disaggregated"' in page
    systems = {s["name"]: s for s in run.result["systems"]}
    assert _rows(page, "1xA100 co-located") == {}

    expected_types = {
        "H100 prefill + mixed A100 decode": {
            "prefill": "<code>h100-sxm</code> × 1",
            "decode": "<code>a100-80gb</code> × 1, <code>a100-40gb</code> × 2",
        },
        "1P + 1D, little KV memory": {
            "prefill": "<code>a100-80gb</code> × 1",
            "decode": "<code>a100-80gb</code> × 1",
        },
    }
    for name, types in expected_types.items():
        block = systems[name]["disaggregated"]
        rows = _rows(page, name)
        assert list(rows) == ["prefill", "decode"]
        for role, row in rows.items():
            pool = block[f"{role}_pool"]
            assert _cell(row, "role") == role
            assert _cell(row, "device-types") == types[role]
            assert _cell(row, "instances") == str(pool["instances"])
            assert _cell(row, "busy") == f"{pool['busy_fraction']:.1%}"
            assert _cell(row, "kv-peak") == f"{pool['kv_peak_fraction']:.1%}"
        # the hand-over spans both pools' rows: on the first
        hand = rows["prefill"]
        assert "kv-moved" not in rows["decode"]
        assert _cell(hand, "kv-moved") == fmt(block["kv_bytes_moved"] / 1e9)
        share = _cell(hand, "kv-share")
        assert share.startswith(f"{fmt(block['kv_transfer_share'] * 100)} %")
        assert f"{fmt(block['exposed_kv_transfer']['mean_ms'])} ms a request" in share
        queue = block["handover_queueing"]
        assert _cell(hand, "queueing") == f"{fmt(queue['mean_ms'])} / {fmt(queue['p90_ms'])}"
        assert _cell(hand, "backpressure") == (
            f'{block["backpressured"]} <span class="muted small">of {block["handed_over"]}</span>'
        )
    # the figures are not all zero: the little KV memory holds hand-overs back, and the KV
    # moved is that of the handed-over prompts
    starved = systems["1P + 1D, little KV memory"]["disaggregated"]
    assert starved["backpressured"] > 0 and starved["handover_queueing"]["p90_ms"] > 0
    assert systems["H100 prefill + mixed A100 decode"]["disaggregated"]["kv_bytes_moved"] > 0


@pytest.mark.django_db
def test_a_run_without_disaggregated_systems_shows_no_pool_table(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    page = alice_client.get(f"/runs/{glitches_run.pk}/").content.decode()
    assert 'id="disaggregated"' not in page


def test_the_pool_table_reads_the_policys_declared_block() -> None:
    system = simulate(parse(doc({"memory_utilization": 0.2}, requests=60)))["systems"][0]
    blocks = runs._blocks(system)
    assert blocks[0] is system["disaggregated"]
    # a stored result from before the block listed device types still gives a row per pool
    old = copy.deepcopy(system)
    for role in ("prefill", "decode"):
        del old["disaggregated"][f"{role}_pool"]["device_types"]
    (entry,) = runs.pool_rows([old])
    assert [p["role"] for p in entry["pools"]] == ["prefill", "decode"]
    assert entry["pools"][1]["device_types"] == []
    assert entry["pools"][1]["devices"] == system["disaggregated"]["decode_pool"]["devices"]
