"""The shipped ``vllm-fp16`` profile: refitted on Vidur's A100 kernels, it reproduces them,
its passes match the measured operator sums once the documented extras are taken out, and
every other GPU is labelled as predicted from the A100."""

from __future__ import annotations

import pytest

from simulations.core.calibration import gpu_vllm
from simulations.core.calibration.measurements import load_measurements
from simulations.core.catalog import builtin_catalog
from simulations.core.devices.gpu import GpuModel, PassBreakdown
from simulations.core.graph import decode_graph, prefill_graph
from simulations.core.provenance import device_calibration

CAT = builtin_catalog()
VLLM = CAT.runtime("vllm-fp16")
A100 = CAT.device("a100-80gb")
LLAMA2_7B = CAT.model("llama2-7b")
ROWS = load_measurements(gpu_vllm.OPERATORS).rows
#: What the layer's measured kernels leave out of a pass (GpuModel.breakdown's extras).
EXTRAS = {
    "embedding",
    "final_norm",
    "lm_head",
    "sampler",
    "bookkeeping",
    "layer_fixed",
    "host",
    "unmeasured:attn_residual",
}


def measured_sum_ms(phase: str, tokens: int) -> float:
    """The measured operator sum of one pass: every kernel of a layer at this shape × the
    model's layers (prefill of ``tokens`` tokens; decode of a batch of ``tokens`` at 1024)."""
    per_layer = sum(
        r.time_ms for r in ROWS if r.tokens == tokens and (r.phase == "any" or r.phase == phase)
    )
    return per_layer * LLAMA2_7B.n_layers


def breakdown(phase: str, tokens: int) -> PassBreakdown:
    gm = GpuModel(A100, VLLM)
    if phase == "prefill":
        g = prefill_graph(LLAMA2_7B, [tokens], gm.precision, fused_attention=True)
        assert gm.prefill(LLAMA2_7B, [tokens]).seconds == gm.breakdown(g).seconds
    else:
        g = decode_graph(LLAMA2_7B, tokens, tokens * 1024, gm.precision, fused_attention=True)
        assert gm.decode_step(LLAMA2_7B, tokens, tokens * 1024).seconds == gm.breakdown(g).seconds
    return gm.breakdown(g)


def test_the_measured_operator_sums_are_those_the_issue_quotes() -> None:
    assert measured_sum_ms("prefill", 1024) == pytest.approx(76.7, abs=0.05)
    assert measured_sum_ms("decode", 1) == pytest.approx(9.95, abs=0.005)
    assert measured_sum_ms("decode", 32) == pytest.approx(20.0, abs=0.05)


@pytest.mark.parametrize(("phase", "tokens"), [("prefill", 1024), ("decode", 1), ("decode", 32)])
def test_a_simulated_pass_matches_the_measured_kernels_once_the_extras_are_out(
    phase: str, tokens: int
) -> None:
    b = breakdown(phase, tokens)
    doc = b.as_dict()
    measured = measured_sum_ms(phase, tokens)
    kernels_ms = doc["kernels_ms"]
    assert set(doc["extras_ms"]) == EXTRAS
    # The pass is the measured kernels plus the documented extras, nothing else.
    assert kernels_ms + sum(doc["extras_ms"].values()) == pytest.approx(doc["total_ms"], rel=1e-12)
    assert {k["name"] for k in doc["kernels"]} == {
        r.op for r in ROWS if r.tokens == tokens and r.phase in ("any", phase)
    }
    assert kernels_ms == pytest.approx(measured, rel=0.10), doc


def test_the_refit_meets_its_targets_on_the_a100_set() -> None:
    report = gpu_vllm.fit_report()
    assert report.mape is not None and report.mape <= 0.08
    assert report.holdout_mape is not None and report.holdout_mape <= 0.15
    assert all(g.error is None for g in report.holdout)
    small = report.small_rows_max_abs_err_ms
    assert small is not None and small <= 0.005  # quantised rows: within 5 µs


def test_the_catalog_holds_the_refit_and_says_what_it_was_fitted_on() -> None:
    assert gpu_vllm.main(["--check"]) == 0
    assert gpu_vllm.calibration_differences() == []
    info = VLLM.calibration
    assert info.devices == ("a100-80gb",)
    assert info.measurement_sets[0] == "a100_llama2-7b_vllm_operators"
    assert "fitted by simulations.core.calibration.gpu_vllm" in VLLM.sources["compute_eff"]
    assert "not fitted to kernel times" in VLLM.sources["params.host_step_us"]


@pytest.mark.parametrize("device", ["h100-sxm", "a10g", "a100-40gb"])
def test_other_gpus_are_labelled_as_predicted_from_the_a100(device: str) -> None:
    out = device_calibration(device, "llama3.1-8b", VLLM)
    assert out["calibration"] == "transferred"
    assert out["calibrated_on"] == ["a100-80gb"]
    assert (
        f"predicted from a100-80gb measurements; not measured on {device}"
        in (out["calibration_note"])
    )
    assert device_calibration("a100-80gb", "llama2-7b", VLLM)["calibration"] == "measured"
