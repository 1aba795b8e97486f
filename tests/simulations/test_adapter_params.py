"""The adapter keeps the Django side working on today's Device columns: the kind-specific
columns (``fpga_*``, ``npu_*``, ``cpu_*``) become the spec's ``params`` and back, and an API
record's errors still name the column."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.adapters import PARAM_COLUMNS, device_spec_from_record, param_column_values
from simulations.core.catalog import builtin_catalog
from simulations.core.errors import SpecError


def _fpga_record(**columns: Any) -> dict[str, Any]:
    return {
        "slug": "t-fpga",
        "name": "Test FPGA",
        "kind": "fpga",
        "vendor": "test",
        "memory": [{"kind": "hbm", "capacity_gb": 8.0, "bw_gbps": 460.0}],
        "tdp_w": 75.0,
        "idle_w": 10.0,
        "sources": {"fpga_clock_mhz": "fixture"},
        **columns,
    }


def test_an_api_record_with_column_names_becomes_a_spec_with_params() -> None:
    spec = device_spec_from_record(_fpga_record(fpga_clock_mhz=225.0, fpga_hbm_channels=32))
    assert dict(spec.params) == {"clock_mhz": 225.0, "hbm_channels": 32}
    assert spec.sources == {"params.clock_mhz": "fixture"}
    columns = param_column_values(spec)
    assert columns["fpga_clock_mhz"] == 225.0 and columns["cpu_cores"] is None
    assert columns["npu_static_shapes"] == []


def test_a_missing_or_foreign_column_is_named_by_its_column() -> None:
    with pytest.raises(SpecError) as exc:
        device_spec_from_record(_fpga_record(fpga_hbm_channels=32))
    assert exc.value.field == "t-fpga.fpga_clock_mhz"
    with pytest.raises(SpecError) as exc:
        device_spec_from_record(_fpga_record(fpga_clock_mhz=225.0, cpu_cores=8))
    assert exc.value.field == "t-fpga.cpu_cores"
    # an empty list is no value (the columns' default)
    spec = device_spec_from_record(_fpga_record(fpga_clock_mhz=225.0, npu_static_shapes=[]))
    assert "static_shapes" not in spec.params


def test_every_built_in_device_fits_the_columns() -> None:
    for device in builtin_catalog().devices.values():
        columns = param_column_values(device)
        back = {PARAM_COLUMNS[c]: v for c, v in columns.items() if v not in (None, [])}
        assert back == {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in device.params.items()
        }
