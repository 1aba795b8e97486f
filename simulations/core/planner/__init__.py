"""Capacity search: the cheapest system that meets latency targets, and its trade-offs.

A plan document (:mod:`.document`) names a model, a workload, targets (p90/p99 TTFT and TPOT,
minimum throughput), a space of systems (device types × counts × policy roles and
options) and constraints (capex, power, devices per node, nodes). The search runs in two
stages:

1. :mod:`.screen` — an analytic screen evaluates every configuration at once (numpy, per
   group of configurations sharing devices and options) with bounds that are optimistic
   for feasibility, so it never rules out what the engine would accept;
2. :mod:`.search` — the request-level engine confirms the survivors that can still change
   an output, cheapest first, in rounds that can run in parallel.

:mod:`.report` assembles the result (recommendation and why, runner-up, Pareto fronts over
capex × throughput and capex × energy per token, the cheapest feasible system per device
type, and :mod:`.sensitivity` to the arrival rate).
"""

from .document import PlanSpec, parse_plan, trace_names
from .evaluate import Evaluation, evaluate_config
from .search import Candidate, Search, plan_search
from .space import Config, config_key, describe, enumerate_space, system_document, system_spec

__all__ = [
    "Candidate",
    "Config",
    "Evaluation",
    "PlanSpec",
    "Search",
    "config_key",
    "describe",
    "enumerate_space",
    "evaluate_config",
    "parse_plan",
    "plan_search",
    "system_document",
    "system_spec",
    "trace_names",
]
