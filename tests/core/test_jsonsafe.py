"""The project's one JSON sanitiser (results, sweep and plan rows, reports, CLI output)."""

from __future__ import annotations

import json
import math
from types import MappingProxyType

import numpy as np

from simulations.core.jsonsafe import finite


def test_it_makes_non_finite_numbers_null_at_any_depth() -> None:
    doc = {"a": [1.0, math.nan, {"b": (math.inf, -math.inf)}], "c": np.float64("nan")}
    assert finite(doc) == {"a": [1.0, None, {"b": [None, None]}], "c": None}


def test_it_unwraps_numpy_scalars_and_arrays_and_stringifies_keys() -> None:
    doc = MappingProxyType({1: np.int64(3), "x": np.array([[1.5, np.inf]]), "f": np.float32(2)})
    out = finite(doc)
    assert out == {"1": 3, "x": [[1.5, None]], "f": 2.0}
    assert type(out["1"]) is int
    json.dumps(out, allow_nan=False)  # strict JSON


def test_it_keeps_plain_values_and_writes_others_as_text() -> None:
    assert finite([None, True, 0, "s"]) == [None, True, 0, "s"]
    assert finite({"p": __import__("pathlib").PurePosixPath("/a")}) == {"p": "/a"}
