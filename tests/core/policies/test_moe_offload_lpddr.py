"""``moe-offload`` with ``cold_tier`` lpddr: hot experts in a board's HBM, cold ones in its
LPDDR computed by the LPDDR chip or streamed across the interconnect (H2M2's hardware)."""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from simulations.core.engine.requests import generate_requests
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.graph import (
    OpKind,
    Precision,
    expert_load,
    expert_params,
    offloaded_expert_load,
    routed_expert_ops,
)
from simulations.core.policies.moe_offload import MoeOffloadPolicy
from simulations.core.policies.moe_offload.offload import resident_model
from simulations.core.policies.moe_offload.tiered import (
    SideModel,
    TieredBoard,
    board_hardware,
    op_seconds,
)
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    DevicePlacement,
    LengthDist,
    LengthDistKind,
    MemoryTier,
    SystemSpec,
    WorkloadSpec,
)
from tests.core.moe.catalog import moe_catalog, moe_model

CAT = moe_catalog()
MIXTRAL = moe_model("mixtral-8x7b")
QWEN = moe_model("qwen3-30b-a3b")
BOARD = CAT.device("h2m2")
INT8 = CAT.runtime("h2m2-int8")

DOC: dict[str, Any] = {
    "name": "hbm+lpddr",
    "model": "mixtral-8x22b",
    "workload": {
        "requests": 24,
        "input_tokens": 256,
        "output_tokens": 32,
        "arrival": {"kind": "poisson", "rate_per_s": 1.0},
        "seed": 3,
    },
    "systems": [
        {
            "name": "split",
            "policy": "moe-offload",
            "devices": [{"device": "h2m2", "count": 1, "role": "gpu", "runtime": "h2m2-int8"}],
            "options": {"max_batch": 16, "cold_tier": "lpddr"},
        },
        {
            "name": "lpddr-only",
            "policy": "moe-offload",
            "devices": [{"device": "h2m2", "count": 1, "role": "gpu", "runtime": "h2m2-int8"}],
            "options": {"max_batch": 16, "cold_tier": "lpddr-only"},
        },
    ],
}


def _board(
    resident: int, mode: str = "auto", device: Any = BOARD, overlap: bool = False
) -> TieredBoard:
    return TieredBoard(device, INT8, resident, mode, overlap)


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    return simulate(parse_scenario(doc, CAT))


def test_cold_expert_bytes_are_read_at_lpddr_bandwidth() -> None:
    board = _board(2, "lpddr")
    c = board.cold_layer(MIXTRAL, 1)
    hw = board_hardware(BOARD)
    assert hw.lpddr.bw_gbps == 544.0  # H2M2 Table 1
    load = offloaded_expert_load(replace(MIXTRAL.moe, resident_experts=2), 1)
    ops = routed_expert_ops(MIXTRAL, load, 1, Precision.of(INT8))
    # the touched cold experts' INT8 weights, all of them read by the LPDDR chip
    assert sum(op.weight_bytes for op in ops) == pytest.approx(c.cold_bytes, rel=1e-12)
    assert c.cold_bytes == pytest.approx(c.distinct * expert_params(MIXTRAL), rel=1e-12)
    acts = 2.0 * c.routed * MIXTRAL.hidden_size * 1.0 / (hw.link_gbps * 1e9)
    gemms = [op for op in ops if op.kind is OpKind.GEMM]
    rest = [op for op in ops if op.kind is not OpKind.GEMM]
    assert sum(op.weight_bytes for op in gemms) == pytest.approx(c.cold_bytes, rel=1e-12)
    # one decode token: the expert GEMMs are memory-bound, every byte at 544 GB/s
    read = sum(op.bytes for op in gemms)
    others = sum(op_seconds(hw.lpddr, op) for op in rest) + acts
    lat = len(gemms) * hw.lpddr.latency_s
    assert c.lpddr_s == pytest.approx(read / 544e9 + lat + others, rel=1e-12)
    # twice the LPDDR bandwidth halves the GEMMs' share of the layer
    fast = replace(
        BOARD,
        memory=(BOARD.memory[0], MemoryTier(BOARD.memory[1].kind, 512.0, 1088.0)),
    )
    c2 = _board(2, "lpddr", fast).cold_layer(MIXTRAL, 1)
    others2 = sum(op_seconds(board_hardware(fast).lpddr, op) for op in rest) + acts
    assert c2.lpddr_s - lat - others2 == pytest.approx(read / 1088e9, rel=1e-12)


def test_the_rule_takes_the_faster_of_the_lpddr_chip_and_streaming() -> None:
    auto, near, stream = _board(2), _board(2, "lpddr"), _board(2, "stream")
    for tokens in (1, 16, 256, 8192):
        a, n, s = (b.cold_layer(MIXTRAL, tokens) for b in (auto, near, stream))
        assert a.seconds == min(n.seconds, s.seconds)
        assert a.runs_on == ("lpddr" if n.seconds <= s.seconds else "stream")
    # one decode token: streaming reads the same bytes out of LPDDR, then computes on a like chip
    assert auto.cold_layer(MIXTRAL, 1).runs_on == "lpddr"


