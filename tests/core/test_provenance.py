"""Provenance (simulations.core.provenance): what each runtime profile was calibrated on, and
the measured / transferred / derived label on every result device entry."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from simulations.core.catalog import DATA_DIR, builtin_catalog
from simulations.core.errors import SpecError
from simulations.core.provenance import (
    CalibrationInfo,
    calibration_from_dict,
    device_calibration,
)
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.core.spec import RuntimeProfile

CAT = builtin_catalog()
EAGER = CAT.runtime("hf-eager-fp16")


def test_every_catalog_profile_says_what_it_was_calibrated_on() -> None:
    for path in sorted((DATA_DIR / "runtimes").glob("*.json")):
        for rec in json.loads(path.read_text()):
            assert "calibration" in rec, rec["slug"]
    for rt in CAT.runtimes.values():
        info = rt.calibration
        assert set(info.devices) <= set(CAT.devices), rt.slug
        assert set(info.models) <= set(CAT.models), rt.slug
        if info.measured:
            assert info.measurement_sets, rt.slug
    assert EAGER.calibration.devices == ("a100-80gb", "v100s")
    assert not CAT.runtime("h2m2-int8").calibration.measured


def test_a_device_the_profile_was_fitted_on_is_measured() -> None:
    out = device_calibration("v100s", "llama2-7b", EAGER)
    assert out["calibration"] == "measured"
    assert out["calibrated_on"] == ["a100-80gb", "v100s"]
    assert out["calibration_note"] == "hf-eager-fp16: fitted to measurements on v100s."


def test_a_device_without_measurements_is_transferred_and_names_where_they_come_from() -> None:
    out = device_calibration("h100-sxm", "llama3.1-8b", EAGER)
    assert out["calibration"] == "transferred"
    assert out["calibrated_on"] == ["a100-80gb", "v100s"]
    assert out["calibration_note"] == (
        "hf-eager-fp16: predicted from a100-80gb, v100s measurements; not measured on "
        "h100-sxm; llama3.1-8b predicted from its shapes (measured: llama2-7b)."
    )


def test_a_profile_fitted_to_nothing_is_derived() -> None:
    out = device_calibration(
        "a100-80gb", "llama2-7b", replace(EAGER, calibration=CalibrationInfo())
    )
    assert out["calibration"] == "derived"
    assert out["calibrated_on"] == []
    assert "derived" in out["calibration_note"]


def test_the_calibration_block_is_checked_and_survives_its_json_form() -> None:
    info = EAGER.calibration
    assert calibration_from_dict(info.as_dict()) == info
    with pytest.raises(SpecError) as exc:
        calibration_from_dict({"devices": "a100-80gb"})
    assert exc.value.field == "calibration.devices"
    with pytest.raises(SpecError) as exc:
        RuntimeProfile(**{**_fields(EAGER), "calibration": {"gpus": []}})  # type: ignore[arg-type]
    assert exc.value.field == "hf-eager-fp16.calibration.gpus"


def _fields(rt: RuntimeProfile) -> dict[str, object]:
    return {f: getattr(rt, f) for f in rt.__dataclass_fields__}


def test_every_device_entry_of_a_simulated_result_carries_its_provenance() -> None:
    doc = {
        "name": "provenance",
        "model": "llama2-7b",
        "workload": {"requests": 4, "input_tokens": 64, "output_tokens": 8, "seed": 0},
        "systems": [
            {
                "name": "a100 + h100",
                "policy": "homogeneous",
                "devices": [
                    {"device": "a100-80gb", "count": 1},
                    {"device": "h100-sxm", "count": 1},
                ],
            },
            {
                "name": "glitches",
                "policy": "glitches",
                "devices": [
                    {"device": "a100-80gb", "count": 1, "role": "prefill"},
                    {"device": "u280", "count": 1, "role": "decode"},
                ],
            },
        ],
    }
    result = simulate(parse_scenario(doc, CAT))
    labels = {
        (s["name"], d["device"]): (d["calibration"], d["calibrated_on"])
        for s in result["systems"]
        for d in s["devices"]
    }
    assert labels == {
        ("a100 + h100", "a100-80gb"): ("measured", ["a100-80gb", "v100s"]),
        ("a100 + h100", "h100-sxm"): ("transferred", ["a100-80gb", "v100s"]),
        ("glitches", "a100-80gb"): ("measured", ["a100-80gb", "v100s"]),
        ("glitches", "u280"): ("measured", ["u280"]),
    }
    for s in result["systems"]:
        for d in s["devices"]:
            assert d["calibration_note"].startswith(d["runtime"] + ":")


def test_a_rocm_stack_on_amd_instinct_is_labelled_derived_not_transferred() -> None:
    """The ROCm profiles carry the NVIDIA fit over unchanged: a planner sees that nothing
    measured them, where vllm-fp16 on the same device would read as a transfer."""
    for slug, base in (("rocm-vllm-fp16", "vllm-fp16"), ("rocm-vllm-fp8", "vllm-fp8")):
        rocm, nvidia = CAT.runtime(slug), CAT.runtime(base)
        assert (rocm.compute_eff, rocm.bw_eff, rocm.params) == (
            nvidia.compute_eff,
            nvidia.bw_eff,
            nvidia.params,
        )
        out = device_calibration("mi300x", "llama3.1-8b", rocm)
        assert out["calibration"] == "derived", slug
        assert "Uncalibrated" in rocm.calibration.notes
    assert (
        device_calibration("mi300x", "llama3.1-8b", CAT.runtime("vllm-fp16"))["calibration"]
        == "transferred"
    )
