"""The load a system carries within the SLO (docs/architecture.md "Capacity").

With a scenario's ``capacity`` (:class:`~simulations.core.spec.CapacitySpec`) and an SLO,
each system's result gains ``max_load_rps_at_slo``, ``overloaded`` and the block
``capacity``. The work is bounded: every engine run simulates the scenario's first
``capacity.requests`` requests (its lengths, the system's policy and options), and there
are exactly ``2 + capacity.steps`` runs per system:

1. *Saturation*: all requests arrive at once (closed); the completion rate
   ``saturation_rps`` is the most the system serves on this request mix.
2. Poisson arrivals at ``saturation_rps``: if the SLO holds even there, the throughput and
   not the SLO limits the load (``limit`` ``"throughput"``) and that is the answer.
3. Otherwise bisection on the Poisson rate between 0 (assumed to pass: an idle system's
   latency) and ``saturation_rps`` (fails), ``steps`` times; a run passes when the
   result's ``slo_met`` holds (every percentile target). The answer is the highest rate
   that passed, and ``runs`` lists every run, so the bracket can be checked: the answer
   passed, the lowest failing rate above it failed, ``saturation_rps / 2**steps`` apart.
   No passing rate at all gives ``null`` and a ``reason``.

Limitation: ``saturation_rps`` is the completion rate of ``requests`` requests queued at
once, so the drain of the last batch counts in it. For batch-1 systems that is small; for a
continuous-batching system whose batch holds a large share of the requests it
underestimates what the system serves in a steady state (and so may flag ``overloaded``
and cap ``max_load_rps_at_slo`` too early). Choose ``capacity.requests`` well above the
system's batch size (the default, 200, is above the examples' batch-1 systems; raise it
for ``max_batch`` 256).

``overloaded``: the scenario's offered load (its Poisson rate, or its requests over the
trace's arrival window) exceeds ``saturation_rps`` — queues grow without bound and the
measured throughput only reflects the finite request count. ``null`` for closed arrivals,
which offer everything at once by design. Arrivals keep the workload's seed, so the
bisection's Poisson times are one sequence scaled by the rate.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from simulations.core.engine.requests import generate_requests
from simulations.core.errors import SpecError
from simulations.core.policies.base import Policy
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    CapacitySpec,
    ModelSpec,
    SloSpec,
    SystemSpec,
    WorkloadSpec,
)


def offered_rps(workload: WorkloadSpec, model: ModelSpec) -> float | None:
    """The arrival rate a workload offers (requests/s): the Poisson rate, or a trace's
    requests over its arrival window; ``None`` for closed arrivals (all at once)."""
    if workload.arrival.kind is ArrivalKind.CLOSED:
        return None
    if workload.arrival.kind is ArrivalKind.POISSON:
        return workload.arrival.rate_per_s
    arrival = generate_requests(workload, model).arrival_s
    window = float(arrival[-1] - arrival[0]) if arrival.size > 1 else 0.0
    return (arrival.size - 1) / window if window > 0 else None


def system_capacity(
    policy: type[Policy],
    system: SystemSpec,
    model: ModelSpec,
    workload: WorkloadSpec,
    slo: SloSpec,
    rng_key: list[int],
    spec: CapacitySpec,
) -> dict[str, Any]:
    """``max_load_rps_at_slo``, ``overloaded`` and ``capacity`` of one system (module
    notes). ``rng_key`` seeds each run's policy generator (the system's own key)."""
    n = min(spec.requests, workload.requests)
    base = replace(workload, requests=n)
    runs: list[dict[str, Any]] = []

    def run(arrival: ArrivalSpec) -> dict[str, Any]:
        rng = np.random.default_rng(rng_key)
        return policy().run(system, model, replace(base, arrival=arrival), slo, rng, None)

    offered = offered_rps(workload, model)
    block: dict[str, Any] = {
        "requests_per_run": n,
        "steps": spec.steps,
        "offered_rps": offered,
        "saturation_rps": None,
        "limit": None,
        "reason": None,
        "runs": runs,
    }
    try:
        saturation = float(run(ArrivalSpec(ArrivalKind.CLOSED))["requests_per_s"])
        block["saturation_rps"] = saturation

        def passes(rate: float) -> bool:
            res = run(ArrivalSpec(ArrivalKind.POISSON, rate_per_s=rate))
            ok = bool(res.get("slo_met"))
            runs.append(
                {
                    "rate_rps": rate,
                    "slo_met": ok,
                    "slo_attainment": res.get("slo_attainment"),
                    "ttft_p90_ms": (res.get("ttft_ms") or {}).get("p90"),
                    "tpot_p90_ms": (res.get("tpot_ms") or {}).get("p90"),
                    "throughput_tok_s": res.get("throughput_tok_s"),
                }
            )
            return ok

        best: float | None
        if passes(saturation):
            best = saturation
            block["limit"] = "throughput"
        else:
            lo, hi = 0.0, saturation
            for _ in range(spec.steps):
                mid = (lo + hi) / 2
                if passes(mid):
                    lo = mid
                else:
                    hi = mid
            best = lo if lo > 0 else None
            block["limit"] = "slo"
            if best is None:
                block["reason"] = f"misses the SLO at every rate tried, down to {hi:.4g} requests/s"
    except SpecError as exc:
        best = None
        block["reason"] = f"a capacity run failed: {exc.field}: {exc.message}"
    sat = block["saturation_rps"]
    overloaded = None if offered is None or sat is None else bool(offered > sat)
    return {"max_load_rps_at_slo": best, "overloaded": overloaded, "capacity": block}


__all__ = ["offered_rps", "system_capacity"]
