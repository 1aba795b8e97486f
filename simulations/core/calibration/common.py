"""Helpers shared by the calibration scripts: the GLITCHES workload, rounding, tables."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulations.core.catalog import DATA_DIR, builtin_catalog, runtime_from_dict
from simulations.core.devices.base import DeviceModel
from simulations.core.spec import ModelSpec, RuntimeProfile

#: GLITCHES Table I workload: LLaMA2-7B, prefill 1536 tokens, then 512 decode steps.
PROMPT_TOKENS = 1536
DECODE_STEPS = 512


def round_sig(x: float, digits: int = 4) -> float:
    """``x`` rounded to ``digits`` significant digits (0 stays 0)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def llama2_7b() -> ModelSpec:
    """The model GLITCHES measures."""
    return builtin_catalog().model("llama2-7b")


def decode_average(dm: DeviceModel, model: ModelSpec) -> tuple[float, float, float, float]:
    """Mean (seconds, joules, FLOPs, bytes) per decode step over the 512 GLITCHES steps
    (cached context 1536 … 2047 tokens before each step)."""
    s = j = f = b = 0.0
    for i in range(DECODE_STEPS):
        c = dm.decode_step(model, 1, PROMPT_TOKENS + i)
        s += c.seconds
        j += c.joules
        f += c.flops
        b += c.bytes
    n = DECODE_STEPS
    return s / n, j / n, f / n, b / n


def with_values(
    base: RuntimeProfile, fields: Mapping[str, float], params: Mapping[str, float]
) -> RuntimeProfile:
    """``base`` with some fields and ``params`` entries replaced."""
    merged = dict(base.params)
    merged.update(params)
    kwargs: dict[str, Any] = dict(fields)
    return replace(base, **kwargs, params=merged)


def catalog_runtime_record(filename: str, slug: str) -> dict[str, Any]:
    """The raw record ``slug`` of ``data/runtimes/<filename>``."""
    records = json.loads((DATA_DIR / "runtimes" / filename).read_text())
    for r in records:
        if r["slug"] == slug:
            return dict(r)
    raise KeyError(f"{slug} not in {filename}")


def catalog_runtime(filename: str, slug: str) -> RuntimeProfile:
    """The runtime profile ``slug`` as stored in ``data/runtimes/<filename>``."""
    rec = catalog_runtime_record(filename, slug)
    rec.pop("default_for_kind", None)
    return runtime_from_dict(rec)


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


def data_path(*parts: str) -> Path:
    """A path under ``simulations/core/data``."""
    return DATA_DIR.joinpath(*parts)
