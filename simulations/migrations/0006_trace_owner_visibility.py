"""Traces get an owner (``uploaded_by`` renamed), an explicit visibility, and a record of
the scenarios, sweeps and plans that use them (``TraceReference``, PROTECT) — issue 16,
defect 9.

Existing traces: until now every signed-in user could see every trace and use it in a
scenario, and other users' scenarios may already rely on one. The honest default keeps
them exactly as usable as they were: an uploaded trace (it has an uploader) becomes
``shared`` — visible and usable by every signed-in user, changeable only by its owner —
and a trace without an uploader (the example traces the dashboard loads, or one whose
uploader was deleted) becomes ``public``. Making them ``private`` would silently break the
scenarios of everyone but the uploader, the very defect this fixes; only new uploads are
private by default. Owners can narrow a trace afterwards (admin).

The references of the scenarios, sweeps and plans already stored are recorded from their
documents, so a trace in use is protected from the moment this migration has run. A
document naming a trace that no longer exists records nothing (there is nothing to
protect).
"""

from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def existing_traces_stay_usable(apps: Any, schema_editor: Any) -> None:
    """Uploaded traces → shared, traces without an uploader → public (see the docstring)."""
    trace_model = apps.get_model("simulations", "Trace")
    trace_model.objects.filter(owner__isnull=False).update(visibility="shared")
    trace_model.objects.filter(owner__isnull=True).update(visibility="public")


def _sweep_trace_names(template: Any, axes: Any) -> set[str]:
    from simulations.core.scenario import trace_names
    from simulations.sweeps.expand import SweepValidationError, configuration_document, parse_axes

    names = trace_names(template)
    try:
        parsed = parse_axes(axes)
    except SweepValidationError:
        return names
    stride = 1
    strides = []
    for axis in reversed(parsed):
        strides.append(stride)
        stride *= len(axis.values)
    strides.reverse()
    for i, axis in enumerate(parsed):
        for j in range(len(axis.values)):
            names |= trace_names(configuration_document(template, parsed, j * strides[i]))
    return names


def record_trace_references(apps: Any, schema_editor: Any) -> None:
    """A TraceReference for every stored scenario, sweep and plan naming an existing trace."""
    from simulations.core.scenario import trace_names

    trace_model = apps.get_model("simulations", "Trace")
    reference = apps.get_model("simulations", "TraceReference")
    ids = dict(trace_model.objects.values_list("slug", "pk"))
    rows = []
    for field, model_name, names_of in (
        ("scenario", "Scenario", lambda row: trace_names(row.document)),
        ("sweep", "Sweep", lambda row: _sweep_trace_names(row.template, row.axes)),
        ("plan", "Plan", lambda row: trace_names(row.document)),
    ):
        for row in apps.get_model("simulations", model_name).objects.iterator():
            for name in sorted(names_of(row)):
                if name in ids:
                    rows.append(reference(trace_id=ids[name], **{f"{field}_id": row.pk}))
    reference.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ('simulations', '0005_catalog_seed_values'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='TraceReference',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
            ],
            options={
                'ordering': ('trace', 'id'),
            },
        ),
        migrations.RenameField(
            model_name='trace',
            old_name='uploaded_by',
            new_name='owner',
        ),
        migrations.AlterField(
            model_name='trace',
            name='owner',
            field=models.ForeignKey(blank=True, help_text='Who uploaded it (empty: a built-in trace).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='traces', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='trace',
            name='visibility',
            field=models.CharField(choices=[('private', 'Private (only me)'), ('shared', 'Shared (every signed-in user)'), ('public', 'Public (built-in catalog)')], default='private', help_text='Who may see and use it: its owner only, every signed-in user, or everyone as part of the built-in catalog.', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='trace',
            constraint=models.CheckConstraint(condition=models.Q(('visibility__in', ['private', 'shared', 'public'])), name='simulations_trace_visibility_valid'),
        ),
        migrations.AddField(
            model_name='tracereference',
            name='plan',
            field=models.ForeignKey(blank=True, help_text='The capacity plan whose document uses the trace.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='trace_references', to='simulations.plan'),
        ),
        migrations.AddField(
            model_name='tracereference',
            name='scenario',
            field=models.ForeignKey(blank=True, help_text='The scenario whose document uses the trace.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='trace_references', to='simulations.scenario'),
        ),
        migrations.AddField(
            model_name='tracereference',
            name='sweep',
            field=models.ForeignKey(blank=True, help_text='The sweep whose template (or an axis value) uses the trace.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='trace_references', to='simulations.sweep'),
        ),
        migrations.AddField(
            model_name='tracereference',
            name='trace',
            field=models.ForeignKey(help_text='The trace used.', on_delete=django.db.models.deletion.PROTECT, related_name='references', to='simulations.trace'),
        ),
        migrations.AddConstraint(
            model_name='tracereference',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('plan__isnull', True), ('scenario__isnull', False), ('sweep__isnull', True)), models.Q(('plan__isnull', True), ('scenario__isnull', True), ('sweep__isnull', False)), models.Q(('plan__isnull', False), ('scenario__isnull', True), ('sweep__isnull', True)), _connector='OR'), name='simulations_tracereference_one_referrer'),
        ),
        migrations.AddConstraint(
            model_name='tracereference',
            constraint=models.UniqueConstraint(fields=('trace', 'scenario'), name='simulations_tracereference_unique_scenario'),
        ),
        migrations.AddConstraint(
            model_name='tracereference',
            constraint=models.UniqueConstraint(fields=('trace', 'sweep'), name='simulations_tracereference_unique_sweep'),
        ),
        migrations.AddConstraint(
            model_name='tracereference',
            constraint=models.UniqueConstraint(fields=('trace', 'plan'), name='simulations_tracereference_unique_plan'),
        ),
        migrations.RunPython(existing_traces_stay_usable, migrations.RunPython.noop),
        migrations.RunPython(record_trace_references, migrations.RunPython.noop),
    ]
