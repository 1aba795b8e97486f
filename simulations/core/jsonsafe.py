"""Documents as strict JSON: what the core's numbers become before they are printed or
stored. The one sanitiser of the project (results, sweep and plan rows, validation reports,
CLI output)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def finite(v: Any) -> Any:
    """``v`` as plain JSON that ``json.dumps(..., allow_nan=False)`` and PostgreSQL's jsonb
    accept: every non-finite float replaced by ``None`` (recursively), numpy scalars and
    arrays unwrapped, tuples as lists, keys as strings, anything else as its ``str``."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, Mapping):
        return {str(k): finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [finite(x) for x in v]
    if isinstance(v, np.generic | np.ndarray):
        return finite(v.tolist())
    return str(v)
