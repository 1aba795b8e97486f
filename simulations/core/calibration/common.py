"""Helpers shared by the calibration scripts: rounding, applying fitted values, the command
line with ``--check``, tables."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from simulations.core.catalog import DATA_DIR
from simulations.core.spec import RuntimeProfile


def round_sig(x: float, digits: int = 4) -> float:
    """``x`` rounded to ``digits`` significant digits (0 stays 0)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def with_fitted(
    base: RuntimeProfile, values: Mapping[str, float], field_keys: Collection[str]
) -> RuntimeProfile:
    """``base`` with fitted ``values`` applied: those named in ``field_keys`` replace the
    profile's fields, the others are set in its ``params``."""
    params = dict(base.params)
    params.update({k: v for k, v in values.items() if k not in field_keys})
    fields: dict[str, Any] = {k: v for k, v in values.items() if k in field_keys}
    return replace(base, **fields, params=params)


def catalog_runtime_record(filename: str, slug: str) -> dict[str, Any]:
    """The raw record ``slug`` of ``data/runtimes/<filename>``."""
    records = json.loads((DATA_DIR / "runtimes" / filename).read_text())
    for r in records:
        if r["slug"] == slug:
            return dict(r)
    raise KeyError(f"{slug} not in {filename}")


def compare_with_catalog(
    fitted: Mapping[str, float], filename: str, slug: str, rel_tol: float = 1e-6
) -> list[str]:
    """Names of fitted values that differ from the catalog record (fields or ``params``)."""
    rec = catalog_runtime_record(filename, slug)
    params = rec.get("params", {})
    bad = []
    for key, value in fitted.items():
        stored = rec[key] if key in rec else params.get(key)
        if stored is None or not math.isclose(float(stored), value, rel_tol=rel_tol, abs_tol=1e-12):
            bad.append(f"{key}: fitted {value!r}, catalog {stored!r}")
    return bad


def calibration_main(
    argv: Sequence[str] | None,
    *,
    doc: str,
    slug: str,
    filename: str,
    values: Callable[[], dict[str, float]],
    report: Callable[[dict[str, float]], None] | None = None,
    verb: str = "fitted",
) -> int:
    """The command line of a calibration script: compute ``values()``, print them and
    ``report`` them (residuals); with ``--check`` compare them with the record ``slug`` of
    ``data/runtimes/<filename>`` and return 1 on a mismatch."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--check", action="store_true", help=f"compare with data/runtimes/{filename}")
    args = ap.parse_args(argv)
    vals = values()
    print(f"{verb} values of {slug} (data/runtimes/{filename}):")
    for k, v in vals.items():
        print(f"  {k} = {v!r}")
    if report is not None:
        report(vals)
    if args.check:
        bad = compare_with_catalog(vals, filename, slug)
        if bad:
            print("\ncatalog differs:\n  " + "\n  ".join(bad))
            return 1
        print("\ncatalog matches")
    return 0


def table(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain-text table."""
    rows = [list(map(_fmt, r)) for r in rows]
    head = list(header)
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
