"""Test doubles for the reliability tests: policies that misbehave on purpose.

Imported by every Celery worker the test suite starts (``CELERY_IMPORTS`` in
``hetplanner/settings/test.py``) and by the tests that use them; never by the application.
Their names start with ``test-double-`` so a scenario that uses one is obviously a test.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import numpy as np

from simulations.core.policies import Policy, register
from simulations.core.policies.base import OptionSpec, ProgressFn
from simulations.core.spec import ModelSpec, SloSpec, SystemSpec, WorkloadSpec


@register
class SelfKillingPolicy(Policy):
    """Test double: kills its own worker process (SIGKILL) every time it runs."""

    name = "test-double-self-kill"
    summary = "Test double: SIGKILLs the process that runs it."

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: the process was killed")


@register
class SpinningPolicy(Policy):
    """Test double: reports progress and sleeps until interrupted (e.g. by a soft time
    limit), for at most ``spin_s`` seconds, then raises (it never returns a result)."""

    name = "test-double-spin"
    summary = "Test double: spins until the task's soft time limit interrupts it."
    options = (
        OptionSpec("spin_s", float, 60.0, "Longest spin, seconds.", minimum=0.1, maximum=600.0),
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
        deadline = time.monotonic() + float(system.options.get("spin_s", 60.0))
        while time.monotonic() < deadline:
            if progress is not None:
                progress(0.5)
            time.sleep(0.05)
        raise RuntimeError("test-double-spin was not interrupted")
