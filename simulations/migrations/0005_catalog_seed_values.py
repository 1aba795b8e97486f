"""Catalog rows remember what ``seed_catalog`` last wrote (``seed_values``), so a reseed no
longer overwrites a staff edit (issue 16, defect 7).

The data step snapshots the rows that already exist for the built-in slugs (the records of
``simulations/core/data``), taking their *current* values as the seed's. That is the honest
default: until now ``seed_catalog`` rewrote these rows on every start, so whatever they hold
is, as far as anyone can tell, what the last seed wrote — no record of a staff edit exists
to tell otherwise, and an edit made since the last start would have been overwritten at the
next one anyway. From now on an edit is detected against this snapshot and kept. Rows whose
slug is not a built-in one (staff added them) get no snapshot: the seed never owns them.

The snapshot has every column the seed could write (a key the seed does not write, such as
``hf_config``, is simply never compared), plus ``parent`` as a slug and ``memory_tiers``
as the tier rows' values — the shape of ``simulations.services.device_seed_values``.
"""

import json
from typing import Any

from django.db import migrations, models

#: Columns that are bookkeeping, not catalog values.
SKIPPED = frozenset({"id", "created_at", "updated_at", "seed_values"})


def _snapshot(row: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in row._meta.concrete_fields:
        if f.name in SKIPPED:
            continue
        if f.is_relation:
            target = getattr(row, f.name)
            values[f.name] = target.slug if target is not None else None
        else:
            values[f.name] = getattr(row, f.attname)
    if hasattr(row, "memory_tiers"):
        values["memory_tiers"] = [
            {"order": t.order, "kind": t.kind, "capacity_gb": t.capacity_gb, "bw_gbps": t.bw_gbps}
            for t in row.memory_tiers.order_by("order")
        ]
    return json.loads(json.dumps(values))


def snapshot_builtin_rows(apps: Any, schema_editor: Any) -> None:
    """Give each existing built-in catalog row a snapshot of its current values."""
    from simulations.core.catalog import iter_records

    for model_name, kind in (
        ("Device", "devices"),
        ("RuntimeProfile", "runtimes"),
        ("LLMModel", "models"),
    ):
        model = apps.get_model("simulations", model_name)
        slugs = {str(r.get("slug")) for r in iter_records(kind)}
        for row in model.objects.filter(slug__in=slugs):
            model.objects.filter(pk=row.pk).update(seed_values=_snapshot(row))


class Migration(migrations.Migration):
    dependencies = [
        ("simulations", "0004_runtimeprofile_calibration"),
    ]

    operations = [
        migrations.AddField(
            model_name="device",
            name="seed_values",
            field=models.JSONField(
                blank=True,
                default=dict,
                editable=False,
                help_text="What ``seed_catalog`` last wrote to this row (column → value; empty: "
                "not a built-in row). A reseed updates the row only while its values still "
                "equal these, so a staff edit is never overwritten.",
            ),
        ),
        migrations.AddField(
            model_name="llmmodel",
            name="seed_values",
            field=models.JSONField(
                blank=True,
                default=dict,
                editable=False,
                help_text="What ``seed_catalog`` last wrote to this row (column → value; empty: "
                "not a built-in row). A reseed updates the row only while its values still "
                "equal these, so a staff edit is never overwritten.",
            ),
        ),
        migrations.AddField(
            model_name="runtimeprofile",
            name="seed_values",
            field=models.JSONField(
                blank=True,
                default=dict,
                editable=False,
                help_text="What ``seed_catalog`` last wrote to this row (column → value; empty: "
                "not a built-in row). A reseed updates the row only while its values still "
                "equal these, so a staff edit is never overwritten.",
            ),
        ),
        migrations.RunPython(snapshot_builtin_rows, migrations.RunPython.noop),
    ]
