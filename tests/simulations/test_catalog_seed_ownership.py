"""Seeding never overwrites a staff edit: each seeded row keeps a snapshot of what the seed
last wrote (``seed_values``); a reseed updates only rows still equal to their snapshot."""

from __future__ import annotations

import importlib
import importlib.resources
import json
from io import StringIO
from typing import Any

import pytest
from django import forms
from django.apps import apps as django_apps
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from simulations.catalog import services
from simulations.catalog.models import Device, LLMModel, RuntimeProfile
from tests.catalog_records import records

pytestmark = pytest.mark.django_db


def admin_change_form(page: Any) -> dict[str, Any]:
    """The POST data an admin change page would send back unchanged: the main form's
    values and every inline formset's management and form fields."""
    data: dict[str, Any] = {}

    def add(form: Any) -> None:
        for name, bound in form.fields.items():
            value = form[name].value()
            key = form.add_prefix(name)
            if isinstance(bound.widget, forms.CheckboxInput):
                if value:
                    data[key] = "on"
                continue
            if value is None:
                data[key] = ""
            elif hasattr(value, "pk"):
                data[key] = str(value.pk)
            else:
                data[key] = str(value)

    add(page.context["adminform"].form)
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        for key, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{key}"] = str(value)
        for form in formset.forms:
            add(form)
    return data


@pytest.fixture
def admin_client(client: Any, staff: Any) -> Any:
    client.force_login(staff)
    return client


