"""Confirmation: run one configuration through the request-level engine and judge it.

A configuration is *feasible* when its policy simulates the plan's whole workload without
a capacity error and the result document meets every target: the p90/p99 TTFT and TPOT
(the result document's own percentiles) at or below their targets and the throughput at or
above its minimum. Everything the planner reports about a confirmed configuration comes
from this evaluation; the screen's figures are only bounds.
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulations.core.errors import CapacityError, SpecError
from simulations.core.jsonsafe import finite
from simulations.core.policies import get_policy
from simulations.core.spec import WorkloadSpec
from simulations.core.tco import tco_fields

from .document import PlanSpec, Targets
from .space import Config, system_spec

#: Result-document keys kept for a confirmed configuration (the timeline is dropped).
KEPT_METRICS = (
    "policy",
    "requests",
    "generated_tokens",
    "span_s",
    "throughput_tok_s",
    "requests_per_s",
    "ttft_ms",
    "tpot_ms",
    "e2e_s",
    "capex_usd",
    "cost_efficiency_tok_s_per_usd",
    "avg_power_w",
    "energy_j_per_token",
    "energy_efficiency_tok_s_per_w",
    "slo_attainment",
    "preemptions",
    "clipped_requests",
    "devices",
)

#: (target key, metric, percentile, whether the metric must stay at or below the target).
TARGET_CHECKS = (
    ("ttft_p90_ms", "ttft_ms", "p90", True),
    ("tpot_p90_ms", "tpot_ms", "p90", True),
    ("ttft_p99_ms", "ttft_ms", "p99", True),
    ("tpot_p99_ms", "tpot_ms", "p99", True),
    ("min_throughput_tok_s", "throughput_tok_s", None, False),
)


@dataclass
class Evaluation:
    """The engine's verdict on one configuration.

    ``misses`` lists every target it misses (``{"target", "value", "limit"}``); ``error``
    says why it could not be simulated (e.g. the model does not fit), in which case it is
    infeasible and ``metrics`` is empty. ``unknown`` marks a configuration the engine gave
    no verdict on (an internal error, or every worker that tried it was lost): it counts
    as infeasible, and the result no longer claims to be exhaustive.
    """

    key: str
    feasible: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    misses: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    unknown: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (what the database stores per configuration)."""
        return {
            "key": self.key,
            "feasible": self.feasible,
            "metrics": self.metrics,
            "misses": self.misses,
            "error": self.error,
            "seconds": self.seconds,
            "unknown": self.unknown,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evaluation:
        """Inverse of :meth:`as_dict`."""
        return cls(
            key=str(d["key"]),
            feasible=bool(d["feasible"]),
            metrics=dict(d.get("metrics") or {}),
            misses=list(d.get("misses") or []),
            error=str(d.get("error") or ""),
            seconds=float(d.get("seconds") or 0.0),
            unknown=bool(d.get("unknown", False)),
        )

    @property
    def energy_j_per_token(self) -> float:
        """Energy per generated token (inf when not simulated)."""
        v = self.metrics.get("energy_j_per_token")
        return float(v) if isinstance(v, int | float) else math.inf

    @property
    def throughput_tok_s(self) -> float:
        """Generated tokens per second (0 when not simulated)."""
        v = self.metrics.get("throughput_tok_s")
        return float(v) if isinstance(v, int | float) else 0.0

    def first_miss(self) -> str:
        """Plain words for why it is infeasible ("" if it is feasible)."""
        if self.error:
            return self.error
        if not self.misses:
            return ""
        m = self.misses[0]
        if m["target"] == "min_throughput_tok_s":
            return f"throughput {m['value']:.4g} tok/s < {m['limit']:.4g}"
        name = m["target"].replace("_ms", "").replace("_", " ")
        return f"{name} {m['value']:.4g} ms > {m['limit']:.4g} ms"


def target_misses(targets: Targets, metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets ``metrics`` (a result-document entry) misses."""
    out = []
    for key, metric, pct, at_most in TARGET_CHECKS:
        limit = getattr(targets, key)
        if limit is None:
            continue
        value = metrics.get(metric)
        if pct is not None:
            value = (value or {}).get(pct)
        if value is None:
            continue  # e.g. no request with two tokens: no TPOT to miss
        if (value > limit) if at_most else (value < limit):
            out.append({"target": key, "value": float(value), "limit": float(limit)})
    return out


def objective_value(ev: Evaluation, capex: float, objective: str = "capex") -> float:
    """A confirmed configuration's value of the plan's ``objective`` (lower is better; inf
    when it has none, e.g. a TCO without a price)."""
    if objective == "capex":
        return capex
    if objective == "energy_per_token":
        return ev.energy_j_per_token
    key = "tco_usd_per_year" if objective == "tco_per_year" else "usd_per_million_tokens"
    v = ev.metrics.get(key)
    return float(v) if isinstance(v, int | float) else math.inf


def rank(ev: Evaluation, capex: float, objective: str = "capex") -> tuple[float, float, float, str]:
    """Order of feasible configurations: the plan's objective, then capex, then energy per
    token, then key (with the capex objective: capex, energy per token, key)."""
    return (objective_value(ev, capex, objective), capex, ev.energy_j_per_token, ev.key)


def evaluate_config(
    plan: PlanSpec, config: Config, *, workload: WorkloadSpec | None = None
) -> Evaluation:
    """Simulate ``config`` on the plan's workload (or ``workload``) and judge it."""
    wl = workload or plan.workload
    t0 = time.perf_counter()
    system = system_spec(config, plan)
    rng = np.random.default_rng([wl.seed, zlib.crc32(config.key.encode())])
    try:
        result = get_policy(config.policy)().run(
            system, plan.model, wl, plan.targets.slo(), rng, None
        )
    except SpecError as exc:
        why = "does not fit" if isinstance(exc, CapacityError) else "invalid"
        return Evaluation(
            config.key,
            False,
            error=f"{why}: {exc.field}: {exc.message}",
            seconds=time.perf_counter() - t0,
        )
    metrics = finite({k: result[k] for k in KEPT_METRICS if k in result})
    explanation = get_policy(config.policy).explain(result)
    if explanation:
        # What the policy says about its own result (read into the report's reasons).
        metrics["explanation"] = explanation
    # Capital cost is the plan's (a device entry may quote a price the catalog lacks).
    metrics["capex_usd"] = config.capex_usd
    thr = metrics.get("throughput_tok_s")
    if isinstance(thr, int | float) and config.capex_usd > 0:
        metrics["cost_efficiency_tok_s_per_usd"] = thr / config.capex_usd
    if plan.costs is not None:
        # The plan's costs: TCO from this run's energy and the configuration's prices.
        metrics.update(finite(tco_fields(system, result, plan.costs)))
    misses = target_misses(plan.targets, metrics)
    return Evaluation(
        config.key,
        not misses,
        metrics=metrics,
        misses=misses,
        seconds=time.perf_counter() - t0,
    )


__all__ = [
    "KEPT_METRICS",
    "Evaluation",
    "evaluate_config",
    "objective_value",
    "rank",
    "target_misses",
]
