"""Precision in runtime profiles: FP8 (weights, activations, KV) at the device's FP8 peak
and refused where there is none, INT4 weight-only (a quarter of the weight bytes plus a
dequantisation cost), and the derived profiles labelled as not measured."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.graph import NORM_WEIGHT_BYTES, Precision, weight_bytes
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.core.spec import RuntimeProfile

CAT = builtin_catalog()
MODEL = CAT.model("llama3.1-70b")


def norms_bytes() -> float:
    return (2 * MODEL.n_layers + 1) * MODEL.hidden_size * NORM_WEIGHT_BYTES


def test_fp8_halves_and_int4_quarters_the_fp16_weight_bytes() -> None:
    fp16 = weight_bytes(MODEL, Precision(16, 16, 16)) - norms_bytes()
    fp8 = weight_bytes(MODEL, Precision(8, 8, 8, True)) - norms_bytes()
    int4 = weight_bytes(MODEL, Precision(4, 16, 16)) - norms_bytes()
    assert fp8 == fp16 / 2 and int4 == fp16 / 4


def test_the_fp8_profile_runs_at_the_devices_fp8_peak_with_an_fp8_kv_cache() -> None:
    dm = build_device_model(CAT.device("h100-sxm"), CAT.runtime("vllm-fp8"))
    assert dm.peak_ops == 1978.9e12
    fp16 = build_device_model(CAT.device("h100-sxm"), CAT.runtime("vllm-fp16"))
    assert dm.kv_bytes_per_token(MODEL) == fp16.kv_bytes_per_token(MODEL) / 2
    # A compute-bound prefill runs faster at the doubled peak.
    model = CAT.model("llama3.1-8b")
    assert dm.prefill(model, [4096]).seconds < fp16.prefill(model, [4096]).seconds


def test_fp8_on_a_device_without_an_fp8_peak_is_refused_naming_fp8_tflops() -> None:
    a100 = CAT.device("a100-80gb")
    with pytest.raises(SpecError) as err:
        a100.peak_ops_per_s(8, 8, fp8=True)
    assert err.value.field == "a100-80gb.fp8_tflops"
    with pytest.raises(SpecError) as err:
        build_device_model(a100, CAT.runtime("vllm-fp8"))
    assert err.value.field == "a100-80gb.fp8_tflops"


def test_a_scenario_running_fp8_on_an_a100_is_refused_naming_the_runtime() -> None:
    doc = {
        "name": "fp8",
        "model": "llama3.1-8b",
        "workload": {"requests": 2, "input_tokens": 100, "output_tokens": 10},
        "systems": [
            {
                "name": "a100",
                "policy": "homogeneous",
                "devices": [{"device": "a100-80gb", "count": 1, "runtime": "vllm-fp8"}],
            }
        ],
    }
    with pytest.raises(ScenarioValidationError) as err:
        parse_scenario(doc, CAT)
    assert list(err.value.errors) == ["systems[0].devices[0].runtime"]
    assert "no FP8" in err.value.errors["systems[0].devices[0].runtime"][0]


def test_an_fp8_profile_must_run_8_bit_weights_and_activations() -> None:
    with pytest.raises(SpecError) as err:
        replace(CAT.runtime("vllm-fp8"), weight_bits=16)
    assert err.value.field == "vllm-fp8.fp8"


def test_int4_dequantisation_costs_compute_but_decode_streams_a_quarter_of_the_bytes() -> None:
    l40s = CAT.device("l40s")
    int4 = CAT.runtime("vllm-int4")
    free = RuntimeProfile(
        **{
            **{f: getattr(int4, f) for f in ("slug", "name", "device_kind", "compute_eff")},
            "weight_bits": 4,
            "act_bits": 16,
            "kv_bits": 16,
            "bw_eff": int4.bw_eff,
            "kernel_launch_us": int4.kernel_launch_us,
            "kernels_per_layer": int4.kernels_per_layer,
            "params": {k: v for k, v in int4.params.items() if k != "dequant_ops_per_weight"},
        }
    )
    with_cost = build_device_model(l40s, int4)
    without = build_device_model(l40s, free)
    model = CAT.model("llama3.1-8b")
    # Compute-bound prefill pays the dequantisation; a batch-1 decode step hides it under
    # the weight stream.
    assert with_cost.prefill(model, [2048]).seconds > without.prefill(model, [2048]).seconds
    assert (
        with_cost.decode_step(model, 1, 100).seconds >= without.decode_step(model, 1, 100).seconds
    )
    fp16 = build_device_model(l40s, CAT.runtime("vllm-fp16"))
    assert with_cost.decode_step(model, 1, 100).seconds < fp16.decode_step(model, 1, 100).seconds


def test_dequantisation_is_refused_on_a_stack_that_is_not_weight_only_quantised() -> None:
    fp16 = CAT.runtime("vllm-fp16")
    bad = replace(fp16, params={**fp16.params, "dequant_ops_per_weight": 8})
    with pytest.raises(SpecError) as err:
        build_device_model(CAT.device("l40s"), bad)
    assert err.value.field == "vllm-fp16.params.dequant_ops_per_weight"


def test_int4_fits_a_70b_model_on_one_l40s_where_fp16_does_not() -> None:
    l40s = CAT.device("l40s")
    cap = l40s.memory_capacity_bytes
    assert build_device_model(l40s, CAT.runtime("vllm-int4")).weights_bytes(MODEL) < 0.9 * cap
    assert build_device_model(l40s, CAT.runtime("vllm-fp16")).weights_bytes(MODEL) > cap


@pytest.mark.parametrize("runtime", ["vllm-fp8", "vllm-int4"])
def test_the_derived_profiles_are_labelled_not_measured(runtime: str) -> None:
    rt = CAT.runtime(runtime)
    assert rt.calibration.devices == () and "derived" in rt.calibration.method
    doc = {
        "name": "p",
        "model": "llama3.1-8b",
        "workload": {"requests": 2, "input_tokens": 100, "output_tokens": 5},
        "systems": [
            {
                "name": "h",
                "policy": "homogeneous",
                "devices": [{"device": "h100-sxm", "count": 1, "runtime": runtime}],
            }
        ],
    }
    device = simulate(parse_scenario(doc, CAT))["systems"][0]["devices"][0]
    assert device["calibration"] == "derived"
