"""Calibration of runtime profiles (simulations.core.calibration): joint fit, leave-one-out,
and the catalog holding exactly what the scripts fit."""

from __future__ import annotations

import pytest

from simulations.core.calibration import gpu_vllm
from simulations.core.calibration.common import compare_with_catalog, round_sig
from simulations.core.policies.glitches.calibration import fpga_flightllm, gpu_fp16


def test_one_eager_profile_meets_five_percent_on_all_four_gpu_latencies() -> None:
    rt = gpu_fp16.fit()
    lat = [r for r in gpu_fp16.residuals(rt) if str(r["quantity"]).endswith("_s")]
    assert len(lat) == 4
    assert all(abs(float(r["rel_err"])) <= 0.05 for r in lat)


def test_fitted_on_one_gpu_the_profile_predicts_the_other_within_ten_percent() -> None:
    rows = gpu_fp16.leave_one_out()
    assert {(r["train"], r["test"]) for r in rows} == {
        ("a100-80gb", "v100s"),
        ("v100s", "a100-80gb"),
    }
    assert len(rows) == 4
    for r in rows:
        assert abs(float(r["rel_err"])) <= 0.10, r


def test_leave_one_out_fits_only_on_the_training_gpu() -> None:
    """The held-out GPU's measurements must not move the fit."""
    a = gpu_fp16.fit_latency(["a100-80gb"], bw_eff=gpu_fp16.BW_EFF_BOUND)
    b = gpu_fp16.fit_latency(["v100s"], bw_eff=gpu_fp16.BW_EFF_BOUND)
    assert a != b


@pytest.mark.parametrize(
    ("values", "filename", "slug"),
    [
        (gpu_fp16.fitted_values, "gpu.json", "hf-eager-fp16"),
        (gpu_vllm.fitted_values, "gpu.json", "vllm-fp16"),
        (fpga_flightllm.fitted_values, "fpga.json", "flightllm-w4a8"),
    ],
)
def test_catalog_holds_what_the_calibration_scripts_fit(
    values: object, filename: str, slug: str
) -> None:
    assert compare_with_catalog(values(), filename, slug) == []  # type: ignore[operator]


def test_flightllm_fit_meets_the_u280_figures() -> None:
    sim, meas = fpga_flightllm.predict(fpga_flightllm.fit()), fpga_flightllm.measured()
    for key in ("prefill_s", "decode_s", "speedup_seq128", "speedup_seq1024"):
        assert sim[key] == pytest.approx(meas[key], rel=0.05), key


def test_calibration_script_prints_values_and_checks_the_catalog(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert gpu_fp16.main(["--check"]) == 0
    out = capsys.readouterr().out
    assert "compute_eff = " in out and "leave-one-out" in out and "catalog matches" in out


def test_round_sig_keeps_four_significant_digits() -> None:
    assert round_sig(0.123456) == 0.1235
    assert round_sig(12.3456) == 12.35
    assert round_sig(0.0) == 0.0
