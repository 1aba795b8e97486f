"""A device's ``params`` over the API: stored and shown as the family declares them, bad
ones refused with 400 naming ``params.<name>`` and nothing stored; ``/api/devices/kinds/``
describes every family's parameters (labels, units, bounds, help) from its schema."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from simulations.catalog.models import Device

pytestmark = pytest.mark.django_db


def _fpga(carol: APIClient, **changes: Any) -> dict[str, Any]:
    record = carol.get("/api/devices/u280/").json()
    for key in ("id", "created_at", "updated_at"):
        record.pop(key)
    record.update(slug="u280-copy", **changes)
    return record


def test_an_fpga_round_trips_its_params_and_their_sources(carol: APIClient, catalog: Any) -> None:
    u280 = carol.get("/api/devices/u280/").json()
    assert u280["params"] == {"clock_mhz": 225, "hbm_channels": 32}
    assert "params.clock_mhz" in u280["sources"]
    record = _fpga(carol, params={"clock_mhz": 250.0, "hbm_channels": 16})
    response = carol.post("/api/devices/", record, format="json")
    assert response.status_code == 201, response.json()
    assert Device.objects.get(slug="u280-copy").params == {"clock_mhz": 250.0, "hbm_channels": 16}
    assert carol.get("/api/devices/u280-copy/").json()["params"]["clock_mhz"] == 250.0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"clock_mhz": 225, "cores": 8}, "params.cores"),
        ({"clock_mhz": "fast"}, "params.clock_mhz"),
        ({"clock_mhz": -1}, "params.clock_mhz"),
        ({"clock_mhz": 1e300}, "params.clock_mhz"),
        ({"clock_mhz": 225, "hbm_channels": 1.5}, "params.hbm_channels"),
        ({"hbm_channels": 32}, "params.clock_mhz"),
        ([1, 2], "params"),
    ],
)
def test_bad_params_name_the_parameter_and_store_nothing(
    carol: APIClient, catalog: Any, params: Any, field: str
) -> None:
    before = Device.objects.count()
    response = carol.post("/api/devices/", _fpga(carol, params=params), format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json(), response.json()
    assert Device.objects.count() == before


def test_nan_and_infinity_in_params_are_refused(carol: APIClient, catalog: Any) -> None:
    for bad in ("NaN", "Infinity"):
        body = (
            '{"slug": "nan-fpga", "name": "x", "kind": "fpga", "vendor": "x", "tdp_w": 10, '
            '"idle_w": 1, "memory": [{"kind": "hbm", "capacity_gb": 8, "bw_gbps": 100}], '
            f'"params": {{"clock_mhz": {bad}}}}}'
        )
        response = carol.post("/api/devices/", body, content_type="application/json")
        assert response.status_code == 400, response.content
    assert not Device.objects.filter(slug="nan-fpga").exists()


def test_the_kinds_endpoint_describes_each_familys_params(alice: APIClient) -> None:
    kinds = {k["kind"]: k for k in alice.get("/api/devices/kinds/").json()}
    assert {"gpu", "fpga", "npu", "cpu", "soc", "memory-accel"} <= set(kinds)
    clock = next(p for p in kinds["fpga"]["params"] if p["name"] == "clock_mhz")
    assert clock["label"] == "Clock (MHz)" and clock["unit"] == "MHz" and clock["required"]
    assert kinds["npu"]["label"] == "NPU" and kinds["gpu"]["params"] == []
