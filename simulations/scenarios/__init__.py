"""The inputs of a simulation: traces, workloads and scenarios.

* :mod:`simulations.scenarios.models` — Trace, TraceReference, Workload and Scenario rows
  (imported by :mod:`simulations.models`, so they belong to the ``simulations`` app);
* :mod:`simulations.scenarios.services` — every write (trace import and deletion, workload
  and scenario create/update, validation of a scenario document against today's catalog)
  and the trace-parse job's claim and reconciliation;
* :mod:`simulations.scenarios.selectors` — reads and visibility (own, shared, public);
* :mod:`simulations.scenarios.tasks` — the trace-parse task and its reconciler.
"""
