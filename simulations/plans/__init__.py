"""The capacity-search job: a plan document searched on the Celery workers.

* :mod:`simulations.plans.models` — Plan, PlanChunk and PlanResult rows (imported by
  :mod:`simulations.models`, so they belong to the ``simulations`` app);
* :mod:`simulations.plans.services` — every write (``plan_create``, ``plan_cancel``,
  claims, recording, reconciliation);
* :mod:`simulations.plans.selectors` — reads and visibility for the API and the pages;
* :mod:`simulations.plans.tasks` — the stage task, the confirmation chunk task and the
  reconciler.

The search itself is :mod:`simulations.core.planner` (pure Python); the CLI runs it in one
process (``manage.py plan``).
"""
