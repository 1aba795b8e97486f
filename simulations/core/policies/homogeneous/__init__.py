"""Homogeneous serving, the baseline every paper compares against: every device serves
whole requests (batch-1 FCFS or vLLM-like continuous batching). Not a paper of its own.

Modules: :mod:`.policy` (the ``homogeneous`` policy, with its screen for the planner).
"""

from .policy import HomogeneousPolicy

__all__ = ["HomogeneousPolicy"]
