"""Base of the policies that run the request-level engine on a system's device models.

:class:`EnginePolicy` holds what every such policy is constructed with (the device-model
factory and the engine's switches) and turns a run into the result entry: draw the
workload's requests, :meth:`~EnginePolicy.simulate` them, and build the result-document entry
with :func:`~simulations.core.metrics.system_result`. Subclasses implement ``simulate``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from simulations.core.devices import build_device_model
from simulations.core.engine.core import DeviceModelFactory, ProgressFn, SimOutput
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.metrics import system_result
from simulations.core.spec import ModelSpec, SloSpec, SystemSpec, WorkloadSpec

from .base import Policy


class EnginePolicy(Policy):
    """A policy whose systems run on the engine.

    ``device_models`` builds the cost model of each (device, runtime) pair (default: the
    core's :func:`~simulations.core.devices.build_device_model`; tests pass doubles);
    ``reference`` runs the engine step by step instead of fast-forwarding; ``audit`` makes
    it check its invariants and keep decision logs; ``timeline_cap`` bounds the intervals
    kept per device timeline (``None``: all).
    """

    def __init__(
        self,
        device_models: DeviceModelFactory | None = None,
        *,
        reference: bool = False,
        audit: bool = False,
        timeline_cap: int | None = 400,
    ) -> None:
        self.device_models: DeviceModelFactory = device_models or build_device_model
        self.reference = reference
        self.audit = audit
        self.timeline_cap = timeline_cap

    @abstractmethod
    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run ``system`` on ``requests`` and return the raw outcome."""

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Simulate ``system`` on the workload's requests and return its result entry."""
        requests = generate_requests(workload, model)
        return system_result(system, self.simulate(system, model, requests, progress), slo)
