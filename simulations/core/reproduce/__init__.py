"""Reproductions of the papers' published figures (see :mod:`.base`): the framework here,
each paper's targets and runners in its policy package."""

from .base import PAPERS, BoundCheck, Check, check, prefetcher, reproduce, reproduce_many, runner
from .basis import BASES, GROUPS, basis_of, fitted_by_scripts, grouped, headline, summary
from .targets import PaperTargets, Target, load_targets

__all__ = [
    "BASES",
    "GROUPS",
    "PAPERS",
    "BoundCheck",
    "Check",
    "PaperTargets",
    "Target",
    "basis_of",
    "check",
    "fitted_by_scripts",
    "grouped",
    "headline",
    "load_targets",
    "prefetcher",
    "reproduce",
    "reproduce_many",
    "runner",
    "summary",
]
