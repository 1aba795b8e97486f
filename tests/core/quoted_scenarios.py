"""Small scenario documents for the tests of per-placement quotes (price, power): one
workload, homogeneous systems, and the parse errors or simulated systems of a document."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simulations.core.catalog import Catalog
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate

WORKLOAD: dict[str, Any] = {
    "requests": 12,
    "input_tokens": {"dist": "uniform", "low": 100, "high": 400},
    "output_tokens": {"dist": "uniform", "low": 8, "high": 40},
    "arrival": {"kind": "poisson", "rate_per_s": 2.0},
    "seed": 0,
}


def scenario_doc(*systems: dict[str, Any], name: str, model: str = "llama2-7b") -> dict[str, Any]:
    """A scenario of ``systems`` over a copy of :data:`WORKLOAD`."""
    return {
        "name": name,
        "model": model,
        "workload": copy.deepcopy(WORKLOAD),
        "systems": list(systems),
    }


def homogeneous(*devices: dict[str, Any], name: str = "sys") -> dict[str, Any]:
    """A ``homogeneous`` system entry of ``devices``."""
    return {"name": name, "policy": "homogeneous", "devices": list(devices)}


def scenario_errors(document: dict[str, Any], catalog: Catalog) -> dict[str, list[str]]:
    """The field errors ``document`` is refused with (it must be refused)."""
    with pytest.raises(ScenarioValidationError) as info:
        parse_scenario(document, catalog)
    return info.value.errors


def run_systems(document: dict[str, Any], catalog: Catalog) -> list[dict[str, Any]]:
    """The simulated systems of ``document``."""
    return list(simulate(parse_scenario(document, catalog))["systems"])