def test_an_admin_edit_survives_a_second_seed_catalog(admin_client: Any) -> None:
    call_command("seed_catalog", stdout=StringIO())
    device = Device.objects.get(slug="a100-80gb")
    seeded_price = device.price_usd
    page = admin_client.get(f"/admin/simulations/device/{device.pk}/change/")
    data = admin_change_form(page)
    data.update(price_usd="12345.0", name="A100 80GB PCIe (our contract price)")
    response = admin_client.post(f"/admin/simulations/device/{device.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Device.objects.get(slug="a100-80gb").price_usd == 12345.0

    out = StringIO()
    call_command("seed_catalog", stdout=out)  # what every web start runs

    device = Device.objects.get(slug="a100-80gb")
    assert device.price_usd == 12345.0 != seeded_price
    assert device.name == "A100 80GB PCIe (our contract price)"
    assert "kept 1 edited row" in out.getvalue()
    assert "device a100-80gb" in out.getvalue()


def test_an_api_edit_of_a_model_survives_a_second_seed(carol_api: APIClient) -> None:
    services.catalog_seed()
    model = carol_api.get("/api/models/llama2-7b/").json()
    for key in ("id", "created_at", "updated_at"):
        model.pop(key)
    model["notes"] = "Our fine-tune: same shapes, 8k context."
    model["max_context"] = 8192
    response = carol_api.put("/api/models/llama2-7b/", model, format="json")
    assert response.status_code == 200, response.json()

    report = services.catalog_seed()

    row = LLMModel.objects.get(slug="llama2-7b")
    assert (row.max_context, row.notes) == (8192, "Our fine-tune: same shapes, 8k context.")
    assert report.kept == ["model llama2-7b"]


@pytest.fixture
def carol_api(staff: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(staff)
    return client


def test_an_unedited_row_takes_a_changed_seed_value() -> None:
    services.catalog_seed(**records())
    recs = records()
    recs["devices"][0]["price_usd"] = 9000.0
    recs["devices"][0]["memory"] = [{"kind": "hbm", "capacity_gb": 40.0, "bw_gbps": 1555.0}]
    recs["runtimes"][0]["compute_eff"] = 0.42
    recs["models"][0]["name"] = "Renamed by the seed"

    report = services.catalog_seed(**recs)

    a100 = Device.objects.get(slug="t-a100-80gb")
    assert a100.price_usd == 9000.0
    assert [(t.capacity_gb, t.bw_gbps) for t in a100.memory_tiers.all()] == [(40.0, 1555.0)]
    assert RuntimeProfile.objects.get(slug=recs["runtimes"][0]["slug"]).compute_eff == 0.42
    assert LLMModel.objects.get(slug=recs["models"][0]["slug"]).name == "Renamed by the seed"
    assert report.kept == []
    assert a100.seed_values["price_usd"] == 9000.0


def test_an_edited_row_is_kept_while_its_neighbours_update() -> None:
    services.catalog_seed(**records())
    Device.objects.filter(slug="t-a100-80gb").update(price_usd=11111.0)  # a staff edit
    recs = records()
    recs["devices"][0]["price_usd"] = 9000.0
    recs["devices"][1]["price_usd"] = 8000.0

    report = services.catalog_seed(**recs)

    assert Device.objects.get(slug="t-a100-80gb").price_usd == 11111.0
    assert Device.objects.get(slug=recs["devices"][1]["slug"]).price_usd == 8000.0
    assert report.kept == ["device t-a100-80gb"]
    assert "kept 1 edited row: device t-a100-80gb" in str(report)


def test_an_edited_memory_tier_counts_as_an_edit() -> None:
    services.catalog_seed(**records())
    device = Device.objects.get(slug="t-a100-80gb")
    device.memory_tiers.filter(order=0).update(capacity_gb=96.0)
    recs = records()
    recs["devices"][0]["name"] = "changed by the seed"
    report = services.catalog_seed(**recs)
    assert report.kept == ["device t-a100-80gb"]
    assert Device.objects.get(slug="t-a100-80gb").name == records()["devices"][0]["name"]


def test_a_field_new_to_the_seed_is_not_an_edit() -> None:
    services.catalog_seed(**records())
    row = Device.objects.get(slug="t-a100-80gb")
    # A snapshot written before the seed knew ``typical_w``.
    snapshot = dict(row.seed_values)
    del snapshot["typical_w"]
    Device.objects.filter(pk=row.pk).update(seed_values=snapshot)
    recs = records()
    recs["devices"][0]["typical_w"] = 250.0

    report = services.catalog_seed(**recs)

    assert report.kept == []
    assert Device.objects.get(pk=row.pk).typical_w == 250.0


def test_reset_forces_an_edited_row_back_to_the_seed() -> None:
    services.catalog_seed()
    Device.objects.filter(slug="a100-80gb").update(price_usd=1.0)
    seed_price = next(
        r["price_usd"]
        for r in json.loads(
            (
                importlib.resources.files("simulations.core") / "data" / "devices" / "gpus.json"
            ).read_text()
        )
        if r["slug"] == "a100-80gb"
    )
    out = StringIO()
    call_command("seed_catalog", "--reset", "a100-80gb", stdout=out)
    assert Device.objects.get(slug="a100-80gb").price_usd == seed_price
    assert "reset device a100-80gb" in out.getvalue()
    with pytest.raises(CommandError, match="no-such-slug"):
        call_command("seed_catalog", "--reset", "no-such-slug", stdout=StringIO())


def test_the_migration_snapshots_existing_builtin_rows_as_seed_owned() -> None:
    services.catalog_seed()
    # Rows as they were before the snapshots existed, one of them edited since.
    Device.objects.update(seed_values={})
    RuntimeProfile.objects.update(seed_values={})
    LLMModel.objects.update(seed_values={})
    Device.objects.filter(slug="a100-80gb").update(price_usd=12345.0)
    staff_row = Device.objects.create(
        slug="staff-made", name="x", kind="gpu", vendor="x", tdp_w=1.0, idle_w=0.0
    )
    migration = importlib.import_module("simulations.migrations.0005_catalog_seed_values")

    migration.snapshot_builtin_rows(django_apps, None)

    a100 = Device.objects.get(slug="a100-80gb")
    assert a100.seed_values["price_usd"] == 12345.0  # current values are taken as the seed's
    assert a100.seed_values["memory_tiers"][0]["order"] == 0
    assert Device.objects.get(pk=staff_row.pk).seed_values == {}  # not a built-in row
    assert all(r.seed_values for r in RuntimeProfile.objects.all())
    assert all(m.seed_values for m in LLMModel.objects.all())
    # …so the next seed treats them as unedited and brings them to the data files.
    assert services.catalog_seed().kept == []
    assert Device.objects.get(slug="a100-80gb").price_usd != 12345.0


def test_saving_an_admin_form_unchanged_is_not_an_edit(admin_client: Any) -> None:
    services.catalog_seed()
    for slug in ("a100-80gb", "u280", "snapdragon-8-gen-3", "hexagon-npu"):
        device = Device.objects.get(slug=slug)
        url = f"/admin/simulations/device/{device.pk}/change/"
        response = admin_client.post(url, admin_change_form(admin_client.get(url)))
        assert response.status_code == 302, (slug, response.content.decode()[:2000])
    assert services.catalog_seed().kept == []
