"""The run page's parallel layouts: each tensor/pipeline-parallel placement of a result as a
row (TP × PP × replicas, the link, the bubble fraction, the communication share and the
memory per device), read from the ``parallel`` block the core puts on a device entry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simulations.core.catalog import builtin_links


def _number(value: Any) -> float | None:
    """``value`` if it is a finite number (a stored result is JSON: anything may be there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _degree(value: Any) -> int:
    v = _number(value)
    return int(v) if v is not None and v >= 1 else 1


def parallel_rows(systems: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per device placement that carries a ``parallel`` block, in result order."""
    links = builtin_links()
    rows = []
    for s in systems:
        for d in s.get("devices") or ():
            block = d.get("parallel") if isinstance(d, Mapping) else None
            if not isinstance(block, Mapping):
                continue
            tp, pp = _degree(block.get("tensor_parallel")), _degree(block.get("pipeline_parallel"))
            replicas = _degree(block.get("replicas"))
            slug = str(block.get("link") or "")
            link = links.get(slug)
            rows.append(
                {
                    "system": str(s.get("name", "")),
                    "device": str(d.get("device", "")),
                    "count": d.get("count"),
                    "layout": f"TP {tp} × PP {pp} × {replicas} "
                    + ("replica" if replicas == 1 else "replicas"),
                    "tensor_parallel": tp,
                    "pipeline_parallel": pp,
                    "replicas": replicas,
                    "micro_batches": _degree(block.get("micro_batches")),
                    "link": slug,
                    "link_name": link.name if link is not None else "",
                    "link_bw_gbps": link.bw_gbps if link is not None else None,
                    "allreduce_algorithm": str(block.get("allreduce_algorithm") or ""),
                    "bubble_fraction": _number(block.get("bubble_fraction")),
                    "comm_share": _number(block.get("comm_share")),
                    "comm_s_per_device": _number(block.get("comm_s_per_device")),
                    "memory_peak_gb_per_device": _number(block.get("memory_peak_gb_per_device")),
                    "memory_capacity_gb_per_device": _number(
                        block.get("memory_capacity_gb_per_device")
                    ),
                }
            )
    return rows
