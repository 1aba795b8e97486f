"""The simulations app's models, by capability — importing them here registers them with
the app (Django imports an app's ``models`` module):

* :mod:`simulations.catalog.models` — devices, memory tiers, runtime profiles, LLM models;
* :mod:`simulations.scenarios.models` — traces, workloads, scenarios;
* :mod:`simulations.runs.models` — simulation runs and their events;
* :mod:`simulations.sweeps.models`, :mod:`simulations.plans.models` and
  :mod:`simulations.measurements.models` — sweeps, capacity plans, measurement sets and
  calibrations.

Code imports models from their capability's module, not from here. The two validators are
re-exported because the migrations name them as ``simulations.models.validate_*``.
"""

from simulations.catalog.models import Device, LLMModel, MemoryTier, RuntimeProfile  # noqa: F401
from simulations.fields import validate_finite, validate_strictly_positive  # noqa: F401
from simulations.measurements.models import Calibration, MeasurementSet  # noqa: F401
from simulations.plans.models import Plan, PlanChunk, PlanResult  # noqa: F401
from simulations.runs.models import RunEvent, SimulationRun  # noqa: F401
from simulations.scenarios.models import Scenario, Trace, TraceReference, Workload  # noqa: F401
from simulations.sweeps.models import Sweep, SweepChunk, SweepResult  # noqa: F401