@pytest.mark.parametrize("mode", ["auto", "lpddr", "stream"])
@pytest.mark.parametrize("model", [MIXTRAL, QWEN], ids=["mixtral-8x7b", "qwen3-30b-a3b"])
def test_more_hbm_never_slows_a_step(mode: str, model: Any) -> None:
    e = model.moe.n_experts
    residents = sorted({1, 2, 3, e // 4, e // 2, e - 1, e})
    for batch in (1, 8, 64, 256):
        steps = [_board(r, mode).decode_step(model, batch, batch * 512).seconds for r in residents]
        assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(steps)), steps
    prefills = [_board(r, mode).prefill(model, [512, 512]).seconds for r in residents]
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(prefills))


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("mode", ["auto", "lpddr", "stream"])
def test_all_experts_in_hbm_is_identical_to_no_offload(mode: str, overlap: bool) -> None:
    board = _board(MIXTRAL.moe.n_experts, mode, overlap=overlap)
    hbm = SideModel(BOARD, INT8, board_hardware(BOARD).hbm)
    for batch in (1, 32):
        assert board.decode_step(MIXTRAL, batch, 4096) == hbm.decode_step(MIXTRAL, batch, 4096)
    assert board.prefill(MIXTRAL, [300, 700]) == hbm.prefill(MIXTRAL, [300, 700])
    assert board.weights_bytes(MIXTRAL) == hbm.weights_bytes(MIXTRAL)
    assert board.lpddr_weights_bytes(MIXTRAL) == 0.0


