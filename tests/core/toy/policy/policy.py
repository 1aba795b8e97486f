"""The toy policy: batch-1 replicas on the engine (what ``homogeneous`` does at
``max_batch = 1``), GPUs only."""

from __future__ import annotations

from typing import Any, ClassVar

from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import ProgressFn, SimOutput, build_units
from simulations.core.engine.requests import RequestSet
from simulations.core.policies.base import RoleSpec
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
from simulations.core.spec import ModelSpec, SystemSpec

from . import screen


class ToyReplicasPolicy(EnginePolicy):
    """Every GPU serves whole requests, one at a time, from one FCFS queue."""

    name: ClassVar[str] = "toy-replicas"
    roles: ClassVar[tuple[RoleSpec, ...]] = (RoleSpec("", "GPUs serving whole requests", ("gpu",)),)

    def _sim(self, system: SystemSpec, model: ModelSpec, requests: RequestSet) -> BatchingSim:
        units = build_units(system.devices, model, self.device_models, timeline_cap=0)
        return BatchingSim(
            requests,
            units,
            max_batch=1,
            block_size=16,
            memory_utilization=1.0,
            max_batched_tokens=1_000_000,
        )

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run the replicas on ``requests``."""
        return self._sim(system, model, requests).run()

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """The engine's own constructor on one device of the entry."""
        system = SystemSpec("fit", cls.name, ctx.placements(sig), options)
        cls()._sim(system, ctx.model, ctx.requests)

    @classmethod
    def screen_bounds(
        cls,
        ctx: BoundContext,
        sig: SignatureLike,
        options: dict[str, Any],
        fitted: Any,
        cmax: int,
        tp: int | None,
    ) -> Bounds | None:
        """See :mod:`.screen`."""
        return screen.bounds(ctx, sig)
