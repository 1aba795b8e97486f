"""Scheduling policies, one package per paper, registered by name (see :mod:`.base`).

Importing this package imports every policy package so the registries are complete. The
order below is the order the papers are listed in (``reproduce all``, the validation page):
adding a paper adds its package here.
"""

# The papers are listed in this order (isort would sort it).
# isort: off
from . import glitches  # noqa: F401  (registers "glitches" and its paper)
from . import neo  # noqa: F401  (registers "neo", "gpu-only", "fastdecode+" and the paper "neo")
from . import heterollm  # noqa: F401  (registers "heterollm" and its paper)
from . import h2m2  # noqa: F401  (registers "h2m2" and its paper)
from . import homogeneous  # noqa: F401  (registers "homogeneous", the baseline of every paper)
from . import disaggregated  # noqa: F401  (registers "disaggregated", GLITCHES §III generalised)
from . import moe_offload  # noqa: F401  (registers "moe-offload"; not a paper)

# isort: on
from .base import (
    OptionSpec,
    Paper,
    Policy,
    PolicyFigure,
    RoleSpec,
    get_paper,
    get_policy,
    papers,
    policy_names,
    register,
    register_paper,
    screened_policies,
)

__all__ = [
    "OptionSpec",
    "Paper",
    "Policy",
    "PolicyFigure",
    "RoleSpec",
    "get_paper",
    "get_policy",
    "papers",
    "policy_names",
    "register",
    "register_paper",
    "screened_policies",
]