def test_at_batch_1_a_step_touches_about_top_k_experts() -> None:
    for model in (MIXTRAL, QWEN):
        moe = model.moe
        for zipf in (0.0, 1.2):
            m = model.with_routing_zipf(zipf)
            for r in (1, moe.n_experts // 2, moe.n_experts - 1):
                hot = expert_load(resident_model(m, r).moe, 1).distinct
                cold = _board(r).cold_layer(m, 1).distinct
                assert hot + cold == pytest.approx(moe.experts_per_token, rel=1e-9)
    # a large batch touches nearly every cold expert
    assert _board(2).cold_layer(MIXTRAL, 256).distinct == pytest.approx(6.0, rel=1e-6)


def test_with_overlap_the_lpddr_chip_adds_only_what_outlasts_the_hot_experts() -> None:
    for tokens in (1, 32, 1024):
        serial = _board(3, "lpddr").cold_layer(MIXTRAL, tokens)
        both = _board(3, "lpddr", overlap=True).cold_layer(MIXTRAL, tokens)
        assert both.hot_s > 0
        assert both.lpddr_s == serial.lpddr_s
        assert both.seconds == pytest.approx(max(0.0, serial.lpddr_s - both.hot_s), abs=0)
    for batch in (1, 8, 64, 256):
        for r in (1, 3, 6, 7):
            serial_s = _board(r).decode_step(MIXTRAL, batch, batch * 512).seconds
            both_s = _board(r, overlap=True).decode_step(MIXTRAL, batch, batch * 512).seconds
            assert both_s <= serial_s


def test_under_skewed_routing_the_hbm_keeps_the_popular_experts() -> None:
    skewed = MIXTRAL.with_routing_zipf(1.5)
    uniform, hot_first = _board(4).cold_layer(MIXTRAL, 1), _board(4).cold_layer(skewed, 1)
    assert uniform.distinct == pytest.approx(1.0, rel=1e-12)  # 4 of 8, top-2
    assert hot_first.distinct < 0.6 * uniform.distinct
    assert (
        _board(4).decode_step(skewed, 1, 512).seconds
        < _board(4).decode_step(MIXTRAL, 1, 512).seconds
    )


def test_a_model_whose_experts_all_fit_the_hbm_runs_as_without_offload() -> None:
    doc = copy.deepcopy(DOC)
    doc["model"] = "mixtral-8x7b"  # 47 GB in INT8: every expert fits the 96 GB HBM
    doc["systems"] = [copy.deepcopy(DOC["systems"][0]) for _ in range(2)]
    doc["systems"][1]["name"] = "forced stream"
    doc["systems"][1]["options"]["offload_mode"] = "stream"
    a, b = _run(doc)["systems"]
    block = a["scheduler"]["expert_offload"]
    assert block["hbm_experts_per_layer"] == 8
    assert block["lpddr_weights_gb"] == 0.0
    assert block["decode_max_batch"]["runs_on"] == "none"
    for key in ("ttft_ms", "tpot_ms", "throughput_tok_s", "energy_j"):
        assert a[key] == b[key]


def test_the_hbm_holds_the_resident_part_and_the_lpddr_the_cold_experts() -> None:
    board = _board(3)
    full = SideModel(BOARD, INT8, board_hardware(BOARD).hbm).weights_bytes(MIXTRAL)
    cold = MIXTRAL.moe_layers * 5 * expert_params(MIXTRAL) * 1.0
    assert board.weights_bytes(MIXTRAL) == pytest.approx(full - cold, rel=1e-12)
    assert board.lpddr_weights_bytes(MIXTRAL) == pytest.approx(cold, rel=1e-12)
    assert board.memory_capacity_bytes == 96e9  # H2M2 Table 1's HBM3


def test_the_split_board_runs_mixtral_8x22b_faster_than_the_board_holding_all_in_lpddr() -> None:
    res = _run(DOC)
    split, lp = res["systems"]
    block = split["scheduler"]["expert_offload"]
    # INT8 Mixtral-8x22B (~141 GB) does not fit the 96 GB HBM: some experts go to LPDDR
    assert 1 <= block["hbm_experts_per_layer"] < 8
    assert block["lpddr_experts_per_layer"] == 8 - block["hbm_experts_per_layer"]
    assert block["decode_batch_1"]["runs_on"] in ("lpddr", "stream")
    assert lp["scheduler"]["expert_offload"]["cold_tier"] == "lpddr-only"
    assert split["tpot_ms"]["p50"] < lp["tpot_ms"]["p50"]


def test_a_run_is_deterministic_for_a_scenario_and_seed() -> None:
    a, b = _run(DOC), _run(DOC)
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _refused(doc: dict[str, Any]) -> str:
    with pytest.raises((SpecError, ScenarioValidationError)) as err:
        _run(doc)
    return str(err.value)


def test_it_refuses_a_gpu_a_host_a_cpu_mode_and_a_board_without_lpddr() -> None:
    gpu = copy.deepcopy(DOC)
    gpu["systems"][0]["devices"] = [
        {"device": "l40s", "count": 1, "role": "gpu", "runtime": "vllm-fp16"}
    ]
    assert "devices" in _refused(gpu)
    host = copy.deepcopy(DOC)
    host["systems"][0]["devices"].append({"device": "epyc-9575f", "count": 1, "role": "host"})
    assert "host" in _refused(host)
    cpu = copy.deepcopy(DOC)
    cpu["systems"][0]["options"]["offload_mode"] = "cpu"
    assert "offload_mode" in _refused(cpu)
    overlap = copy.deepcopy(DOC)
    overlap["systems"][1]["options"]["expert_overlap"] = True
    assert "expert_overlap" in _refused(overlap)
    side = copy.deepcopy(DOC)
    side["systems"][0]["devices"][0]["device"] = "h2m2-hbm3-side"
    assert "LPDDR" in _refused(side)


@pytest.mark.parametrize(
    ("tier", "overlap"), [("lpddr", False), ("lpddr", True), ("lpddr-only", False)]
)
def test_the_engines_fast_path_gives_the_step_by_step_times_on_the_board(
    tier: str, overlap: bool
) -> None:
    model = moe_model("mixtral-8x22b")
    w = WorkloadSpec(
        requests=60,
        input_tokens=LengthDist(LengthDistKind.UNIFORM, low=64, high=1500),
        output_tokens=LengthDist(LengthDistKind.UNIFORM, low=8, high=300),
        arrival=ArrivalSpec(ArrivalKind.POISSON, rate_per_s=2.0),
        seed=3,
    )
    reqs = generate_requests(w, model)
    system = SystemSpec(
        "board",
        "moe-offload",
        (DevicePlacement(BOARD, 1, INT8, "gpu"),),
        {"max_batch": 32, "cold_tier": tier, "expert_overlap": overlap},
    )
    fast = MoeOffloadPolicy().simulate(system, model, reqs)
    ref = MoeOffloadPolicy(reference=True).simulate(system, model, reqs)
    for a, b in ((fast.first_token_s, ref.first_token_s), (fast.finish_s, ref.finish_s)):
        assert np.allclose(a, b, rtol=1e-9, atol=0)
    assert np.all(np.isfinite(fast.finish_s))


def test_cold_tier_host_refuses_a_board_in_the_gpu_role() -> None:
    """The host offload is modelled for the devices the host tier's ``gpu`` role takes (a
    GPU's memory and host link), not for a board of two tiers."""
    doc = copy.deepcopy(DOC)
    doc["systems"] = doc["systems"][:1]
    doc["systems"][0]["options"]["cold_tier"] = "host"
    doc["systems"][0]["devices"].append({"device": "epyc-9575f", "count": 1, "role": "host"})
    with pytest.raises((SpecError, ScenarioValidationError)) as err:
        _run(doc)
    assert "h2m2 is not a GPU: name cold_tier lpddr for a board" in str(err.value)
    system = replace(parse_scenario(DOC, CAT).systems[0], options={"cold_tier": "host"})
    with pytest.raises(SpecError, match="is not a GPU") as direct:
        MoeOffloadPolicy.check_system(system, moe_model("mixtral-8x22b"))
    assert direct.value.field == "devices"
