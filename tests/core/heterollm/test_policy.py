"""The registered ``heterollm`` policy: roles, options, validation and its result entry."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from simulations.core.catalog import Catalog
from simulations.core.errors import SpecError
from simulations.core.policies import get_policy
from simulations.core.policies.heterollm import Decider, HeteroLLMPolicy, HeteroSoc
from simulations.core.spec import (
    ArrivalSpec,
    DevicePlacement,
    LengthDist,
    ModelSpec,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)

from .conftest import GPU, NPU, phone_system


def _workload(requests: int = 3, prompt: int = 256, output: int = 33) -> WorkloadSpec:
    return WorkloadSpec(
        requests=requests,
        input_tokens=LengthDist("fixed", value=prompt),
        output_tokens=LengthDist("fixed", value=output),
        arrival=ArrivalSpec("closed"),
        seed=3,
    )


def _run(system: SystemSpec, model: ModelSpec, workload: WorkloadSpec) -> dict:
    return HeteroLLMPolicy().run(system, model, workload, SloSpec(), np.random.default_rng(0))


def test_it_is_registered_with_gpu_and_npu_roles_and_its_options() -> None:
    cls = get_policy("heterollm")
    assert cls is HeteroLLMPolicy
    d = cls.describe()
    assert {r["name"]: r["kinds"] for r in d["roles"]} == {"gpu": ["gpu"], "npu": ["npu"]}
    opts = {o["name"]: o for o in d["options"]}
    assert opts["mode"]["default"] == "hetero-tensor"
    assert set(opts["mode"]["choices"]) == {"gpu-only", "npu-only", "hetero-layer", "hetero-tensor"}
    assert set(opts["static_graphs"]["choices"]) == {"padding", "pipe", "online-prepare"}
    assert opts["fast_sync"]["default"] is True


def test_ttft_is_the_prompt_latency_and_tpot_the_decode_latency(
    cat: Catalog, soc: HeteroSoc, llama8b: ModelSpec
) -> None:
    r = _run(phone_system(cat), llama8b, _workload(requests=1, output=2))
    d = Decider(soc, llama8b, "hetero-tensor")
    assert r["ttft_ms"]["mean"] == pytest.approx(d.prefill(256).seconds * 1e3, rel=1e-9)
    assert r["tpot_ms"]["mean"] == pytest.approx(d.decode(1, 256).seconds * 1e3, rel=1e-9)
    for key in ("throughput_tok_s", "energy_j_per_token", "energy_efficiency_tok_s_per_w"):
        assert r[key] > 0


def test_requests_are_served_one_at_a_time(cat: Catalog, llama8b: ModelSpec) -> None:
    r = _run(phone_system(cat, mode="hetero-layer"), llama8b, _workload(requests=3))
    one = _run(phone_system(cat, mode="hetero-layer"), llama8b, _workload(requests=1))
    assert r["span_s"] == pytest.approx(3 * one["span_s"], rel=1e-9)
    assert r["e2e_s"]["p50"] == pytest.approx(2 * one["e2e_s"]["mean"], rel=1e-9)


def test_result_holds_the_placement_table_and_energy_by_processor(
    cat: Catalog, llama8b: ModelSpec
) -> None:
    r = _run(phone_system(cat), llama8b, _workload())
    h = r["heterollm"]
    names = [row["kernel"] for row in h["placement"]["prefill"]]
    assert names[:3] == ["embedding", "attn_norm", "q_proj"] and names[-1] == "lm_head"
    assert {row["backend"] for row in h["placement"]["prefill"]} <= {"gpu", "npu", "gpu+npu"}
    gemms = [row for row in h["placement"]["decode"] if row["kind"] == "gemm"]
    assert any(row["strategy"] == "row-cutting" for row in gemms)
    devices = {d["role"]: d for d in r["devices"]}
    assert devices["gpu"]["device"] == GPU[0] and devices["npu"]["device"] == NPU[0]
    assert devices["gpu"]["energy_j"] + devices["npu"]["energy_j"] == pytest.approx(r["energy_j"])
    assert 0 < devices["npu"]["busy_fraction"] <= 1
    json.dumps(r)  # JSON-serialisable


def test_modes_compare_as_the_paper_orders_them(cat: Catalog, llama8b: ModelSpec) -> None:
    ttft = {
        mode: _run(phone_system(cat, mode=mode), llama8b, _workload(requests=1))["ttft_ms"]["mean"]
        for mode in ("gpu-only", "hetero-layer", "hetero-tensor")
    }
    assert ttft["hetero-tensor"] < ttft["hetero-layer"] < ttft["gpu-only"]


def test_runs_are_deterministic(cat: Catalog, llama8b: ModelSpec) -> None:
    w = WorkloadSpec(
        requests=4,
        input_tokens=LengthDist("uniform", low=30, high=700),
        output_tokens=LengthDist("uniform", low=2, high=40),
        arrival=ArrivalSpec("poisson", rate_per_s=0.5),
        seed=9,
    )
    a = _run(phone_system(cat), llama8b, w)
    b = _run(phone_system(cat), llama8b, w)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_it_rejects_a_gpu_and_npu_of_different_socs(cat: Catalog, llama8b: ModelSpec) -> None:
    other = replace(cat.device(NPU[0]), parent="another-soc")
    system = SystemSpec(
        "mixed",
        "heterollm",
        (
            DevicePlacement(cat.device(GPU[0]), 1, cat.runtime(GPU[1]), "gpu"),
            DevicePlacement(other, 1, cat.runtime(NPU[1]), "npu"),
        ),
    )
    with pytest.raises(SpecError) as err:
        _run(system, llama8b, _workload())
    assert err.value.field == "devices"


def test_it_rejects_more_than_one_gpu(cat: Catalog, llama8b: ModelSpec) -> None:
    system = SystemSpec(
        "two",
        "heterollm",
        (
            DevicePlacement(cat.device(GPU[0]), 2, cat.runtime(GPU[1]), "gpu"),
            DevicePlacement(cat.device(NPU[0]), 1, cat.runtime(NPU[1]), "npu"),
        ),
    )
    with pytest.raises(SpecError) as err:
        _run(system, llama8b, _workload())
    assert err.value.field == "devices[0].count"


def test_it_rejects_stacks_of_different_precision(cat: Catalog, llama8b: ModelSpec) -> None:
    fp16 = cat.default_runtime(cat.device(GPU[0]))
    assert fp16.weight_bits != 4
    system = SystemSpec(
        "fp16",
        "heterollm",
        (
            DevicePlacement(cat.device(GPU[0]), 1, fp16, "gpu"),
            DevicePlacement(cat.device(NPU[0]), 1, cat.runtime(NPU[1]), "npu"),
        ),
    )
    with pytest.raises(SpecError) as err:
        _run(system, llama8b, _workload())
    assert err.value.field == "devices.runtime"


def test_it_rejects_an_unknown_mode(cat: Catalog, llama8b: ModelSpec) -> None:
    with pytest.raises(SpecError) as err:
        _run(phone_system(cat, mode="cpu-only"), llama8b, _workload())
    assert err.value.field == "options.mode"


def test_it_rejects_a_model_larger_than_the_phone_memory(cat: Catalog) -> None:
    from simulations.core.errors import CapacityError

    with pytest.raises(CapacityError):
        _run(phone_system(cat), cat.model("llama2-70b"), _workload())
