"""The shipped TPU v5e / v6e and Alveo V80 records in the database: ``seed_catalog`` loads
them with their unpublished power left empty and the TPUs' ICI peer link, the API lists and
shows them, and the catalog pages say where each figure comes from."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from simulations import adapters
from simulations.catalog.models import Device
from simulations.core.catalog import builtin_catalog

pytestmark = pytest.mark.django_db

NEW = ("tpu-v5e", "tpu-v6e", "alveo-v80")


def test_seed_catalog_loads_the_tpus_and_the_v80_as_the_json_files_have_them() -> None:
    call_command("seed_catalog", verbosity=0)
    rows = {d.slug: d for d in Device.objects.filter(slug__in=NEW)}
    assert set(rows) == set(NEW)
    assert all(row.tdp_w is None for row in rows.values())
    assert rows["tpu-v6e"].peer_link_kind == "ici" and rows["tpu-v6e"].peer_link_bw_gbps == 400
    assert rows["alveo-v80"].host_link_pcie_gen == 5 and rows["alveo-v80"].host_link_lanes == 8
    specs = adapters.catalog_from_db().devices
    for slug in NEW:
        assert specs[slug] == builtin_catalog().device(slug), slug
        assert dict(specs[slug].sources) == dict(builtin_catalog().device(slug).sources), slug


def test_the_api_lists_the_new_devices_by_kind_with_a_null_power(
    alice: APIClient, catalog: Any
) -> None:
    gpus = {d["slug"] for d in alice.get("/api/devices/?kind=gpu&page_size=100").json()["results"]}
    fpgas = {
        d["slug"] for d in alice.get("/api/devices/?kind=fpga&page_size=100").json()["results"]
    }
    assert {"tpu-v5e", "tpu-v6e"} <= gpus and "alveo-v80" in fpgas
    v6e = alice.get("/api/devices/tpu-v6e/").json()
    assert v6e["tdp_w"] is None and v6e["sources"]["tdp_w"].startswith("NOT PUBLISHED")
    assert v6e["peer_link"]["kind"] == "ici" and v6e["peer_link"]["bw_gbps"] == 400
    assert v6e["memory"][0]["bw_gbps"] == 1638 and v6e["fp8_tflops"] is None


def test_the_catalog_pages_list_the_tpus_and_source_their_missing_power(
    client: Client, catalog: Any, user: Any
) -> None:
    client.force_login(user)
    html = client.get("/catalog/devices/?vendor=Google").content.decode()
    assert 'id="device-tpu-v5e"' in html and 'id="device-tpu-v6e"' in html
    assert 'id="device-a100-80gb"' not in html
    assert 'id="device-alveo-v80"' in client.get("/catalog/devices/?kind=fpga").content.decode()
    page = client.get("/catalog/devices/tpu-v6e/").content.decode()
    row = page.split('id="spec-tdp_w"', 1)[1].split("</tr>", 1)[0]
    assert "NOT PUBLISHED" in row
