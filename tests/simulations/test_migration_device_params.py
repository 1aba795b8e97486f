"""Migration 0012 moves the kind-specific Device columns into ``params`` without losing a
value, on rows that exist when it runs (PostgreSQL: the project's database), and carries
the seeding snapshots (``seed_values``) over to the new shape so a seeded row nobody edited
still counts as unedited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from simulations.adapters import device_values, memory_tier_values
from simulations.catalog import services
from simulations.core.catalog import builtin_catalog, iter_records

BEFORE = [("simulations", "0011_fp8_peak_and_fp8_profiles")]
AFTER = [("simulations", "0012_device_params")]

pytestmark = pytest.mark.django_db(transaction=True)


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.fixture
def old_apps() -> Iterator[Any]:
    """The apps at the state before the migration; the database is migrated to the latest
    state again afterwards."""
    apps = _migrate(BEFORE)
    yield apps
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def _snapshot(row: Any) -> dict[str, Any]:
    """What the seed's snapshot looked like before: every column (0005's shape)."""
    from importlib import import_module

    return dict(import_module("simulations.migrations.0005_catalog_seed_values")._snapshot(row))


def _old_row(apps: Any, slug: str, **columns: Any) -> Any:
    """The built-in device ``slug`` stored as the seed wrote it before the migration: its
    non-parameter values, then ``columns`` (its kind-specific columns and sources)."""
    device = apps.get_model("simulations", "Device")
    tier = apps.get_model("simulations", "MemoryTier")
    spec = builtin_catalog().devices[slug]
    values = device_values(spec)
    values.pop("params")
    values.update(columns)
    notes = next(r for r in iter_records("devices") if r["slug"] == slug).get("notes", "")
    row = device.objects.create(**values, notes=notes)
    for t in memory_tier_values(spec):
        tier.objects.create(device=row, **t)
    return row


def test_the_columns_become_params_and_the_seed_still_owns_unedited_rows(old_apps: Any) -> None:
    device = old_apps.get_model("simulations", "Device")
    u280 = _old_row(
        old_apps,
        "u280",
        fpga_clock_mhz=225.0,
        fpga_hbm_channels=32,
        sources={
            **{
                k: v
                for k, v in builtin_catalog().devices["u280"].sources.items()
                if not k.startswith("params.")
            },
            "fpga_clock_mhz": "GLITCHES §V.A",
            "fpga_hbm_channels": "AMD UG1393",
        },
    )
    vhk = _old_row(old_apps, "vhk158", fpga_clock_mhz=225.0, fpga_hbm_channels=32)
    for row in (u280, vhk):
        device.objects.filter(pk=row.pk).update(seed_values=_snapshot(row))
    # the u280 row as the seed wrote it (its sources keyed by the seed's own, the snapshot's);
    # the vhk158 row edited by staff since: its clock differs from its snapshot
    device.objects.filter(pk=u280.pk).update(
        sources=device.objects.get(pk=u280.pk).seed_values["sources"]
    )
    device.objects.filter(pk=vhk.pk).update(fpga_clock_mhz=300.0)
    npu = device.objects.create(
        slug="staff-npu",
        name="Staff NPU",
        kind="npu",
        vendor="test",
        tdp_w=10.0,
        idle_w=1.0,
        npu_array_rows=32,
        npu_array_cols=64,
        npu_static_shapes=[128, 256],
        # a value in a column the NPU family never read: kept in the notes, not lost
        cpu_cores=8,
        sources={"npu_array_rows": "datasheet", "tdp_w": "datasheet"},
    )
    gpu = device.objects.create(
        slug="staff-gpu", name="Staff GPU", kind="gpu", vendor="test", tdp_w=300.0, idle_w=30.0
    )

    new_apps = _migrate(AFTER)
    device = new_apps.get_model("simulations", "Device")
    u280 = device.objects.get(slug="u280")
    assert u280.params == {"clock_mhz": 225.0, "hbm_channels": 32}
    assert u280.sources["params.clock_mhz"] == "GLITCHES §V.A"
    assert "fpga_clock_mhz" not in u280.sources
    # the snapshot has the new shape: params, sources keyed params.<name>, no column keys
    assert u280.seed_values["params"] == {"clock_mhz": 225.0, "hbm_channels": 32}
    assert "fpga_clock_mhz" not in u280.seed_values
    assert u280.seed_values["sources"] == u280.sources
    assert device.objects.get(slug="vhk158").params == {"clock_mhz": 300.0, "hbm_channels": 32}
    npu = device.objects.get(pk=npu.pk)
    assert npu.params == {"array_rows": 32, "array_cols": 64, "static_shapes": [128, 256]}
    assert npu.sources == {"params.array_rows": "datasheet", "tdp_w": "datasheet"}
    assert "cpu_cores = 8" in npu.notes
    assert device.objects.get(pk=gpu.pk).params == {}
    assert device.objects.get(pk=gpu.pk).seed_values == {}  # staff rows stay unowned

    # a reseed (today's code, so on today's schema: the later migrations add columns the
    # current models read) recognises the unedited row as its own and keeps the edited one
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    report = services.catalog_seed()
    assert "device u280" not in report.kept
    assert report.kept == ["device vhk158"]
    from simulations.catalog.models import Device

    assert Device.objects.get(slug="vhk158").params["clock_mhz"] == 300.0
    assert json.loads(json.dumps(Device.objects.get(slug="u280").params)) == {
        "clock_mhz": 225,
        "hbm_channels": 32,
    }


def test_the_migration_reverses_to_the_columns(old_apps: Any) -> None:
    device = old_apps.get_model("simulations", "Device")
    row = device.objects.create(
        slug="staff-cpu",
        name="Staff CPU",
        kind="cpu",
        vendor="test",
        tdp_w=200.0,
        idle_w=20.0,
        cpu_cores=32,
        cpu_simd_width_bits=512,
        cpu_clock_ghz=2.1,
        sources={"cpu_cores": "datasheet"},
    )
    _migrate(AFTER)
    back = _migrate(BEFORE).get_model("simulations", "Device").objects.get(pk=row.pk)
    assert (back.cpu_cores, back.cpu_simd_width_bits, back.cpu_clock_ghz) == (32, 512, 2.1)
    assert back.sources == {"cpu_cores": "datasheet"}
