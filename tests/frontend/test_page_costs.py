"""What a page costs the server: database queries per page bounded and
independent of the number of catalog rows, and the run page's HTML under a size bound (its
charts' data is fetched from a JSON endpoint, not inlined in the page)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simulations.runs.models import SimulationRun
from tests.factories import DeviceFactory, LLMModelFactory, RuntimeProfileFactory

pytestmark = pytest.mark.django_db

#: Pages and API reads the load benchmark drives, with the most queries each may make
#: (measured: 3–9; the session, the user, then the page's own reads; a device page also reads
#: the catalog version its cached roofline is keyed by).
BOUNDED_PAGES = [
    ("/", 6),
    ("/catalog/", 8),
    ("/catalog/devices/", 7),
    ("/catalog/models/", 5),
    ("/catalog/devices/a100-80gb/", 10),
    ("/catalog/models/llama2-7b/", 5),
    ("/runs/", 5),
    ("/api/devices/", 7),
    ("/api/models/", 6),
    ("/api/runtimes/", 6),
    ("/api/devices/a100-80gb/", 6),
]
#: The run page's HTML without its charts' data (the summary table, the scenario document
#: and the lifecycle); it was 78 KB for this 3-system run with the figures inlined.
RUN_PAGE_MAX_BYTES = 40_000


def _queries(client: Any, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(ctx.captured_queries)


@pytest.mark.parametrize(("path", "bound"), BOUNDED_PAGES)
def test_catalog_pages_make_a_bounded_number_of_queries_whatever_the_catalog_size(
    seeded: Any, alice_client: Any, path: str, bound: int
) -> None:
    _queries(alice_client, path)  # first request: session and caches warm
    before = _queries(alice_client, path)
    DeviceFactory.create_batch(12)
    LLMModelFactory.create_batch(12)
    RuntimeProfileFactory.create_batch(4)
    after = _queries(alice_client, path)
    assert after == before, f"{path}: {before} queries, {after} with 28 more catalog rows"
    assert after <= bound


def test_the_run_page_loads_its_charts_instead_of_inlining_them(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    response = alice_client.get(f"/runs/{glitches_run.pk}/")
    assert response.status_code == 200
    assert len(response.content) <= RUN_PAGE_MAX_BYTES, len(response.content)
    assert b'type="application/json"' not in response.content
    assert f"/runs/{glitches_run.pk}/charts.json".encode() in response.content


def test_the_run_charts_are_built_once_per_result_version(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    from datetime import timedelta
    from unittest import mock

    from django.core.cache import cache

    from frontend.views import runs

    cache.clear()
    url = f"/runs/{glitches_run.pk}/charts.json"
    with mock.patch.object(runs, "efficiency_figure", wraps=runs.efficiency_figure) as built:
        first = alice_client.get(url)
        second = alice_client.get(url)
        assert first.status_code == second.status_code == 200
        assert first.content == second.content
        assert built.call_count == 1
        # another baseline is another figure
        assert alice_client.get(f"{url}?baseline=1").status_code == 200
        assert built.call_count == 2
        # a new result (stored by a later attempt) is a new version: built again
        SimulationRun.objects.filter(pk=glitches_run.pk).update(
            finished_at=glitches_run.finished_at + timedelta(seconds=1)
        )
        alice_client.get(url)
        assert built.call_count == 3


def test_the_run_page_reads_the_result_once_per_result_version(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    from unittest import mock

    from django.core.cache import cache

    from frontend.views import runs

    cache.clear()
    with mock.patch.object(runs.results, "summary_rows", wraps=runs.results.summary_rows) as rows:
        first = alice_client.get(f"/runs/{glitches_run.pk}/")
        second = alice_client.get(f"/runs/{glitches_run.pk}/")
        assert rows.call_count == 1
        assert alice_client.get(f"/runs/{glitches_run.pk}/?baseline=1").status_code == 200
        assert rows.call_count == 2
    summary = re.compile(rb'<table id="summary".*?</table>', re.S)
    assert summary.search(first.content) is not None
    assert summary.search(first.content).group() == summary.search(second.content).group()


def test_the_roofline_figure_is_rebuilt_after_a_catalog_edit(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    from unittest import mock

    from django.core.cache import cache

    from frontend.views import runs
    from simulations.catalog.models import Device

    cache.clear()
    url = f"/runs/{glitches_run.pk}/figures/roofline.json"
    with mock.patch.object(
        runs.analysis, "scenario_rooflines", wraps=runs.analysis.scenario_rooflines
    ) as built:
        assert alice_client.get(url).status_code == 200
        assert alice_client.get(url).status_code == 200
        assert built.call_count == 1
        device = Device.objects.get(slug="u280")
        device.price_usd = (device.price_usd or 1000.0) + 1
        device.save()
        assert alice_client.get(url).json()["figure"] is not None
        assert built.call_count == 2


def test_a_device_roofline_is_computed_once_per_catalog_version(
    seeded: Any, alice_client: Any
) -> None:
    from unittest import mock

    from django.core.cache import cache

    from frontend.views import catalog
    from simulations.catalog.models import Device

    cache.clear()
    url = "/catalog/devices/a100-80gb/"
    with mock.patch.object(
        catalog.analysis, "device_roofs", wraps=catalog.analysis.device_roofs
    ) as roofs:
        first = alice_client.get(url).content
        assert alice_client.get(url).status_code == 200
        assert roofs.call_count == 1
        device = Device.objects.get(slug="a100-80gb")
        device.fp16_tflops = 300.0
        device.save()
        assert alice_client.get(url).status_code == 200
        assert roofs.call_count == 2
    assert b'id="roofline-data"' in first
