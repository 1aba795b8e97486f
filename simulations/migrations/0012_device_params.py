"""Device ``params``: the kind-specific columns (``fpga_*``, ``npu_*``, ``cpu_*``) become one
JSON field whose names, units and bounds the device's family declares, so a new device
family needs no column and no migration (docs/architecture.md, "Recipe: add a device
family"). Device kinds (and runtime profiles' kinds) are no longer a fixed list either: the
field's choices are the device-family registry's, read when validating.

The data step moves every row's values:

* ``params`` takes the columns the kind's family reads (the mapping the adapter applied
  until now: an FPGA its clock, HBM channels and issue cycles; an NPU its array and static
  shapes; a CPU its cores, SIMD width and clock; an H2M2 memory-side accelerator the NPU
  array columns). A value left in a column the kind's family does not read (the adapter
  ignored it, the API refused it) is not dropped: it is appended to the row's ``notes``.
* ``sources`` keys naming a column become ``params.<name>``, the spec's keys.
* ``seed_values`` (what seeding last wrote, see 0005) get the same new shape — the column
  keys become ``params`` and the sources keys are renamed — so a seeded row that nobody
  edited still equals its snapshot and a reseed still recognises it, while an edited one
  still differs.

Reversible: going back moves ``params`` into the columns again.
"""

from typing import Any

from django.db import migrations, models

import simulations.device_families

#: Column → parameter name, as the adapter mapped them until now (frozen here: a migration
#: must not read today's registry).
PARAM_COLUMNS = {
    "fpga_clock_mhz": "clock_mhz",
    "fpga_hbm_channels": "hbm_channels",
    "fpga_issue_cycles": "issue_cycles",
    "npu_array_rows": "array_rows",
    "npu_array_cols": "array_cols",
    "npu_static_shapes": "static_shapes",
    "cpu_cores": "cores",
    "cpu_simd_width_bits": "simd_width_bits",
    "cpu_clock_ghz": "clock_ghz",
}
#: The columns each kind's family read.
KIND_COLUMNS = {
    "fpga": ("fpga_clock_mhz", "fpga_hbm_channels", "fpga_issue_cycles"),
    "npu": ("npu_array_rows", "npu_array_cols", "npu_static_shapes"),
    "cpu": ("cpu_cores", "cpu_simd_width_bits", "cpu_clock_ghz"),
    "memory-accel": ("npu_array_rows", "npu_array_cols"),
}


def _given(value: Any) -> bool:
    return value is not None and value != [] and value != ()


def _params(kind: str, columns: dict[str, Any]) -> dict[str, Any]:
    return {
        PARAM_COLUMNS[c]: columns[c] for c in KIND_COLUMNS.get(kind, ()) if _given(columns.get(c))
    }


def _sources_forward(sources: Any) -> Any:
    if not isinstance(sources, dict):
        return sources
    return {
        (f"params.{PARAM_COLUMNS[k]}" if k in PARAM_COLUMNS else k): v for k, v in sources.items()
    }


def _sources_backward(sources: Any, kind: str) -> Any:
    if not isinstance(sources, dict):
        return sources
    column = {PARAM_COLUMNS[c]: c for c in KIND_COLUMNS.get(kind, ())}
    out = {}
    for key, value in sources.items():
        name = key.removeprefix("params.")
        out[column.get(name, key) if key.startswith("params.") else key] = value
    return out


def _snapshot_forward(snapshot: Any) -> Any:
    """A ``seed_values`` snapshot in the new shape (an empty one stays empty: not seeded)."""
    if not isinstance(snapshot, dict) or not snapshot:
        return snapshot
    out = {k: v for k, v in snapshot.items() if k not in PARAM_COLUMNS}
    out["params"] = _params(str(snapshot.get("kind", "")), snapshot)
    if "sources" in out:
        out["sources"] = _sources_forward(out["sources"])
    return out


