"""Each check's basis (prediction, calibration, input) and discriminating flag
(simulations.core.reproduce.basis)."""

from __future__ import annotations

import importlib
import importlib.util
import math
import pkgutil
from collections.abc import Iterator
from typing import Any

import pytest

from simulations.core.policies import get_paper
from simulations.core.reproduce import (
    PAPERS,
    BoundCheck,
    Check,
    basis_of,
    fitted_by_scripts,
    load_targets,
    reproduce,
)
from simulations.core.reproduce.basis import catalog_value
from simulations.core.reproduce.targets import PaperTargets, Target, parse_targets


def calibration_modules(paper: str) -> Iterator[Any]:
    name = f"{get_paper(paper).package}.calibration"
    if importlib.util.find_spec(name) is None:  # a paper without calibration scripts
        return
    package = importlib.import_module(name)
    for info in pkgutil.iter_modules(package.__path__):
        yield importlib.import_module(f"{package.__name__}.{info.name}")


def check_of(unit: str, value: float, tolerance: float, simulated: float = 2.0) -> Check:
    return Check("p.fig1.x", "q", unit, value, simulated, tolerance)


def test_every_target_a_calibration_script_fits_is_labelled_calibration() -> None:
    for paper in PAPERS:
        targets = load_targets(paper)
        for tid in fitted_by_scripts(paper):
            assert basis_of(targets[tid])[0] == "calibration", tid


def test_every_script_that_fits_declares_what_it_fits() -> None:
    """A module with a fitting entry point (``fitted_values``/``calibrate``) has ``FITS``."""
    for paper in PAPERS:
        for module in calibration_modules(paper):
            if hasattr(module, "fitted_values") or hasattr(module, "calibrate"):
                assert isinstance(getattr(module, "FITS", None), dict), module.__name__


def test_the_glitches_scripts_fit_exactly_the_targets_they_declare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``FITS`` of each GLITCHES script is the set of targets its ``measured()`` reads."""
    from simulations.core.policies.glitches.calibration import fpga_flightllm, gpu_fp16

    read: set[str] = set()
    original = PaperTargets.value

    def spy(self: PaperTargets, tid: str) -> float:
        read.add(tid)
        return original(self, tid)

    monkeypatch.setattr(PaperTargets, "value", spy)
    for slug in gpu_fp16.DEVICES:
        gpu_fp16.measured(slug)
    assert read == set(gpu_fp16.FITS)
    read.clear()
    fpga_flightllm.measured()
    assert read == set(fpga_flightllm.FITS)


def test_the_heterollm_script_fits_the_decode_gains_it_declares() -> None:
    from simulations.core.policies.heterollm.calibration import npu_w4a16

    targets = load_targets("heterollm")
    assert sorted(targets.value(t) for t in npu_w4a16.FITS) == sorted(
        g for _, g in npu_w4a16.DECODE_GAINS
    )


def test_a_fitted_target_cannot_be_labelled_a_prediction() -> None:
    fitted = next(iter(fitted_by_scripts("glitches")))
    target = load_targets("glitches")[fitted]
    for label in ("prediction", "input"):
        with pytest.raises(ValueError, match="calibration script"):
            basis_of(Target(**{**_fields(target), "basis": label, "basis_why": "x"}))


def _fields(t: Target) -> dict[str, Any]:
    return {f: getattr(t, f) for f in t.__dataclass_fields__}


def test_an_unlabelled_target_no_script_fits_is_a_prediction() -> None:
    t = load_targets("h2m2")["h2m2.fig15.h2m2"]
    basis, why = basis_of(t)
    assert basis == "prediction" and why


@pytest.mark.parametrize("paper", ["glitches", "heterollm"])
def test_every_input_check_prints_the_catalog_values_it_names(paper: str) -> None:
    targets = load_targets(paper)
    inputs = {t.id: t for t in targets.targets.values() if t.basis == "input"}
    assert inputs
    for c in reproduce(paper)["checks"]:
        if c["id"] in inputs:
            assert c["basis"] == "input"
            expected = math.prod(catalog_value(r) for r in inputs[c["id"]].catalog)
            assert c["simulated"] == pytest.approx(expected, rel=1e-3), c["id"]


def test_only_glitches_and_heterollm_have_input_targets() -> None:
    """The input test above runs those two papers' reproductions only (Neo's takes long)."""
    with_inputs = {
        p for p in PAPERS if any(t.basis == "input" for t in load_targets(p).targets.values())
    }
    assert with_inputs == {"glitches", "heterollm"}


def test_every_target_of_every_paper_has_a_basis() -> None:
    for paper in PAPERS:
        for t in load_targets(paper).targets.values():
            basis, why = basis_of(t)
            assert basis in ("prediction", "calibration", "input") and why, t.id


def test_a_ratio_whose_tolerance_covers_no_effect_is_not_discriminating() -> None:
    # Neo Fig. 6 A10G at the old ±20 %: 1.064 × 0.8 < 1.0, so "no gain" would pass.
    assert not check_of("x", 1.064, 0.2).discriminating
    assert check_of("x", 1.5, 0.1).discriminating
    assert not check_of("ratio", 1.05, 0.1).discriminating


def test_a_check_that_is_not_a_ratio_is_discriminating_even_near_one() -> None:
    assert check_of("ms", 1.0, 0.5).discriminating
    assert check_of("bool", 1.0, 0.0).discriminating


def test_a_bound_that_admits_no_effect_is_not_discriminating() -> None:
    lower = BoundCheck("p.fig1.x", "q", "x", 0.95, 1.01, 0.0, bound="lower")
    upper = BoundCheck("p.fig1.x", "q", "x", 0.6, 0.35, 0.1, bound="upper")
    assert not lower.discriminating
    assert upper.discriminating


def test_the_json_document_carries_basis_and_discriminating() -> None:
    doc = reproduce("glitches")
    for c in doc["checks"]:
        assert c["basis"] in ("prediction", "calibration", "input")
        assert c["basis_why"]
        assert isinstance(c["discriminating"], bool)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('basis = "guess"', "basis must be"),
        ('basis = "calibration"', "needs basis_why"),
        ('basis = "input"\nbasis_why = "echo"', "catalog names"),
        ('catalog = ["device:a100-80gb:price_usd"]', "catalog names"),
    ],
)
def test_a_malformed_basis_is_refused(extra: str, message: str) -> None:
    text = (
        '[[target]]\nid = "p.fig1.x"\nquantity = "q"\nunit = "x"\nvalue = 1.5\n'
        f'tolerance = 0.1\nsource = "s"\n{extra}\n'
    )
    with pytest.raises(ValueError, match=message):
        parse_targets("p", text)
