"""Calibration speed target: fitting vllm-fp16 to the A100 kernel set — the fit
and its leave-one-group-out refits — in under 2 s."""

from __future__ import annotations

from typing import Any

from simulations.core.calibration.fit import fit_profile
from simulations.core.calibration.gpu_vllm import OPERATORS
from simulations.core.calibration.measurements import load_measurements
from simulations.core.catalog import builtin_catalog


def test_bench_fit_a100_vllm_kernels(benchmark: Any) -> None:
    benchmark.extra_info.update(
        name="calibrate: vllm-fp16 on the A100 kernel set, with hold-out", unit="s", target=2.0
    )
    cat = builtin_catalog()
    stack = cat.runtime("vllm-fp16")

    def run() -> Any:
        return fit_profile(stack, load_measurements(OPERATORS), cat)

    report = benchmark.pedantic(run, rounds=3, iterations=1)
    assert report.mape is not None and report.mape <= 0.08
    assert len(report.holdout) == 6
