"""Roofline data for the pages (simulations.core.roofline), GLITCHES Fig. 2."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import SpecError
from simulations.core.roofline import figure, phase_points, roof

CAT = builtin_catalog()
A100, U280 = CAT.device("a100-80gb"), CAT.device("u280")
EAGER, FLIGHT = CAT.runtime("hf-eager-fp16"), CAT.runtime("flightllm-w4a8")
LLAMA2_7B = CAT.model("llama2-7b")


@pytest.mark.parametrize(
    ("slug", "runtime"),
    [("a100-80gb", "hf-eager-fp16"), ("hexagon-npu", None)],
)
def test_a_device_without_published_power_has_its_roofline(slug: str, runtime: str | None) -> None:
    """A roof needs no power: a GPU or NPU record without ``tdp_w`` draws the same roof
    as with it; only an energy figure asks for the power, naming the missing field."""
    device = CAT.device(slug)
    rt = CAT.runtime(runtime) if runtime else CAT.default_runtime(device)
    unpowered = replace(device, slug=f"{slug}-unpowered", tdp_w=None)
    got, want = roof(unpowered, rt), roof(device, rt)
    assert {k: v for k, v in got.items() if k != "device"} == {
        k: v for k, v in want.items() if k != "device"
    }
    if "active_power_w" in rt.params:  # the stack's own power needs no board figure
        return
    with pytest.raises(SpecError) as info:
        phase_points(
            unpowered, rt, LLAMA2_7B if slug != "hexagon-npu" else CAT.model("llama3.2-3b"), 64, 4
        )
    assert info.value.field == f"{slug}-unpowered.tdp_w"


def test_a_cpu_model_without_published_power_asks_for_it_only_for_energy() -> None:
    from simulations.core.devices import build_device_model

    cpu = CAT.device("g5-4xlarge-cpu")
    runtime = CAT.default_runtime(cpu)
    model: Any = build_device_model(replace(cpu, slug="cpu-unpowered", tdp_w=None), runtime)
    catalog_model: Any = build_device_model(cpu, runtime)
    assert model.flops_rate == catalog_model.flops_rate
    with pytest.raises(SpecError) as info:
        _ = model.power_w
    assert info.value.field == "cpu-unpowered.tdp_w"


def test_ridge_point_is_peak_over_bandwidth() -> None:
    r = roof(A100, EAGER)
    assert r["ridge_flop_per_byte"] == pytest.approx(312e12 / 1935e9)
    assert r["achieved_ridge_flop_per_byte"] == pytest.approx(
        312e12 * EAGER.compute_eff / (1935e9 * EAGER.bw_eff)
    )


def test_curve_rises_with_intensity_and_is_capped_by_the_peak() -> None:
    c = roof(A100, EAGER, points=40)["curve"]
    ys, achieved = c["attainable_ops_per_s"], c["achieved_roof_ops_per_s"]
    assert ys == sorted(ys) and max(ys) == pytest.approx(312e12)
    assert all(a <= y for a, y in zip(achieved, ys, strict=True))
    assert len(c["intensity_flop_per_byte"]) == 40


def test_fpga_roof_is_the_design_peak_not_the_chip_peak() -> None:
    assert roof(U280, FLIGHT)["peak_ops_per_s"] == pytest.approx(6.91e12)


def test_prefill_sits_right_of_the_ridge_and_decode_left_of_it() -> None:
    """GLITCHES §III-B: prefill is compute-bound, decode memory-bound, on GPU and FPGA."""
    for dev, rt in ((A100, EAGER), (U280, FLIGHT)):
        pre, dec = phase_points(dev, rt, LLAMA2_7B, 1536, 32)
        assert pre["bound"] == "compute" and dec["bound"] == "memory"
        assert pre["achieved_ops_per_s"] <= pre["attainable_ops_per_s"]
        assert dec["achieved_ops_per_s"] <= dec["attainable_ops_per_s"]


def test_decode_intensity_is_about_one_flop_per_byte_on_fp16() -> None:
    _, dec = phase_points(A100, EAGER, LLAMA2_7B, 1536, 16)
    assert dec["intensity_flop_per_byte"] == pytest.approx(1.0, rel=0.1)


def test_figure_is_json_ready() -> None:
    fig = figure([(A100, EAGER), (U280, FLIGHT)], LLAMA2_7B, 512, 8)
    again = json.loads(json.dumps(fig))
    assert [s["device"] for s in again["series"]] == ["a100-80gb", "u280"]
    assert len(again["series"][0]["points"]) == 2


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: roof(A100, EAGER, intensity_range=(10.0, 1.0)), "intensity_range"),
        (lambda: roof(A100, EAGER, points=1), "points"),
        (lambda: phase_points(A100, EAGER, LLAMA2_7B, 0, 8), "prompt_tokens"),
    ],
)
def test_bad_input_raises_spec_error_naming_the_field(call: object, field: str) -> None:
    with pytest.raises(SpecError) as exc:
        call()  # type: ignore[operator]
    assert exc.value.field == field
