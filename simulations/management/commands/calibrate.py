"""``manage.py calibrate MEASUREMENTS.csv --stack SLUG [--format json|table]``: fit a runtime
profile to a measurement set (the calibration document of ``docs/architecture.md``).

A thin shell over :func:`simulations.core.calibration.fit.fit_profile`: the stack's structure
(precision, kernel counts, the values of parameters the set does not constrain) comes from the
built-in catalog, so the command needs no database. ``--format json`` prints
``{"stack", "parameters", "rows", "mape", "max_rel_err", "holdout_mape", ...}``; the table
shows the fitted values with their bounds and standard errors, every row's residual and
the hold-out errors. Bad rows (named by line and column), an unknown stack and a refused
fit (under-determined or unphysical) exit with status 1 and say why.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulations.core.calibration.fit import FitRefusedError, fit_profile
from simulations.core.calibration.measurements import MeasurementError, load_measurements
from simulations.core.catalog import builtin_catalog
from simulations.core.errors import SpecError
from simulations.core.jsonsafe import finite


def _pct(v: float | None) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.1%}"


def _num(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.4g}"


def render_table(doc: dict[str, Any]) -> str:
    """The fit as text no wider than 80 columns."""
    lines = [
        *textwrap.wrap(
            f"{doc['stack']} fitted to {doc['measurement_set']} ({doc['format']}; "
            f"{', '.join(doc['devices'])}; {', '.join(doc['models'])})",
            80,
        ),
        f"MAPE {_pct(doc['mape'])}, max {_pct(doc['max_rel_err'])} over "
        f"{doc['counted_rows']} rows >= {doc['small_row_threshold_ms'] * 1e3:g} us; hold-out "
        f"MAPE {_pct(doc['holdout_mape'])}, max {_pct(doc['holdout_max_rel_err'])}",
    ]
    if doc["small_rows"]:
        lines.append(
            f"{doc['small_rows']} quantised rows under "
            f"{doc['small_row_threshold_ms'] * 1e3:g} us: largest absolute error "
            f"{_num(doc['small_rows_max_abs_err_ms'] * 1e3)} us"
        )
    lines += [
        "",
        f"{'parameter':<22} {'value':>10} {'+/-':>9} {'bounds':>16} {'unit':<8} fitted",
        "-" * 80,
    ]
    for name, p in doc["parameters"].items():
        bounds = f"[{p['lower']:g}, {p['upper']:g}]"
        lines.append(
            f"{name:<22} {_num(p['value']):>10} {_num(p['stderr']):>9} {bounds:>16} "
            f"{p['unit']:<8} {'yes' if p['fitted'] else 'kept'}"
        )
    lines += [
        "",
        f"{'line':>4} {'row':<44} {'measured':>9} {'predicted':>9} {'rel.err':>8}",
        "-" * 80,
    ]
    for r in doc["rows"]:
        label = r["label"] if len(r["label"]) <= 44 else r["label"][:43] + "…"
        err = f"{r['rel_err']:+.1%}" if r["counted"] else f"{r['abs_err_ms'] * 1e3:+.1f}us"
        lines.append(
            f"{r['line']:>4} {label:<44} {_num(r['measured_ms']):>9} "
            f"{_num(r['predicted_ms']):>9} {err:>8}"
        )
    lines += ["", "hold-out (refit without each group, then predict it):"]
    for g in doc["holdout"]:
        counted = [abs(r["rel_err"]) for r in g["rows"] if r["counted"]]
        what = g["error"] or (
            f"MAPE {_pct(sum(counted) / len(counted))}" if counted else "only quantised rows"
        )
        held = f" (held at prior: {', '.join(g['held_at_prior'])})" if g["held_at_prior"] else ""
        lines.append(f"  {g['group']}: {what}{held}")
    for note in doc["notes"]:
        lines += textwrap.wrap(f"note: {note}", 80, subsequent_indent="  ")
    return "\n".join(lines)


class Command(BaseCommand):
    """Fit a runtime profile to a measurement CSV and print the fit."""

    help = "Fit a runtime profile (--stack) to a measurement CSV and print values and residuals."
    requires_system_checks: list[str] = []  # no database needed

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("measurements", help="CSV of operator or end-to-end rows")
        parser.add_argument("--stack", required=True, help="runtime profile slug (catalog)")
        parser.add_argument("--format", choices=("json", "table"), default="json")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["measurements"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        catalog = builtin_catalog()
        try:
            stack = catalog.runtime(options["stack"])
        except SpecError as exc:
            raise CommandError(f"--stack: {exc.message}") from exc
        try:
            report = fit_profile(stack, load_measurements(path), catalog)
        except MeasurementError as exc:
            raise CommandError(
                f"{path}: " + "; ".join(str(e) for e in exc.errors), returncode=1
            ) from exc
        except FitRefusedError as exc:
            raise CommandError(f"fit refused: {exc}", returncode=1) from exc
        doc = finite(report.as_dict())
        if options["format"] == "json":
            self.stdout.write(json.dumps(doc, indent=2, allow_nan=False))
        else:
            self.stdout.write(render_table(doc))
