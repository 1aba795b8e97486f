"""Scheduling policies, one module per paper, registered by name (see :mod:`.base`).

Importing this package imports every policy module so the registry is complete.
"""

from . import (
    glitches,  # noqa: F401  (registers "glitches")
    h2m2,  # noqa: F401  (registers "h2m2")
    heterollm,  # noqa: F401  (registers "heterollm")
    homogeneous,  # noqa: F401  (registers "homogeneous")
    neo,  # noqa: F401  (registers "neo", "gpu-only", "fastdecode+")
)
from .base import OptionSpec, Policy, RoleSpec, get_policy, policy_names, register

__all__ = ["OptionSpec", "Policy", "RoleSpec", "get_policy", "policy_names", "register"]
