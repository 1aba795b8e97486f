"""The result document (docs/architecture.md) from a hand-made engine outcome."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulations.core.engine.core import DECODE, PREFILL, TRANSFER, SimOutput, UnitReport
from simulations.core.engine.requests import RequestSet
from simulations.core.metrics import percentiles, system_result
from simulations.core.spec import SloSpec

from .engine.doubles import fpga_spec, gpu_spec, placement, system

SYSTEM = system("s", "glitches", placement(gpu_spec(), 1, "prefill"), placement(fpga_spec(), 1))


def _unit(index: int, placement: int, device: str, **kw: object) -> UnitReport:
    base = dict(
        index=index,
        placement=placement,
        device=device,
        role="",
        idle_w=10.0,
        busy_s=0.0,
        busy_j=0.0,
        prefill_s=0.0,
        decode_s=0.0,
        prefill_tokens=0,
        prefill_outputs=0,
        decode_tokens=0,
        mem_capacity_bytes=80e9,
        mem_peak_bytes=20e9,
        timeline=[],
        link_timeline=[],
        timeline_dropped=0,
    )
    base.update(kw)
    return UnitReport(**base)  # type: ignore[arg-type]


def _outcome() -> SimOutput:
    # three requests: arrivals 0, 0, 2 s; outputs 11, 1, 21 tokens
    reqs = RequestSet.from_lists([0.0, 0.0, 2.0], [100, 200, 300], [11, 1, 21])
    gpu = _unit(
        0,
        0,
        "gpu-a",
        busy_s=4.0,
        busy_j=1200.0,
        prefill_s=1.0,
        decode_s=3.0,
        timeline=[[0.0, 1.0, PREFILL, -1, 2], [2.0, 5.0, DECODE, 2, 1]],
        link_timeline=[[0.5, 1.2, TRANSFER, 0, 1, "out"]],
    )
    fpga = _unit(1, 1, "fpga-a", busy_s=6.0, busy_j=300.0, decode_s=6.0)
    return SimOutput(
        requests=reqs,
        first_token_s=np.array([1.0, 1.0, 2.5]),
        finish_s=np.array([3.0, 1.0, 10.0]),
        generated=np.array([11, 1, 21]),
        preemptions=np.zeros(3, dtype=np.int64),
        finished_on=np.array([1, 0, 0]),
        units=[gpu, fpga],
        events=42,
        extra={"note": "x", "bad": object()},
    )


def test_throughput_and_rates_use_the_window_from_first_arrival_to_last_token() -> None:
    r = system_result(SYSTEM, _outcome(), SloSpec())
    assert r["span_s"] == 10.0
    assert r["throughput_tok_s"] == pytest.approx(33 / 10)
    assert r["prompt_tok_s"] == pytest.approx(600 / 10)
    assert r["requests_per_s"] == pytest.approx(0.3)


def test_latency_distributions() -> None:
    r = system_result(SYSTEM, _outcome(), SloSpec())
    assert r["ttft_ms"]["mean"] == pytest.approx((1000 + 1000 + 500) / 3)
    assert r["ttft_ms"]["p50"] == pytest.approx(1000)
    # TPOT only over requests with at least two tokens: (3-1)/10 and (10-2.5)/20
    assert r["tpot_ms"]["mean"] == pytest.approx((200 + 375) / 2)
    assert r["e2e_s"]["p99"] == pytest.approx(np.percentile([3.0, 1.0, 8.0], 99))


def test_cost_and_energy_with_idle_power_for_the_rest_of_the_window() -> None:
    r = system_result(SYSTEM, _outcome(), SloSpec())
    assert r["capex_usd"] == 25000
    assert r["cost_efficiency_tok_s_per_usd"] == pytest.approx(3.3 / 25000)
    energy = (1200 + 10 * 6) + (300 + 10 * 4)
    assert r["energy_j"] == pytest.approx(energy)
    assert r["avg_power_w"] == pytest.approx(energy / 10)
    assert r["energy_j_per_token"] == pytest.approx(energy / 33)
    assert r["energy_efficiency_tok_s_per_w"] == pytest.approx(3.3 / (energy / 10))
    gpu, fpga = r["devices"]
    assert gpu["busy_fraction"] == pytest.approx(0.4)
    assert gpu["prefill_fraction"] == pytest.approx(0.1)
    assert gpu["energy_j"] == pytest.approx(1260)
    assert fpga["role"] == ""
    assert gpu["role"] == "prefill"


def test_a_device_without_a_price_leaves_capex_unknown() -> None:
    out = _outcome()
    fpga = dataclasses.replace(fpga_spec(), price_usd=None)
    sys_ = system("s", "glitches", placement(gpu_spec(), 1, "prefill"), placement(fpga, 1))
    r = system_result(sys_, out, SloSpec())
    assert r["capex_usd"] is None
    assert r["cost_efficiency_tok_s_per_usd"] is None


def test_slo_attainment_counts_requests_within_every_target() -> None:
    out = _outcome()
    r = system_result(SYSTEM, out, SloSpec(ttft_p90_ms=900, tpot_p90_ms=300))
    # request 0: ttft 1000 > 900; request 1: ttft 1000; request 2: ttft 500, tpot 375 > 300
    assert r["slo_attainment"] == 0.0
    assert r["slo_met"] is False
    r = system_result(SYSTEM, out, SloSpec(ttft_p90_ms=1000, tpot_p90_ms=400, e2e_p90_s=9))
    assert r["slo_attainment"] == 1.0
    assert r["slo_met"] is True
    r = system_result(SYSTEM, out, SloSpec())
    assert r["slo_attainment"] is None and r["slo_met"] is None


def test_the_timeline_fills_idle_gaps_and_lists_transfers() -> None:
    r = system_result(SYSTEM, _outcome(), SloSpec())
    gpu = r["timeline"][0]
    kinds = [(iv["kind"], iv["start_s"], iv["end_s"]) for iv in gpu["intervals"]]
    assert kinds == [
        ("prefill", 0.0, 1.0),
        ("idle", 1.0, 2.0),
        ("decode", 2.0, 5.0),
        ("idle", 5.0, 10.0),
    ]
    assert gpu["intervals"][0]["request"] is None and gpu["intervals"][0]["batch"] == 2
    assert gpu["intervals"][2]["request"] == 2
    assert gpu["transfers"] == [
        {"start_s": 0.5, "end_s": 1.2, "kind": "transfer", "request": 0, "lane": "pcie-out"}
    ]
    assert r["timeline"][1]["intervals"] == [
        {"start_s": 0.0, "end_s": 10.0, "kind": "idle", "request": None, "batch": 0}
    ]


def test_only_json_friendly_scheduler_notes_are_kept() -> None:
    r = system_result(SYSTEM, _outcome(), SloSpec())
    assert r["scheduler"] == {"note": "x"}
    assert r["events"] == 42


def test_percentiles_of_nothing_are_none() -> None:
    assert percentiles(np.array([])) == {"mean": None, "p50": None, "p90": None, "p99": None}
