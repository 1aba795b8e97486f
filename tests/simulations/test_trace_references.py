"""The services record which traces a sweep's configurations use — the template's and
every axis value's — so none of them can be deleted under it."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.scenarios import services
from simulations.scenarios.models import Trace, TraceReference
from simulations.sweeps import services as sweep_services
from tests.frontend.conftest import glitches_document
from tests.simulations.test_services import MINI_TRACE

pytestmark = pytest.mark.django_db


def test_a_sweep_records_the_traces_its_axis_values_name(
    user: Any, builtin_catalog_rows: Any
) -> None:
    for slug in ("day", "night"):
        services.trace_import(slug=slug, name=slug, text=MINI_TRACE, owner=user)
    template = glitches_document()
    template["workload"] = {
        "requests": 3,
        "input_tokens": 128,
        "output_tokens": 16,
        "arrival": {"kind": "trace", "trace": "day"},
        "seed": 0,
    }
    sweep = sweep_services.sweep_create(
        owner=user,
        name="day and night",
        template=template,
        axes=[{"name": "trace", "path": "workload.arrival.trace", "values": ["day", "night"]}],
    )
    used = TraceReference.objects.filter(sweep=sweep).values_list("trace__slug", flat=True)
    assert sorted(used) == ["day", "night"]
    with pytest.raises(services.TraceInUseError, match="sweep #"):
        services.trace_delete(trace=Trace.objects.get(slug="night"), user=user)
