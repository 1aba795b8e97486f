"""The fitting service (simulations.core.calibration.fit): it recovers known parameters from
noisy synthetic measurements, refuses under-determined and unphysical fits, and reports
residuals and hold-out errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulations.core.calibration.fit import FitRefusedError, fit_profile, with_values
from simulations.core.calibration.measurements import MeasurementError, parse_measurements
from simulations.core.catalog import builtin_catalog
from simulations.core.devices.gpu import GpuModel
from simulations.core.graph import decode_graph, prefill_graph
from simulations.core.spec import RuntimeProfile

CAT = builtin_catalog()
MODEL = CAT.model("llama2-7b")
DEVICE = CAT.device("a100-80gb")
#: The stack's structure: fused attention, no kernel params (the fit supplies them).
BASE = RuntimeProfile(
    slug="test-stack",
    name="test stack",
    device_kind="gpu",  # type: ignore[arg-type]
    weight_bits=16,
    act_bits=16,
    kv_bits=16,
    compute_eff=0.5,
    bw_eff=0.5,
    kernels_per_layer=10,
    params={"fused_attention": 1.0, "kernels_per_pass": 10.0},
)
TRUTH = {
    "compute_eff": 0.72,
    "bw_eff": 0.78,
    "gemm_n_half": 80.0,
    "norm_bw_eff": 0.35,
    "rope_bw_eff": 0.45,
    "act_bw_eff": 0.5,
    "copy_bw_eff": 0.85,
    "kernel_floor_us": 4.0,
    "attn_prefill_eff": 0.4,
    "attn_prefill_n_half": 600.0,
    "attn_decode_bw_eff": 0.8,
    "attn_decode_fixed_us": 8.0,
}
OPS_HEADER = "device,model,stack,precision,tp,op,phase,tokens,batch,kv_tokens,time_ms_per_layer"
E2E_HEADER = "device,model,stack,precision,tp,phase,tokens,batch,kv_tokens,latency_ms"
LINEAR = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)


def truth_model(values: dict[str, float] = TRUTH) -> GpuModel:
    return GpuModel(DEVICE, with_values(BASE, values))


def operator_csv(
    noise: float,
    tokens: tuple[int, ...] = (1, 16, 64, 256, 1024, 4096),
    prompts: tuple[int, ...] = (256, 1024, 2048, 4096),
    decodes: tuple[tuple[int, int], ...] = ((1, 1024), (8, 4096), (32, 1024), (64, 2048)),
    ops: tuple[str, ...] = LINEAR,
    values: dict[str, float] = TRUTH,
    seed: int = 0,
) -> str:
    """Per-layer kernel times the ``values`` stack would measure, with lognormal noise."""
    gm = truth_model(values)
    rng = np.random.default_rng(seed)
    lines = [OPS_HEADER]

    def row(op: str, phase: str, n: int, b: str, kv: str, seconds: float) -> None:
        ms = seconds * 1e3 * float(np.exp(rng.normal(0.0, noise)))
        lines.append(f"a100-80gb,llama2-7b,test,fp16,1,{op},{phase},{n},{b},{kv},{ms!r}")

    for n in tokens:
        b = gm.breakdown(prefill_graph(MODEL, [n], gm.precision, fused_attention=True))
        for k in b.kernels:
            if k.name in ops:
                row(k.name, "any", n, "", "", k.per_layer_s or 0.0)
    for n in prompts:
        b = gm.breakdown(prefill_graph(MODEL, [n], gm.precision, fused_attention=True))
        row("attn_prefill", "prefill", n, "1", "0", _kernel(b, "attn_prefill"))
    for batch, ctx in decodes:
        g = decode_graph(MODEL, batch, batch * ctx, gm.precision, fused_attention=True)
        t = _kernel(gm.breakdown(g), "attn_decode")
        row("attn_decode", "decode", batch, str(batch), str(ctx), t)
    return "\n".join(lines) + "\n"


def _kernel(b: object, name: str) -> float:
    return next(k.per_layer_s for k in b.kernels if k.name == name)  # type: ignore[attr-defined]


def test_the_fit_recovers_known_parameters_from_noisy_synthetic_kernels() -> None:
    report = fit_profile(BASE, parse_measurements(operator_csv(noise=0.02)), CAT)
    fitted = report.values
    for name, want in TRUTH.items():
        p = next(p for p in report.parameters if p.name == name)
        assert p.fitted, name
        assert p.stderr is not None and p.stderr > 0, name
        # Within four standard errors; efficiencies within 5 %, the rest within 15 %.
        assert abs(fitted[name] - want) <= 4 * p.stderr, (name, fitted[name], p.stderr)
        assert fitted[name] == pytest.approx(want, rel=0.05 if p.unit == "fraction" else 0.15)
    assert report.mape is not None and report.mape < 0.03
    assert report.holdout_mape is not None and report.holdout_mape < 0.1
    # Not constrained by kernel times: kept from the base profile, never fitted.
    kept = {p.name for p in report.parameters if not p.fitted}
    assert kept == {"layer_fixed_us", "host_step_us", "host_step_per_seq_us"}


def test_without_noise_the_fit_reproduces_the_rows() -> None:
    report = fit_profile(BASE, parse_measurements(operator_csv(noise=0.0)), CAT, holdout=False)
    assert report.max_rel_err is not None and report.max_rel_err < 1e-4
    assert report.holdout == ()


def test_a_refit_does_not_depend_on_the_base_profiles_stored_values() -> None:
    text = operator_csv(noise=0.02)
    a = fit_profile(BASE, parse_measurements(text), CAT, holdout=False)
    other = with_values(BASE, {**TRUTH, "compute_eff": 0.2, "gemm_n_half": 900.0})
    b = fit_profile(other, parse_measurements(text), CAT, holdout=False)
    assert a.fitted_values == b.fitted_values


def test_the_fit_recovers_an_end_to_end_stack_with_host_costs() -> None:
    truth = {**TRUTH, "host_step_us": 400.0, "host_step_per_seq_us": 80.0}
    gm = truth_model(truth)
    rng = np.random.default_rng(1)
    lines = [E2E_HEADER]
    for n, b in ((128, 1), (512, 1), (2048, 1), (1024, 4), (8192, 1)):
        s = gm.prefill(MODEL, [n] * b).seconds * float(np.exp(rng.normal(0, 0.01)))
        lines.append(f"a100-80gb,llama2-7b,test,fp16,1,prefill,{n},{b},,{s * 1e3!r}")
    for b, ctx in ((1, 512), (1, 4096), (8, 1024), (32, 1024), (48, 1024), (48, 256)):
        s = gm.decode_step(MODEL, b, b * ctx).seconds * float(np.exp(rng.normal(0, 0.01)))
        lines.append(f"a100-80gb,llama2-7b,test,fp16,1,decode,,{b},{ctx},{s * 1e3!r}")
    # Start from the truth's shape parameters: end-to-end rows fit the rates and the host.
    base = with_values(BASE, {k: v for k, v in truth.items() if k not in _E2E_FREE})
    report = fit_profile(base, parse_measurements("\n".join(lines)), CAT)
    assert {p.name for p in report.parameters if p.fitted} == set(_E2E_FREE)
    for p in report.parameters:
        if p.fitted:
            assert p.stderr is not None
            assert abs(p.value - truth[p.name]) <= 4 * p.stderr, (p.name, p.value, p.stderr)
            if p.unit == "fraction":  # attention is a small share of a pass: looser
                assert p.value == pytest.approx(truth[p.name], rel=0.1), p.name
    assert report.mape is not None and report.mape < 0.02
    assert {g.group for g in report.holdout} == {
        "prefill 128 tokens",
        "prefill 512 tokens",
        "prefill 2048 tokens",
        "prefill 4096 tokens",
        "prefill 8192 tokens",
        "decode batch 1",
        "decode batch 8",
        "decode batch 32",
        "decode batch 48",
    }


_E2E_FREE = (
    "compute_eff",
    "bw_eff",
    "attn_prefill_eff",
    "attn_decode_bw_eff",
    "host_step_us",
    "host_step_per_seq_us",
)


def test_it_refuses_a_fit_with_fewer_independent_groups_than_parameters() -> None:
    text = operator_csv(noise=0.01, tokens=(512,), prompts=(), decodes=())
    with pytest.raises(FitRefusedError, match="under-determined: compute_eff, bw_eff, gemm_n_half"):
        fit_profile(BASE, parse_measurements(text), CAT)


def test_it_refuses_a_fit_whose_jacobian_is_singular() -> None:
    # Three token counts, all compute-bound: nothing tells the weight-streaming rate.
    text = operator_csv(
        noise=0.01, tokens=(1024, 2048, 4096), prompts=(), decodes=(), ops=("mlp_up_proj",)
    )
    with pytest.raises(FitRefusedError, match=r"singular Jacobian") as exc:
        fit_profile(BASE, parse_measurements(text), CAT)
    assert "bw_eff" in str(exc.value)


def test_it_refuses_a_row_faster_than_the_datasheet_allows() -> None:
    text = OPS_HEADER + "\n" + "a100-80gb,llama2-7b,test,fp16,1,mlp_up_proj,any,512,,,0.05\n"
    with pytest.raises(FitRefusedError, match=r"unphysical: line 2 .*efficiency of [0-9.]+ > 1"):
        fit_profile(BASE, parse_measurements(text), CAT)


def test_it_refuses_a_fit_that_needs_an_efficiency_of_one() -> None:
    # Norm kernels measured at the full datasheet bandwidth: the fit ends on the bound.
    text = operator_csv(noise=0.0, values={**TRUTH, "norm_bw_eff": 1.0})
    with pytest.raises(FitRefusedError, match=r"unphysical: norm_bw_eff .* efficiency above 1"):
        fit_profile(BASE, parse_measurements(text), CAT, holdout=False)


def test_rows_naming_unknown_hardware_or_another_precision_are_named() -> None:
    text = "\n".join(
        [
            OPS_HEADER,
            "a100-80gb,llama2-7b,test,fp16,1,mlp_up_proj,any,512,,,0.4",
            "h900,llama2-7b,test,fp16,1,mlp_up_proj,any,512,,,0.4",
            "a100-80gb,llama9,test,fp16,1,mlp_up_proj,any,512,,,0.4",
            "a100-80gb,llama2-7b,test,int4,1,mlp_up_proj,any,512,,,0.4",
            "u280,llama2-7b,test,fp16,1,mlp_up_proj,any,512,,,0.4",
        ]
    )
    with pytest.raises(MeasurementError) as exc:
        fit_profile(BASE, parse_measurements(text), CAT)
    assert [(e.line, e.column) for e in exc.value.errors] == [
        (3, "device"),
        (4, "model"),
        (5, "precision"),
        (6, "device"),
    ]
    # an FPGA's family is not costed by the kernel-class model the fit calibrates
    assert exc.value.errors[3].message == "u280 is not a GPU"


def test_only_fused_attention_gpu_stacks_are_fitted() -> None:
    text = operator_csv(noise=0.0)
    with pytest.raises(FitRefusedError, match="eager attention"):
        fit_profile(CAT.runtime("hf-eager-fp16"), parse_measurements(text), CAT)
    with pytest.raises(FitRefusedError, match="only GPU stacks"):
        fit_profile(CAT.runtime("flightllm-w4a8"), parse_measurements(text), CAT)


def test_the_report_holds_the_contracts_fields() -> None:
    report = fit_profile(BASE, parse_measurements(operator_csv(noise=0.02)), CAT)
    doc = report.as_dict()
    assert {"stack", "parameters", "rows", "mape", "max_rel_err", "holdout_mape"} <= set(doc)
    assert doc["stack"] == "test-stack"
    row = doc["rows"][0]
    assert {"measured_ms", "predicted_ms", "rel_err", "line", "op"} <= set(row)
    assert row["rel_err"] == pytest.approx(row["predicted_ms"] / row["measured_ms"] - 1)
    p = doc["parameters"]["compute_eff"]
    assert p["lower"] < p["value"] < p["upper"] == 1.0 and p["fitted"] is True
    # The fitted profile costs the stack with the fitted values.
    assert report.profile.compute_eff == report.values["compute_eff"]
    assert report.profile.params["gemm_n_half"] == report.values["gemm_n_half"]
    assert replace(report.profile).params["fused_attention"] == 1.0
