"""Scenario builders shared by the disaggregated policy's tests (core only, no database)."""

from __future__ import annotations

import copy
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.policies.disaggregated import DisaggregatedPolicy, DisaggSim
from simulations.core.scenario import parse_scenario
from simulations.core.spec import ScenarioSpec

CAT = builtin_catalog()

BASE: dict[str, Any] = {
    "name": "disaggregated",
    "model": "llama2-7b",
    "workload": {
        "requests": 120,
        "input_tokens": {"dist": "uniform", "low": 200, "high": 2000},
        "output_tokens": {"dist": "uniform", "low": 1, "high": 200},
        "arrival": {"kind": "poisson", "rate_per_s": 6.0},
        "seed": 3,
    },
    "systems": [
        {
            "name": "1P + 2D",
            "policy": "disaggregated",
            "devices": [
                {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "prefill"},
                {"device": "a100-80gb", "count": 2, "runtime": "vllm-fp16", "role": "decode"},
            ],
            "options": {},
        }
    ],
}


def doc(
    options: dict[str, Any] | None = None,
    devices: list[dict[str, Any]] | None = None,
    **workload: Any,
) -> dict[str, Any]:
    """The base scenario with the system's options / devices and workload fields replaced."""
    d = copy.deepcopy(BASE)
    if options is not None:
        d["systems"][0]["options"] = options
    if devices is not None:
        d["systems"][0]["devices"] = devices
    d["workload"].update(workload)
    return d


def parse(d: dict[str, Any]) -> ScenarioSpec:
    """The parsed scenario (the builtin catalog)."""
    return parse_scenario(d, CAT)


def run_sim(d: dict[str, Any], *, reference: bool = False) -> tuple[DisaggSim, RequestSet]:
    """The scheduler of the scenario's first system, after its run."""
    spec = parse(d)
    requests = generate_requests(spec.workload, spec.model)
    sim = DisaggregatedPolicy(reference=reference, timeline_cap=0).build_sim(
        spec.systems[0], spec.model, requests
    )
    sim.run()
    return sim, requests
