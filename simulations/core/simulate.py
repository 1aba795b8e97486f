"""Entry point of the simulation core: run a scenario, return the result document."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np

from .capacity import system_capacity
from .errors import SpecError
from .policies import get_policy
from .policies.base import ProgressFn
from .provenance import annotate_result
from .spec import ScenarioSpec, SystemSpec
from .tco import tco_fields


def _system_key(system: SystemSpec) -> str:
    """What decides a system's result besides the scenario: its policy, its placements
    (device, count, role, runtime, quoted price, quoted power) and its options — not its
    name."""
    return json.dumps(
        {
            "policy": system.policy,
            "devices": [
                [
                    p.device.slug,
                    p.count,
                    p.role,
                    p.runtime.slug,
                    p.quoted_price_usd,
                    p.quoted_tdp_w,
                ]
                for p in system.devices
            ],
            "options": system.options,
        },
        sort_keys=True,
        default=repr,
    )


def simulate(scenario: ScenarioSpec, *, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Simulate every system of ``scenario`` and return the result document (docs/architecture.md).

    Every system sees the same requests: the engine draws them from the workload's own seed.
    Each system also gets a ``numpy.random.Generator`` for policy-internal randomness, derived
    from the seed and the system's position, so results are deterministic and independent.
    ``progress`` receives a fraction in [0, 1]. Raises UnknownPolicyError before any work
    if a system names a policy the core does not implement. A SpecError (or CapacityError)
    from a system's run is re-raised with its field prefixed by ``systems[i].`` (unless it
    names the workload or model, which all systems share) and the system's name appended.
    Each device entry of each system carries its profile's provenance
    (:func:`~.provenance.annotate_result`). With the scenario's ``costs``, each system
    gains its total cost of ownership (:func:`~.tco.tco_fields`); with ``capacity``, its
    highest load within the SLO (:func:`~.capacity.system_capacity`). A system identical
    to an earlier one but for its name (same policy, placements and options) is not
    simulated again: its result is the earlier one's under its own name (unless its policy
    ``uses_rng``), its TCO and capacity included.
    """
    from . import policies as _policies  # noqa: F401  (fills the registry)

    classes = [get_policy(s.policy) for s in scenario.systems]
    n = len(scenario.systems)
    results = []
    done: dict[str, dict[str, Any]] = {}
    for i, (system, cls) in enumerate(zip(scenario.systems, classes, strict=True)):
        key = _system_key(system) if not cls.uses_rng else None
        if key is not None and key in done:
            # The same policy, devices and options see the same requests: the same result
            # (policies that draw from their generator opt out with ``uses_rng``).
            result = copy.deepcopy(done[key])
            result["name"] = system.name
            results.append(result)
            if progress is not None:
                progress((i + 1) / n)
            continue
        rng = np.random.default_rng([scenario.workload.seed, i])

        def sub_progress(frac: float, i: int = i) -> None:
            if progress is not None:
                progress((i + min(max(frac, 0.0), 1.0)) / n)

        try:
            result = cls().run(
                system, scenario.model, scenario.workload, scenario.slo, rng, sub_progress
            )
        except SpecError as exc:
            field = exc.field
            if not field.startswith(("systems[", "workload", "model")):
                field = f"systems[{i}].{field}"
            raise type(exc)(field, f"{exc.message} (system {system.name!r})") from exc
        # Every device entry says how its profile was calibrated, whatever built it.
        annotate_result(system, scenario.model, result)
        if scenario.costs is not None:
            result.update(tco_fields(system, result, scenario.costs))
        if scenario.capacity is not None:
            result.update(
                system_capacity(
                    cls,
                    system,
                    scenario.model,
                    scenario.workload,
                    scenario.slo,
                    [scenario.workload.seed, i],
                    scenario.capacity,
                )
            )
        if key is not None:
            done[key] = copy.deepcopy(result)
        results.append(result)
    if progress is not None:
        progress(1.0)
    return {"scenario": scenario.name, "model": scenario.model.slug, "systems": results}
