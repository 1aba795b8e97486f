"""Calibration pages: import a measurement set (bad cells named
by line and column, nothing stored), another user's private set is a 404, fit → the chart
of measured against predicted, the residuals and fitted values, save a private profile,
and publishing refused to non-staff."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from frontend.views.calibration import CalibrateForm, MeasurementImportForm
from simulations.catalog.models import RuntimeProfile
from simulations.measurements.models import Calibration, MeasurementSet
from tests.factories import A100_OPERATORS, MeasurementSetFactory

pytestmark = pytest.mark.django_db


def _upload(name: str, text: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text, content_type="text/csv")


def test_the_calibrate_page_lists_visible_sets_only(
    alice_client: Client, user: Any, other_user: Any, seeded: Any
) -> None:
    mine = MeasurementSetFactory(owner=user)
    theirs = MeasurementSetFactory(owner=other_user)
    page = alice_client.get("/calibrate/")
    assert page.status_code == 200
    html = page.content.decode()
    assert mine.slug in html
    assert theirs.slug not in html
    assert alice_client.get(f"/measurements/{theirs.slug}/").status_code == 404
    assert alice_client.get(f"/measurements/{mine.slug}/").status_code == 200


def test_a_bad_upload_names_line_and_column_and_stores_nothing(
    alice_client: Client, seeded: Any
) -> None:
    text = A100_OPERATORS.read_text(encoding="utf-8").replace(",0.116,", ",-0.116,", 1)
    response = alice_client.post(
        "/measurements/import/",
        {
            "slug": "bad",
            "stack": "vllm-fp16",
            "visibility": "private",
            "file": _upload("bad.csv", text.encode()),
        },
    )
    assert response.status_code == 400
    assert "line 7, column time_ms_per_layer: must be positive, not -0.116" in (
        response.content.decode()
    )
    assert not MeasurementSet.objects.exists()


def test_import_then_fit_renders_the_chart_residuals_and_values(
    alice_client: Client, seeded: Any
) -> None:
    stored = alice_client.post(
        "/measurements/import/",
        {
            "slug": "a100-ops",
            "stack": "vllm-fp16",
            "visibility": "private",
            "file": _upload("a100.csv", A100_OPERATORS.read_bytes()),
        },
    )
    assert stored.status_code == 302
    fit = alice_client.post("/calibrate/", {"measurement_set": "a100-ops"})
    assert fit.status_code == 302
    cal = Calibration.objects.get()
    page = alice_client.get(fit["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    figure = json.loads(
        re.search(
            r'<script type="application/json" id="calibration-fit[^"]*">(.*?)</script>', html, re.S
        ).group(1)
    )
    names = {t["name"] for t in figure["data"]}
    assert {"attn_pre_proj measured", "attn_pre_proj predicted"} <= names
    assert "attn_decode (decode) measured" in names
    assert 'id="fit-rows"' in html and html.count("<tr>") >= 62
    assert "compute_eff" in html and "gemm_n_half" in html
    assert f"{cal.mape:.1%}" in html


def test_save_makes_a_private_profile_and_publish_is_refused_to_non_staff(
    alice_client: Client, user: Any, seeded: Any
) -> None:
    mset = MeasurementSetFactory(owner=user)
    alice_client.post("/calibrate/", {"measurement_set": mset.slug})
    cal = Calibration.objects.get()
    page = alice_client.get(f"/calibrations/{cal.pk}/").content.decode()
    assert 'name="publish"' not in page  # only staff are offered it
    refused = alice_client.post(f"/calibrations/{cal.pk}/save/", {"slug": "pub", "publish": "on"})
    assert refused.status_code == 403
    assert not RuntimeProfile.objects.filter(slug="pub").exists()
    saved = alice_client.post(f"/calibrations/{cal.pk}/save/", {"slug": "alice-vllm"})
    assert saved.status_code == 302
    profile = RuntimeProfile.objects.get(slug="alice-vllm")
    assert (profile.owner, profile.visibility) == (user, "private")


def test_another_users_fit_is_a_404(
    alice_client: Client, client: Client, user: Any, other_user: Any, seeded: Any
) -> None:
    mset = MeasurementSetFactory(owner=other_user)
    client.force_login(other_user)
    client.post("/calibrate/", {"measurement_set": mset.slug})
    cal = Calibration.objects.get()
    alice = Client()
    alice.force_login(user)
    assert alice.get(f"/calibrations/{cal.pk}/").status_code == 404
    assert alice.post(f"/calibrations/{cal.pk}/save/", {"slug": "x"}).status_code == 404


def test_the_catalog_pages_list_catalog_profiles_not_a_users_private_one(
    alice_client: Client, other_user: Any, seeded: Any
) -> None:
    from simulations.measurements import services as msvc

    cal = msvc.calibration_run(
        owner=other_user, measurement_set=MeasurementSetFactory(owner=other_user)
    )
    msvc.calibration_save_profile(calibration=cal, user=other_user, slug="bobs-vllm")
    for url in ("/catalog/", "/catalog/devices/a100-80gb/"):
        html = alice_client.get(url).content.decode()
        assert "vllm-fp16" in html, url
        assert "bobs-vllm" not in html, url


def test_the_forms_offer_the_stacks_and_devices_of_the_calibrated_families(
    alice_client: Client, user: Any, seeded: Any
) -> None:
    """The choices follow the families whose stacks the calibration fits (the registry's
    ``calibrated_kinds``): GPU stacks and devices, not an FPGA's."""
    imports, fits = MeasurementImportForm(user=user), CalibrateForm(user=user)
    for form in (imports, fits):
        stacks = {value for value, _ in form.fields["stack"].choices}
        assert {"vllm-fp16", "hf-eager-fp16"} <= stacks
        assert "flightllm-w4a8" not in stacks
    devices = {value for value, _ in imports.fields["device"].choices}
    assert "a100-80gb" in devices
    assert "u280" not in devices
    html = alice_client.get("/calibrate/").content.decode()
    assert 'value="vllm-fp16"' in html
    assert 'value="flightllm-w4a8"' not in html
