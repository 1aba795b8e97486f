"""A device record with ``"tdp_w": null`` (the vendor publishes no power) in the database:
``seed_catalog`` loads it, the row reads back as a spec without power, reseeding leaves it
alone, the CHECK constraints accept NULL (and still refuse a bad figure), and the catalog
pages show an em dash in its place."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import Client

from simulations import adapters
from simulations.catalog import services
from simulations.catalog.models import Device
from tests.catalog_records import records

pytestmark = pytest.mark.django_db

SLUG = "t-a100-unpowered"


def _unpowered_records() -> dict[str, list[dict[str, Any]]]:
    """The test catalog plus its A100 without a published power."""
    recs = records()
    a100 = copy.deepcopy(recs["devices"][0])
    a100.update(slug=SLUG, name="Test A100 without a published power", tdp_w=None)
    a100["sources"]["tdp_w"] = "test fixture: the vendor publishes no power"
    recs["devices"].append(a100)
    return recs


def test_seeding_loads_a_record_without_power_and_reads_it_back() -> None:
    report = services.catalog_seed(**_unpowered_records())
    assert SLUG in report.devices
    assert Device.objects.get(slug=SLUG).tdp_w is None
    spec = adapters.catalog_from_db().devices[SLUG]
    assert spec.tdp_w is None
    assert spec.idle_w == 50.0  # idle power above an unknown TDP cannot be checked
    again = services.catalog_seed(**_unpowered_records())
    assert SLUG in again.devices and not again.kept


def test_the_seed_catalog_command_loads_records_with_a_null_power(monkeypatch: Any) -> None:
    extra = _unpowered_records()["devices"][-1]
    shipped = services.iter_records

    def with_unpowered(kind: str) -> Any:
        yield from shipped(kind)
        if kind == "devices":
            yield copy.deepcopy(extra)

    monkeypatch.setattr(services, "iter_records", with_unpowered)
    out = io.StringIO()
    call_command("seed_catalog", stdout=out)
    assert Device.objects.get(slug=SLUG).tdp_w is None
    assert "Catalog loaded" in out.getvalue()


def test_the_database_accepts_a_null_power_and_still_refuses_a_bad_one() -> None:
    services.catalog_seed(**_unpowered_records())
    row = Device.objects.get(slug=SLUG)
    row.full_clean()  # the model's validation and its constraints accept NULL
    for bad in (0.0, -1.0, row.idle_w / 2):  # the last: below the row's idle power
        with transaction.atomic(), pytest.raises(IntegrityError):
            Device.objects.filter(pk=row.pk).update(tdp_w=bad)
        row.tdp_w = bad
        with pytest.raises(ValidationError):
            row.full_clean()


def test_the_catalog_pages_show_an_em_dash_for_an_unpublished_power(
    client: Client, django_user_model: Any
) -> None:
    services.catalog_seed(**_unpowered_records())
    client.force_login(django_user_model.objects.create_user("viewer", password="x" * 12))
    title = 'title="not published — give a figure in the scenario">—</td>'
    for url in ("/catalog/devices/", "/catalog/"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert title in page.content.decode(), url
    detail = client.get(f"/catalog/devices/{SLUG}/").content.decode()
    assert "not published — give a figure in the scenario" in detail
