"""The ``moe-offload`` policy: cold experts in host memory, run on the host CPU or
streamed over PCIe by the per-layer rule."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from simulations.core.devices import build_device_model
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.graph import expert_params
from simulations.core.policies.moe_offload import MoeOffloadPolicy
from simulations.core.policies.moe_offload.offload import OffloadedGpu, resident_model
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from tests.core.moe.catalog import moe_catalog, moe_model

CAT = moe_catalog()
RECORDED = Path(__file__).resolve().parents[1] / "recorded"
QWEN = moe_model("qwen3-30b-a3b")

DOC: dict[str, Any] = {
    "name": "offload",
    "model": "qwen3-30b-a3b",
    "workload": {
        "requests": 40,
        "input_tokens": 512,
        "output_tokens": 64,
        "arrival": {"kind": "poisson", "rate_per_s": 0.5},
        "seed": 1,
    },
    "systems": [
        {
            "name": "2xL40S",
            "policy": "homogeneous",
            "devices": [{"device": "l40s", "count": 2, "runtime": "vllm-fp16"}],
            "options": {"max_batch": 32, "tensor_parallel": 2, "link": "pcie4-x16"},
        },
        {
            "name": "1xL40S offload",
            "policy": "moe-offload",
            "devices": [
                {"device": "l40s", "count": 1, "role": "gpu", "runtime": "vllm-fp16"},
                {"device": "epyc-9575f", "count": 1, "role": "host"},
            ],
            "options": {"max_batch": 32},
        },
    ],
}


def _unit(mode: str = "auto", resident: int = 64) -> OffloadedGpu:
    gpu = build_device_model(CAT.device("l40s"), CAT.runtime("vllm-fp16"))
    cpu = build_device_model(
        CAT.device("epyc-9575f"), CAT.default_runtime(CAT.device("epyc-9575f"))
    )
    link = CAT.device("l40s").host_link
    assert link is not None
    return OffloadedGpu(gpu, cpu, link, resident, mode)  # type: ignore[arg-type]


def test_the_gpu_holds_only_its_resident_experts_and_the_host_the_rest() -> None:
    u = _unit(resident=64)
    full = build_device_model(CAT.device("l40s"), CAT.runtime("vllm-fp16")).weights_bytes(QWEN)
    per_layer_cold = 64 * expert_params(QWEN) * 2
    assert u.weights_bytes(QWEN) == pytest.approx(full - 48 * per_layer_cold, rel=1e-12)
    assert u.host_weights_bytes(QWEN) == pytest.approx(48 * per_layer_cold, rel=1e-12)


def test_the_rule_takes_the_faster_of_host_cpu_and_streaming() -> None:
    auto, cpu, stream = _unit("auto"), _unit("cpu"), _unit("stream")
    for tokens in (1, 64, 4096, 32768):
        a, c, s = (u.layer_offload(QWEN, tokens) for u in (auto, cpu, stream))
        assert a[0] == min(c[0], s[0])
        assert a[2] == ("cpu" if c[0] <= s[0] else "stream")
    # one decode token reads a handful of experts: the host's DRAM beats PCIe
    assert auto.layer_offload(QWEN, 1)[2] == "cpu"
    # a huge prefill touches every cold expert many times: the host's FLOPs bind
    assert auto.layer_offload(QWEN, 32768)[2] == "stream"


def test_a_step_costs_the_gpu_part_plus_every_moe_layers_offloaded_experts() -> None:
    u = _unit("cpu")
    gpu_part = u.gpu.decode_step(resident_model(QWEN, 64), 8, 8000)
    step = u.decode_step(QWEN, 8, 8000)
    assert step.seconds == pytest.approx(
        gpu_part.seconds + 48 * u.layer_offload(QWEN, 8)[0], rel=1e-12
    )


def test_offloading_runs_against_gpu_only_on_more_gpus() -> None:
    res = simulate(parse_scenario(DOC, CAT))
    gpu_only, offload = res["systems"]
    block = offload["scheduler"]["expert_offload"]
    assert 0 < block["gpu_experts_per_layer"] < 128
    assert block["host_weights_gb"] > 10
    assert block["decode_batch_1"]["runs_on"] == "cpu"
    assert offload["devices"][0]["memory_capacity_gb"] == pytest.approx(48.0)
    # the one-GPU system is slower per token than two GPUs holding every expert
    assert offload["tpot_ms"]["p90"] > gpu_only["tpot_ms"]["p90"]


def test_it_refuses_a_dense_model_and_a_missing_host() -> None:
    doc = copy.deepcopy(DOC)
    doc["model"] = "llama3.1-8b"
    with pytest.raises(ScenarioValidationError, match="not a mixture of experts"):
        parse_scenario(doc, CAT)
    doc = copy.deepcopy(DOC)
    doc["systems"][1]["devices"] = doc["systems"][1]["devices"][:1]
    with pytest.raises(ScenarioValidationError):
        parse_scenario(doc, CAT)
    with pytest.raises(SpecError, match="gpu_experts"):
        resident_model(QWEN, 129)


@pytest.mark.parametrize("mode", ["auto", "cpu", "stream"])
@pytest.mark.parametrize("zipf", [0.0, 1.2])
def test_a_sequences_share_of_the_offloaded_experts_never_falls_as_the_batch_shrinks(
    mode: str, zipf: float
) -> None:
    # What the planner's decode work floor charges a sequence: f(max_batch) / max_batch of
    # each step's offloaded experts, which must not exceed its share in any smaller batch.
    u = _unit(mode, resident=40)
    model = QWEN.with_routing_zipf(zipf)
    share = [u.layer_offload(model, b)[0] / b for b in range(1, 257)]
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in itertools.pairwise(share))
    # and it is a real floor, not zero: the host still holds experts at every batch
    assert share[-1] > 0


def _recorded_offload_entries(name: str) -> list[dict[str, Any]]:
    doc = json.loads((RECORDED / f"{name}.json").read_text())
    return [s for s in doc["systems"] if s["policy"] == "moe-offload"]


def test_the_planners_reasons_give_the_split_where_the_experts_ran_and_the_binding_phase() -> None:
    host_cpu, streamed = _recorded_offload_entries("qwen3-30b-a3b-l40s-offload-vs-2xl40s")
    split, where = MoeOffloadPolicy.explain(host_cpu)
    block = host_cpu["scheduler"]["expert_offload"]
    assert f"{block['gpu_experts_per_layer']} routed experts per MoE layer on the GPU" in split
    assert f"{block['host_experts_per_layer']} on the host" in split
    assert "decoding): decode binds" in split
    assert "computed by the host CPU for a decode step of 64 sequences" in where
    assert "streamed to the GPU" in MoeOffloadPolicy.explain(streamed)[1]


def test_the_reasons_for_a_board_name_its_tiers_and_chips() -> None:
    entries = _recorded_offload_entries("mixtral-8x22b-h2m2-hbm-lpddr-experts")
    split, where = MoeOffloadPolicy.explain(entries[0])
    assert "on the HBM" in split and "on the LPDDR" in split and "Each board" in split
    assert "computed by the LPDDR chip" in where
    assert "streamed to the HBM chip" in MoeOffloadPolicy.explain(entries[2])[1]
    (only,) = MoeOffloadPolicy.explain(entries[3])
    assert "lpddr-only" in only


def test_a_result_without_an_offload_block_adds_no_reasons() -> None:
    assert MoeOffloadPolicy.explain({"scheduler": {}}) == []
