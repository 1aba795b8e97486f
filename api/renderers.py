"""CSV output for run results and sweep results (``?format=csv``)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rest_framework.renderers import BaseRenderer

#: Columns shown first (docs/architecture.md order); any other scalar metric follows, sorted.
LEADING_COLUMNS = (
    "system",
    "policy",
    "requests",
    "throughput_tok_s",
    "requests_per_s",
    "prompt_tok_s",
    "ttft_ms_mean",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "tpot_ms_mean",
    "tpot_ms_p50",
    "tpot_ms_p90",
    "tpot_ms_p99",
    "e2e_s_mean",
    "e2e_s_p50",
    "e2e_s_p90",
    "e2e_s_p99",
    "capex_usd",
    "cost_efficiency_tok_s_per_usd",
    "avg_power_w",
    "energy_j_per_token",
    "energy_efficiency_tok_s_per_w",
    "slo_attainment",
)


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return "" if value is None else value


def system_row(system: Mapping[str, Any]) -> dict[str, Any]:
    """One CSV row of a result document's system: scalars, and latency objects flattened
    (``ttft_ms`` → ``ttft_ms_p90`` …); lists (devices, scheduler internals) are left out."""
    row: dict[str, Any] = {"system": system.get("name", "")}
    for key, value in system.items():
        if key == "name":
            continue
        if value is None or isinstance(value, bool | int | float | str):
            row[key] = value
        elif isinstance(value, Mapping):
            for sub, inner in value.items():
                if inner is None or isinstance(inner, bool | int | float | str):
                    row[f"{key}_{sub}"] = inner
    return row


def columns_for(rows: Sequence[Mapping[str, Any]], leading: Iterable[str] = ()) -> list[str]:
    """Column order: ``leading`` keys, then the known metrics, then the rest sorted."""
    present: set[str] = set()
    for row in rows:
        present.update(row)
    order = [c for c in (*leading, *LEADING_COLUMNS) if c in present]
    seen = set(order)
    order = list(dict.fromkeys(order))
    return order + sorted(present - seen)


#: Ratios to the baseline system added to a result's CSV (``<key>_vs_baseline``).
RATIO_KEYS = (
    "throughput_tok_s",
    "cost_efficiency_tok_s_per_usd",
    "energy_efficiency_tok_s_per_w",
)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def result_table(result: Mapping[str, Any], baseline: int = 0) -> dict[str, Any]:
    """The one CSV schema of a run's result, used by ``/api/runs/{id}/result/?format=csv``
    and the run page's "Result CSV": a row per system with every scalar of the result
    document (latency objects flattened: ``ttft_ms`` → ``ttft_ms_p90``), then
    ``<key>_vs_baseline`` for :data:`RATIO_KEYS` and ``baseline`` ("yes" on the baseline's
    row; ``baseline`` out of range means the first system)."""
    systems = [s for s in result.get("systems") or () if isinstance(s, Mapping)]
    rows = [system_row(system) for system in systems]
    columns = columns_for(rows)
    if not systems:
        return {"columns": columns, "rows": rows}
    base_index = baseline if 0 <= baseline < len(systems) else 0
    base = systems[base_index]
    for i, (system, row) in enumerate(zip(systems, rows, strict=True)):
        for key in RATIO_KEYS:
            v, b = _finite(system.get(key)), _finite(base.get(key))
            row[f"{key}_vs_baseline"] = v / b if v is not None and b is not None and b > 0 else None
        row["baseline"] = "yes" if i == base_index else ""
    columns += [f"{k}_vs_baseline" for k in RATIO_KEYS] + ["baseline"]
    return {"columns": columns, "rows": rows}


def csv_text(table: Mapping[str, Any]) -> str:
    """``{"columns", "rows"}`` as CSV text (as :class:`CSVRenderer` writes it)."""
    return CSVRenderer().render(table).decode("utf-8")


class CSVRenderer(BaseRenderer):
    """Renders ``{"columns": [...], "rows": [{...}]}``; an error body as one ``detail`` cell."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if isinstance(data, Mapping) and "columns" in data and "rows" in data:
            columns = list(data["columns"])
            writer.writerow(columns)
            for row in data["rows"]:
                writer.writerow([_cell(row.get(c)) for c in columns])
        else:
            writer.writerow(["detail"])
            writer.writerow([data.get("detail", data) if isinstance(data, Mapping) else data])
        return out.getvalue().encode(self.charset)
