"""A toy policy package (the "add a paper" recipe without the paper): ``toy-replicas``,
whose GPUs each serve whole requests one at a time, with its own planner screen.

Nothing is registered on import: the tests register :class:`.policy.ToyReplicasPolicy` in a
scratch registry, so the real registry never sees it.
"""

from .policy import ToyReplicasPolicy

__all__ = ["ToyReplicasPolicy"]
