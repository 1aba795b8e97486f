"""GLITCHES Table I/II and Fig. 9 reproduction (simulations.core.policies.glitches.reproduction)."""

from __future__ import annotations

from functools import cache

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import build_device_model
from simulations.core.policies.glitches.reproduction import fig9_prefetch, table1_table2
from simulations.core.reproduce import Check
from simulations.core.reproduce.targets import load_targets

TARGETS = load_targets("glitches")

DEVICE_FIGURES = ("glitches.table1.", "glitches.table2.", "glitches.text.", "glitches.fig9.")


@cache
def checks() -> dict[str, Check]:
    return {c.id: c for c in table1_table2() + fig9_prefetch()}


def test_every_table_and_fig9_figure_has_a_check() -> None:
    wanted = {tid for tid in TARGETS.targets if tid.startswith(DEVICE_FIGURES)}
    assert wanted == set(checks())
    assert len(wanted) == 68


def test_checks_carry_the_targets_value_and_tolerance() -> None:
    for cid, c in checks().items():
        t = TARGETS[cid]
        assert (c.paper_value, c.tolerance, c.unit) == (t.value, t.tolerance, t.unit)


@pytest.mark.parametrize(
    "cid",
    [
        f"glitches.table1.{d}.{q}"
        for d in ("a100", "v100s", "u280")
        for q in ("prefill_ms", "decode_ms", "prefill_gflops", "decode_gflops", "decode_gb")
    ]
    + [
        "glitches.fig9.speedup_seq128",
        "glitches.fig9.speedup_seq1024",
        "glitches.fig9.best_ratio",
        "glitches.text.u280_over_a100_prefill",
    ],
)
def test_latency_work_and_prefetch_figures_are_within_tolerance(cid: str) -> None:
    assert checks()[cid].ok, checks()[cid]


def test_simulated_values_come_from_the_device_models() -> None:
    cat = builtin_catalog()
    dev = cat.device("a100-80gb")
    dm = build_device_model(dev, cat.default_runtime(dev))
    ms = dm.prefill(cat.model("llama2-7b"), [1536]).seconds * 1e3
    assert checks()["glitches.table1.a100.prefill_ms"].simulated == pytest.approx(ms)


def test_table2_derives_from_simulated_table1() -> None:
    c = checks()
    ms, w = (
        c["glitches.table1.u280.decode_ms"].simulated,
        c["glitches.table1.u280.decode_w"].simulated,
    )
    assert c["glitches.table2.u280.decode_energy_eff"].simulated == pytest.approx(1e3 / (ms * w))
    assert c["glitches.table2.u280.decode_cost_eff"].simulated == pytest.approx(1e3 / (ms * 8000))


def test_failing_checks_explain_themselves() -> None:
    for c in checks().values():
        if not c.ok:
            assert c.note, c.id


def test_fig9_check_reports_the_sweep_and_the_layers() -> None:
    d = checks()["glitches.fig9.speedup_seq128"].details
    assert set(d["sweep"]) == {1, 2, 4, 8, 16}
    assert set(d["layers"]) == {"q_proj", "up_proj"}
