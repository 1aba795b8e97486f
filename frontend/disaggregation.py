"""The run page's disaggregated pools: each disaggregated system as its prefill and decode
pools (device types and counts, instances, utilisation, KV peak) and the hand-over between
them (KV bytes moved, the transfer's share of request latency, queueing at the hand-over,
backpressure events), read from the ``disaggregated`` block the policy puts on its entry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frontend.charts.base import finite

ROLES = ("prefill", "decode")


def _count(value: Any) -> int | None:
    v = finite(value)
    return int(v) if v is not None and v >= 0 else None


def _devices(pool: Mapping[str, Any]) -> list[tuple[str, int | None]]:
    """(slug, devices) per device type of a pool; a result recorded before the block listed
    its types gives none."""
    rows = []
    for t in pool.get("device_types") or ():
        if isinstance(t, Mapping):
            rows.append((str(t.get("device", "")), _count(t.get("devices"))))
    return rows


def _stat(block: Mapping[str, Any], name: str, key: str) -> float | None:
    stats = block.get(name)
    return finite(stats.get(key)) if isinstance(stats, Mapping) else None


def pool_rows(systems: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per system with a ``disaggregated`` block, in result order: its two pools
    (``pools``, prefill then decode) and its hand-over figures."""
    out = []
    for s in systems:
        block = s.get("disaggregated")
        if not isinstance(block, Mapping):
            continue
        pools = []
        for role in ROLES:
            pool = block.get(f"{role}_pool")
            if not isinstance(pool, Mapping):
                pool = {}
            pools.append(
                {
                    "role": role,
                    "device_types": _devices(pool),
                    "devices": _count(pool.get("devices")),
                    "instances": _count(pool.get("instances")),
                    "busy_fraction": finite(pool.get("busy_fraction")),
                    "kv_peak_fraction": finite(pool.get("kv_peak_fraction")),
                }
            )
        moved = finite(block.get("kv_bytes_moved"))
        share = finite(block.get("kv_transfer_share"))
        out.append(
            {
                "system": str(s.get("name", "")),
                "pools": pools,
                "kv_gb_moved": moved / 1e9 if moved is not None else None,
                # in per cent with significant digits: a streamed hand-over's share is
                # often far below 0.1 %
                "kv_transfer_pct": share * 100 if share is not None else None,
                "exposed_kv_mean_ms": _stat(block, "exposed_kv_transfer", "mean_ms"),
                "queueing_mean_ms": _stat(block, "handover_queueing", "mean_ms"),
                "queueing_p90_ms": _stat(block, "handover_queueing", "p90_ms"),
                "backpressured": _count(block.get("backpressured")),
                "handed_over": _count(block.get("handed_over")),
            }
        )
    return out
