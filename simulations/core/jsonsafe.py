"""Result documents as strict JSON: what the core's numbers become before they are printed
or stored."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def finite(v: Any) -> Any:
    """``v`` with every non-finite float replaced by ``None`` (recursively), numpy scalars
    unwrapped, tuples as lists and keys as strings, so ``json.dumps(..., allow_nan=False)``
    accepts it."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [finite(x) for x in v]
    if isinstance(v, np.generic):
        return finite(v.item())
    return v
