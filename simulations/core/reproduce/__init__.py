"""Reproductions of the papers' published figures (see :mod:`.base`): the framework here,
each paper's targets and runners in its policy package."""

from .base import PAPERS, BoundCheck, Check, check, reproduce, runner
from .targets import PaperTargets, Target, load_targets

__all__ = [
    "PAPERS",
    "BoundCheck",
    "Check",
    "PaperTargets",
    "Target",
    "check",
    "load_targets",
    "reproduce",
    "runner",
]
