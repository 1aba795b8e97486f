"""``manage.py seed_catalog`` also stores the Azure traces the repository ships, as public
built-in traces, so the builder's trace list does not start empty."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from simulations.choices import TraceVisibility
from simulations.scenarios.models import Trace

pytestmark = pytest.mark.django_db


def test_seed_catalog_stores_the_shipped_azure_traces_once() -> None:
    out = io.StringIO()
    call_command("seed_catalog", stdout=out)
    traces = {t.slug: t for t in Trace.objects.all()}
    assert {"azure-conv-2023", "azure-code-2023"} <= set(traces)
    assert traces["azure-conv-2023"].request_count == 19366
    assert traces["azure-code-2023"].request_count == 8819
    assert all(t.visibility == TraceVisibility.PUBLIC and t.owner is None for t in traces.values())
    assert "azure-conv-2023" in out.getvalue()
    call_command("seed_catalog", stdout=io.StringIO())  # safe to run on every start
    assert Trace.objects.filter(slug__startswith="azure-").count() == 2
