"""Simulation runs: one scenario simulated on the Celery workers.

* :mod:`simulations.runs.models` — SimulationRun and RunEvent rows (imported by
  :mod:`simulations.models`, so they belong to the ``simulations`` app);
* :mod:`simulations.runs.services` — every write (submit within the quota, claim,
  progress, outcome, cancel, reconcile), each a conditional UPDATE;
* :mod:`simulations.runs.selectors` — reads and visibility (a user's own runs);
* :mod:`simulations.runs.tasks` — the run task and its reconciler.

The simulation itself is :mod:`simulations.core.simulate` (pure Python).
"""
