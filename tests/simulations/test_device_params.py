"""A device's kind-specific facts are one ``params`` field checked against what its device
family declares, by the model (admin, any ``full_clean``) and by the service that stores
devices: an unknown name, a wrong type, a value out of bounds, NaN or Infinity is refused
naming ``params.<name>``, and nothing is stored."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from simulations.adapters import device_spec
from simulations.catalog import services
from simulations.catalog.models import Device
from simulations.core.catalog import builtin_catalog
from simulations.device_families import param_schema
from tests.factories import DeviceFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"clock_mhz": 225.0, "cores": 8}, "params.cores"),  # a CPU's, not an FPGA's
        ({"clock_mhz": "fast"}, "params.clock_mhz"),
        ({"clock_mhz": 0.0}, "params.clock_mhz"),  # exclusive minimum
        ({"clock_mhz": 225.0, "hbm_channels": 2.5}, "params.hbm_channels"),
        ({"clock_mhz": 225.0, "hbm_channels": 10**7}, "params.hbm_channels"),
        ({"clock_mhz": math.nan}, "params.clock_mhz"),
        ({"clock_mhz": math.inf}, "params.clock_mhz"),
        ({"hbm_channels": 32}, "params.clock_mhz"),  # required
        ([225.0], "params"),
    ],
)
def test_the_model_refuses_params_its_family_does_not_declare(params: Any, field: str) -> None:
    device = DeviceFactory.build(kind="fpga", params=params)
    with pytest.raises(ValidationError) as exc:
        device.full_clean(exclude=["slug"])
    assert field in exc.value.message_dict, exc.value.message_dict


def test_a_soc_takes_no_params_and_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        DeviceFactory.build(kind="soc", params={"cores": 8}).full_clean(exclude=["slug"])
    assert "params.cores" in exc.value.message_dict
    with pytest.raises(ValidationError) as exc:
        DeviceFactory.build(kind="toaster").full_clean(exclude=["slug"])
    assert "kind" in exc.value.message_dict


def test_the_service_refuses_bad_params_and_stores_nothing() -> None:
    spec = builtin_catalog().devices["u280"]
    bad = replace(spec, slug="bad-fpga", params={"clock_mhz": -5.0})
    with pytest.raises(ValidationError) as exc:
        services.device_save(bad)
    assert "params.clock_mhz" in exc.value.message_dict
    assert not Device.objects.filter(slug="bad-fpga").exists()


def test_every_built_in_device_survives_row_and_back(builtin_catalog_rows: Any) -> None:
    for slug, spec in builtin_catalog().devices.items():
        row = Device.objects.prefetch_related("memory_tiers").get(slug=slug)
        assert device_spec(row) == spec, slug
        assert dict(device_spec(row).params) == dict(spec.params), slug


def test_the_schema_gives_labels_units_and_help_from_the_family() -> None:
    fpga = {p["name"]: p for p in param_schema("fpga")}
    assert fpga["clock_mhz"]["label"] == "Clock (MHz)"
    assert fpga["clock_mhz"]["required"] is True
    assert "design clock" in fpga["clock_mhz"]["help"]
    assert {p["name"] for p in param_schema("npu")} == {"array_rows", "array_cols", "static_shapes"}
    assert param_schema("gpu") == [] and param_schema("soc") == []