def _snapshot_backward(snapshot: Any) -> Any:
    if not isinstance(snapshot, dict) or not snapshot:
        return snapshot
    kind = str(snapshot.get("kind", ""))
    out = {k: v for k, v in snapshot.items() if k != "params"}
    out.update(_columns(kind, snapshot.get("params") or {}))
    if "sources" in out:
        out["sources"] = _sources_backward(out["sources"], kind)
    return out


def _columns(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {c: None for c in PARAM_COLUMNS}
    values["npu_static_shapes"] = []
    for column in KIND_COLUMNS.get(kind, ()):
        if PARAM_COLUMNS[column] in params:
            values[column] = params[PARAM_COLUMNS[column]]
    return values


def columns_to_params(apps: Any, schema_editor: Any) -> None:
    """Every Device row's kind-specific columns into ``params`` (see the module docstring)."""
    device = apps.get_model("simulations", "Device")
    for row in device.objects.order_by("pk"):
        columns = {c: getattr(row, c) for c in PARAM_COLUMNS}
        read = set(KIND_COLUMNS.get(row.kind, ()))
        unread = [f"{c} = {v!r}" for c, v in columns.items() if c not in read and _given(v)]
        notes = row.notes
        if unread:
            notes = (notes + "\n\n" if notes else "") + (
                f"Kept when the kind-specific columns became params: {', '.join(unread)} "
                f"(not a parameter of {row.kind} devices)."
            )
        device.objects.filter(pk=row.pk).update(
            params=_params(row.kind, columns),
            sources=_sources_forward(row.sources),
            seed_values=_snapshot_forward(row.seed_values),
            notes=notes,
        )


def params_to_columns(apps: Any, schema_editor: Any) -> None:
    """The reverse: ``params`` back into the kind's columns."""
    device = apps.get_model("simulations", "Device")
    for row in device.objects.order_by("pk"):
        device.objects.filter(pk=row.pk).update(
            **_columns(row.kind, row.params or {}),
            sources=_sources_backward(row.sources, row.kind),
            seed_values=_snapshot_backward(row.seed_values),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("simulations", "0011_fp8_peak_and_fp8_profiles"),
    ]

    operations = [
        migrations.AddField(
            model_name="device",
            name="params",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="The kind-specific parameters the device's family declares: name → value (names, units and bounds: the family's schema, e.g. GET /api/devices/kinds/).",
            ),
        ),
        migrations.RunPython(columns_to_params, params_to_columns),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_kind_valid",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_fpga_clock_mhz_range",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_fpga_issue_cycles_range",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_cpu_clock_ghz_range",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_fpga_hbm_channels_range",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_npu_array_rows_range",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_npu_array_cols_range",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_cpu_cores_range",
        ),
        migrations.RemoveConstraint(
            model_name="device",
            name="simulations_device_cpu_simd_width_bits_range",
        ),
        migrations.RemoveConstraint(
            model_name="runtimeprofile",
            name="simulations_runtimeprofile_kind_valid",
        ),
        migrations.RemoveField(
            model_name="device",
            name="cpu_clock_ghz",
        ),
        migrations.RemoveField(
            model_name="device",
            name="cpu_cores",
        ),
        migrations.RemoveField(
            model_name="device",
            name="cpu_simd_width_bits",
        ),
        migrations.RemoveField(
            model_name="device",
            name="fpga_clock_mhz",
        ),
        migrations.RemoveField(
            model_name="device",
            name="fpga_hbm_channels",
        ),
        migrations.RemoveField(
            model_name="device",
            name="fpga_issue_cycles",
        ),
        migrations.RemoveField(
            model_name="device",
            name="npu_array_cols",
        ),
        migrations.RemoveField(
            model_name="device",
            name="npu_array_rows",
        ),
        migrations.RemoveField(
            model_name="device",
            name="npu_static_shapes",
        ),
        migrations.AlterField(
            model_name="device",
            name="kind",
            field=models.CharField(
                choices=simulations.device_families.device_kind_choices,
                help_text="Device kind (its family).",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="runtimeprofile",
            name="device_kind",
            field=models.CharField(
                choices=simulations.device_families.device_kind_choices,
                help_text="Kind of device this stack runs on (a device family).",
                max_length=16,
            ),
        ),
    ]
