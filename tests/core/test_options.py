"""Declared settings (``simulations.core.options``): what policies' options and device
families' parameters may hold, and the kind-specific ``params`` of a device spec."""

from __future__ import annotations

import math
import pickle

import pytest

from simulations.core.errors import SpecError
from simulations.core.options import OptionSpec, resolve
from simulations.core.spec import Params

CLOCK = OptionSpec(
    "clock_mhz",
    float,
    None,
    "design clock",
    minimum=0.0,
    exclusive_minimum=True,
    maximum=1e6,
    required=True,
    unit="MHz",
)
CHANNELS = OptionSpec("hbm_channels", int, 1, "channels", minimum=1, maximum=1024)
SHAPES = OptionSpec("static_shapes", tuple, (), "graph lengths", minimum=1, items=int)


def test_it_fills_defaults_and_converts_types() -> None:
    got = resolve(
        (CLOCK, CHANNELS, SHAPES),
        {"clock_mhz": 225, "static_shapes": [32, 64]},
        "u280.params",
        "fpga devices",
    )
    assert got == {"clock_mhz": 225.0, "hbm_channels": 1, "static_shapes": (32, 64)}
    assert isinstance(got["clock_mhz"], float)


@pytest.mark.parametrize(
    ("given", "field", "message"),
    [
        ({}, "d.params.clock_mhz", "required"),
        ({"clock_mhz": 0}, "d.params.clock_mhz", "greater than 0"),
        ({"clock_mhz": math.nan}, "d.params.clock_mhz", "finite"),
        ({"clock_mhz": True}, "d.params.clock_mhz", "number"),
        ({"clock_mhz": 1, "hbm_channels": 2.5}, "d.params.hbm_channels", "integer"),
        ({"clock_mhz": 1, "static_shapes": [32, 0]}, "d.params.static_shapes[1]", "at least 1"),
        ({"clock_mhz": 1, "static_shapes": "32"}, "d.params.static_shapes", "list"),
        ({"clock_mhz": 1, "cores": 4}, "d.params.cores", "unknown parameter"),
    ],
)
def test_it_rejects_bad_values_naming_the_field(given: dict, field: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        resolve((CLOCK, CHANNELS, SHAPES), given, "d.params", "fpga devices")
    assert exc.value.field == field
    assert message in exc.value.message


def test_the_schema_says_units_bounds_and_what_is_required() -> None:
    assert CLOCK.as_schema() == {
        "name": "clock_mhz",
        "type": "float",
        "default": None,
        "help": "design clock",
        "minimum": 0.0,
        "exclusive_minimum": True,
        "maximum": 1e6,
        "required": True,
        "unit": "MHz",
    }
    assert SHAPES.as_schema()["type"] == "list" and SHAPES.as_schema()["items"] == "int"
    # A policy option declares none of the new keys, so its schema is what it was.
    assert set(CHANNELS.as_schema()) == {"name", "type", "default", "help", "minimum", "maximum"}


def test_params_are_an_immutable_hashable_mapping() -> None:
    a = Params({"lanes": 8, "shapes": [32, 64]})
    b = Params({"shapes": (32, 64), "lanes": 8})
    assert a == b and hash(a) == hash(b) and a == {"lanes": 8, "shapes": (32, 64)}
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(TypeError):
        a["lanes"] = 9  # type: ignore[index]
    for bad, field in (({"x": math.inf}, "p.x"), ({"x": [1, "2"]}, "p.x[1]"), ({"x": True}, "p.x")):
        with pytest.raises(SpecError) as exc:
            Params(bad, path="p")
        assert exc.value.field == field
