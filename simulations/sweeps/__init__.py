"""Parameter sweeps: a scenario template plus axes, expanded into configurations that are
simulated in chunks on the Celery workers.

* :mod:`simulations.sweeps.expand` — axes, paths and the index → configuration mapping
  (pure Python, no database);
* :mod:`simulations.sweeps.models` — Sweep, SweepChunk and SweepResult rows (imported by
  :mod:`simulations.models`, so they belong to the ``simulations`` app);
* :mod:`simulations.sweeps.services` — every write (create, claim, record, finalise, cancel,
  reconcile);
* :mod:`simulations.sweeps.selectors` — reads and visibility;
* :mod:`simulations.sweeps.tasks` — the chunk task, the finaliser and the reconciler.
"""
