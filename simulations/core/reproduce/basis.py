"""What kind of evidence each check is: a prediction, a calibration or an input.

* ``"prediction"`` — derived without fitting anything to the figure (the default);
* ``"calibration"`` — a parameter was fitted to the figure, or the figure is arithmetic on
  fitted figures and catalog inputs only;
* ``"input"`` — a catalog value compared with itself.

A target's basis is declared in its paper's ``targets.toml`` (``basis``/``basis_why``), but
the figures a calibration script fits are read from the scripts themselves: every module of
a paper package's ``calibration/`` declares ``FITS = {target id: why}``, and a target listed
there is calibration whatever the file says (declaring it a prediction is an error). The
``FITS`` literals are read with :mod:`ast`, not imported, so the reproduce framework does not
depend on the calibration framework (and does not load scipy to label a check).

A ratio check (unit ``x`` or ``ratio``) that would also pass at "no effect" — a simulated
1.0 within its tolerance or bound — is *non-discriminating*: it cannot tell the modelled
mechanism from its absence.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from simulations.core.policies import get_paper

from .targets import Target

#: The bases, in the order reports list them.
BASES = ("prediction", "calibration", "input")
#: Units of a ratio of two systems (or two configurations), whose "no effect" is 1.0.
RATIO_UNITS = frozenset({"x", "ratio"})
#: A ratio's value when the mechanism under test has no effect.
NO_EFFECT = 1.0
#: basis_why of a prediction that declares none.
PREDICTION_WHY = (
    "Nothing is fitted to this figure: it follows from catalog datasheets, model shapes and "
    "stack profiles fitted on other figures."
)


def _fits_of(path: Path) -> dict[str, str]:
    """The ``FITS`` literal of the calibration module at ``path`` (empty when it has none)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "FITS" for t in targets):
            fits = ast.literal_eval(value)
            if not isinstance(fits, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in fits.items()
            ):
                raise ValueError(f"{path}: FITS must map target ids to a non-empty why")
            return dict(fits)
    return {}


@cache
def fitted_by_scripts(paper: str) -> dict[str, str]:
    """Every target of ``paper`` that a calibration script fits, with why (the script's
    sentence and its module)."""
    package = get_paper(paper).package
    directory = Path(str(resources.files(package).joinpath("calibration")))
    out: dict[str, str] = {}
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("*.py")):
        module = f"{package}.calibration.{path.stem}"
        for tid, why in _fits_of(path).items():
            text = f"{why} ({module})"
            out[tid] = f"{out[tid]} {text}" if tid in out else text
    return out


def basis_of(target: Target) -> tuple[str, str]:
    """``(basis, basis_why)`` of ``target``; ValueError when the file labels a target that a
    calibration script fits as anything but calibration."""
    fitted = fitted_by_scripts(target.paper)
    if target.id in fitted:
        if target.basis not in ("", "calibration"):
            raise ValueError(
                f"{target.id} is fitted by a calibration script ({fitted[target.id]}); "
                f"it cannot be labelled {target.basis!r}"
            )
        return "calibration", target.basis_why or fitted[target.id]
    basis = target.basis or "prediction"
    return basis, target.basis_why or PREDICTION_WHY


def is_ratio(unit: str) -> bool:
    """Whether a check in ``unit`` is a ratio whose "no effect" value is :data:`NO_EFFECT`."""
    return unit in RATIO_UNITS


def catalog_value(ref: str) -> float:
    """The built-in catalog's value named by ``ref`` (``device:<slug>:<field>`` or
    ``runtime:<slug>:<field>``, ``params.<name>`` for a param): what an ``"input"`` target
    says its check echoes. KeyError/AttributeError for an unknown name."""
    from simulations.core.catalog import builtin_catalog

    kind, slug, name = ref.split(":")
    cat = builtin_catalog()
    if kind == "device":
        obj: Any = cat.device(slug)
    elif kind == "runtime":
        obj = cat.runtime(slug)
    else:
        raise KeyError(f"{ref!r}: the kind must be 'device' or 'runtime'")
    if name.startswith("params."):
        return float(obj.params[name.removeprefix("params.")])
    return float(getattr(obj, name))


#: The groups a report shows, in order: (key, title). ``non_discriminating`` holds the
#: predictions that would also pass at "no effect"; ``unlabelled`` checks stored before
#: checks carried a basis.
GROUPS = (
    ("prediction", "Predictions (nothing fitted to the figure)"),
    ("non_discriminating", 'Predictions that would also pass at "no effect" (1.0)'),
    ("calibration", "Calibration (fitted to the figure, or arithmetic on fitted figures)"),
    ("input", "Inputs (a catalog value compared with itself)"),
    ("unlabelled", "Unlabelled (computed before checks carried a basis)"),
)


def group_of(check: Mapping[str, Any]) -> str:
    """The :data:`GROUPS` key of a check document (``reproduce`` JSON's check)."""
    basis = check.get("basis")
    if basis not in BASES:
        return "unlabelled"
    if basis == "prediction" and check.get("discriminating") is False:
        return "non_discriminating"
    return str(basis)


def grouped(checks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The non-empty :data:`GROUPS` of ``checks``, each ``{"key", "title", "checks", "n",
    "ok"}`` (``ok`` = how many are within tolerance), checks in their given order."""
    by: dict[str, list[Mapping[str, Any]]] = {key: [] for key, _ in GROUPS}
    for c in checks:
        by[group_of(c)].append(c)
    return [
        {
            "key": key,
            "title": title,
            "checks": by[key],
            "n": len(by[key]),
            "ok": sum(1 for c in by[key] if c.get("ok")),
        }
        for key, title in GROUPS
        if by[key]
    ]


def summary(checks: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """``{group key: {"n": …, "ok": …}}`` for every group of :data:`GROUPS` (zeros when
    empty). The headline is ``summary(...)["prediction"]``: discriminating predictions
    only."""
    out = {key: {"n": 0, "ok": 0} for key, _ in GROUPS}
    for g in grouped(checks):
        out[g["key"]] = {"n": g["n"], "ok": g["ok"]}
    return out


def headline(counts: Mapping[str, Mapping[str, int]]) -> str:
    """ "predictions within tolerance: X of Y" (and the non-discriminating ones beside)."""
    p, nd = counts["prediction"], counts["non_discriminating"]
    text = f"predictions within tolerance: {p['ok']} of {p['n']}"
    if nd["n"]:
        text += (
            f" (not counted: {nd['n']} that would also pass at no effect, "
            f"{nd['ok']} within tolerance)"
        )
    return text
