"""The run page shows each parallel system's layout (TP × PP × replicas, the link), its
pipeline bubble fraction and its communication share per device, from the result."""

from __future__ import annotations

import html as htmlmod
import re
from typing import Any

import pytest

from simulations.runs.models import SimulationRun

from .conftest import store_succeeded_run

pytestmark = pytest.mark.django_db


def parallel_document() -> dict[str, Any]:
    """Llama-3.1-70B: 4×H100 TP4 (NVLink 4), 8×A100 as 2 × TP4 (PCIe 4), 4×H100 TP2 × PP2."""
    return {
        "name": "70B parallel layouts",
        "model": "llama3.1-70b",
        "workload": {
            "requests": 12,
            "input_tokens": 128,
            "output_tokens": 16,
            "arrival": {"kind": "closed"},
            "seed": 0,
        },
        "systems": [
            {
                "name": "4xH100 TP4",
                "policy": "homogeneous",
                "devices": [{"device": "h100-sxm", "count": 4, "runtime": "vllm-fp16"}],
                "options": {"max_batch": 64, "tensor_parallel": 4, "link": "nvlink4"},
            },
            {
                "name": "8xA100 2xTP4",
                "policy": "homogeneous",
                "devices": [{"device": "a100-80gb", "count": 8, "runtime": "vllm-fp16"}],
                "options": {"max_batch": 64, "tensor_parallel": 4, "link": "pcie4-x16"},
            },
            {
                "name": "4xH100 TP2 PP2",
                "policy": "homogeneous",
                "devices": [{"device": "h100-sxm", "count": 4, "runtime": "vllm-fp16"}],
                "options": {
                    "max_batch": 64,
                    "tensor_parallel": 2,
                    "pipeline_parallel": 2,
                    "micro_batches": 2,
                    "link": "nvlink4",
                },
            },
        ],
    }


def _row(page: str, system: str) -> str:
    m = re.search(rf'<tr data-system="{re.escape(system)}">(.*?)</tr>', page, re.S)
    assert m is not None, f"no parallel row for {system}"
    return htmlmod.unescape(m.group(1))


def test_the_run_page_shows_each_parallel_layout_its_bubbles_and_communication_share(
    alice_client: Any, seeded: Any, user: Any
) -> None:
    run = store_succeeded_run(user, parallel_document())
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="parallel"' in page
    systems = {s["name"]: s for s in run.result["systems"]}
    expected = {
        "4xH100 TP4": ("TP 4 × PP 1 × 1 replica", "NVLink 4 with NVSwitch", "nvlink4"),
        "8xA100 2xTP4": ("TP 4 × PP 1 × 2 replicas", "PCI Express 4.0 x16", "pcie4-x16"),
        "4xH100 TP2 PP2": ("TP 2 × PP 2 × 1 replica", "NVLink 4 with NVSwitch", "nvlink4"),
    }
    for name, (layout, link_name, slug) in expected.items():
        row = _row(page, name)
        block = systems[name]["devices"][0]["parallel"]
        assert layout in row
        assert link_name in row and f"<code>{slug}</code>" in row
        share = block["comm_share"]
        assert share > 0
        assert re.search(rf'class="num comm-share">{re.escape(f"{share:.1%}")}<', row)
        bubble = block["bubble_fraction"]
        assert re.search(rf'class="num bubble">{re.escape(f"{bubble:.1%}")}<', row)
    # pipeline bubbles: (stages − 1) / (micro-batches + stages − 1) = 1 / 3
    assert 'class="num bubble">33.3%<' in _row(page, "4xH100 TP2 PP2")
    assert "2 micro-batches" in _row(page, "4xH100 TP2 PP2")
    assert 'class="num bubble">0.0%<' in _row(page, "4xH100 TP4")


def test_a_run_without_parallel_systems_shows_no_layout_table(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    page = alice_client.get(f"/runs/{glitches_run.pk}/").content.decode()
    assert 'id="parallel"' not in page
