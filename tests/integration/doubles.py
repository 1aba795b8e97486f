"""TEST DOUBLES for the worker-lifecycle tests — not models of anything.

``test-double-slow`` exists only so a test can kill a worker in the middle of a run: it
spends wall-clock time in small steps, reporting progress after each, and returns an entry
with no metrics at all (``{"name": ..., "test_double": true, "steps": n}``), so nothing it
produces can be mistaken for a simulation result. It is registered only in processes that
import this module: the integration tests and the worker they start
(``HETPLANNER_WORKER_IMPORTS=tests.integration.doubles``); the product never imports it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, ClassVar

import numpy as np

from simulations.core.policies import OptionSpec, Policy, register
from simulations.core.policies.base import ProgressFn
from simulations.core.spec import ModelSpec, SloSpec, SystemSpec, WorkloadSpec

SLOW_DOUBLE = "test-double-slow"


class SlowTestDouble(Policy):
    """TEST DOUBLE: sleeps ``steps`` × ``step_s`` seconds, reporting progress; no metrics."""

    name = SLOW_DOUBLE
    summary = "Test double for worker-loss tests (computes nothing)."
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec("steps", int, 50, "progress steps", minimum=1, maximum=10_000),
        OptionSpec("step_s", float, 0.1, "seconds per step", minimum=0.0, maximum=5.0),
    )

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        opts = self.resolve_options(system.options)
        for i in range(opts["steps"]):
            time.sleep(opts["step_s"])
            if progress is not None:
                progress((i + 1) / opts["steps"])
        return {"name": system.name, "test_double": True, "steps": opts["steps"]}


with contextlib.suppress(ValueError):  # imported twice under different module names
    register(SlowTestDouble)
