"""``/api/measurements/`` and ``/api/calibrations/``: imports as
multipart CSV, CSV text or JSON rows; bad rows answer 400 naming line and column and store
nothing; private sets and fits are invisible to others; a fit is saved as a private
profile, and publishing is refused to non-staff."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from simulations.catalog.models import RuntimeProfile
from simulations.measurements.models import Calibration, MeasurementSet
from tests.factories import A100_OPERATORS, MeasurementSetFactory

pytestmark = pytest.mark.django_db


def a100_csv() -> bytes:
    return A100_OPERATORS.read_bytes()


def test_it_imports_a_multipart_csv(alice: Any, catalog: Any) -> None:
    response = alice.post(
        "/api/measurements/",
        {
            "slug": "a100-ops",
            "stack": "vllm-fp16",
            "file": SimpleUploadedFile("a100.csv", a100_csv(), content_type="text/csv"),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["device"], body["model"], body["stack"]) == ("a100-80gb", "llama2-7b", "vllm-fp16")
    assert (body["row_count"], body["format"], body["visibility"]) == (62, "operators", "private")
    assert body["owner"] == "alice"


def test_a_bad_csv_cell_answers_400_naming_line_and_column(alice: Any, catalog: Any) -> None:
    text = (
        a100_csv().decode().replace("mlp_up_proj,any,1,,,0.116", "mlp_up_proj,any,one,,,0.116", 1)
    )
    response = alice.post(
        "/api/measurements/",
        {
            "slug": "bad",
            "stack": "vllm-fp16",
            "file": SimpleUploadedFile("bad.csv", text.encode(), content_type="text/csv"),
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json() == {"file": ["line 7, column tokens: must be a whole number, not 'one'"]}
    assert not MeasurementSet.objects.exists()


def test_json_rows_import_and_a_bad_row_is_named_by_its_index(alice: Any, catalog: Any) -> None:
    rows = [
        {"device": "a100-80gb", "model": "llama2-7b", "phase": "prefill", "tokens": 1024,
         "batch": 1, "latency_ms": 80.0},
        {"device": "a100-80gb", "model": "llama2-7b", "phase": "decode", "batch": 32,
         "kv_tokens": 1024, "latency_ms": -3},
    ]  # fmt: skip
    bad = alice.post(
        "/api/measurements/", {"slug": "e2e", "stack": "vllm-fp16", "rows": rows}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json() == {"rows": ["rows[1].latency_ms: must be positive, not -3"]}
    assert not MeasurementSet.objects.exists()
    rows[1]["latency_ms"] = 21.5
    good = alice.post(
        "/api/measurements/", {"slug": "e2e", "stack": "vllm-fp16", "rows": rows}, format="json"
    )
    assert good.status_code == 201, good.json()
    assert good.json()["format"] == "end_to_end"


def test_a_users_private_set_is_invisible_to_others(
    alice: Any, bob: Any, user: Any, catalog: Any
) -> None:
    mset = MeasurementSetFactory(owner=user)
    assert [s["slug"] for s in alice.get("/api/measurements/").json()["results"]] == [mset.slug]
    assert bob.get("/api/measurements/").json()["results"] == []
    assert bob.get(f"/api/measurements/{mset.slug}/").status_code == 404
    assert len(alice.get(f"/api/measurements/{mset.slug}/").json()["rows"]) == 62
    fit = bob.post("/api/calibrations/", {"measurement_set": mset.slug}, format="json")
    assert fit.status_code == 400
    assert "unknown measurement set" in fit.json()["measurement_set"][0]


def test_calibrate_then_save_a_private_profile(
    alice: Any, bob: Any, user: Any, catalog: Any
) -> None:
    mset = MeasurementSetFactory(owner=user)
    fit = alice.post("/api/calibrations/", {"measurement_set": mset.slug}, format="json")
    assert fit.status_code == 201, fit.json()
    report = fit.json()["report"]
    assert report["stack"] == "vllm-fp16"
    assert {"parameters", "rows", "mape", "max_rel_err", "holdout_mape"} <= set(report)
    assert fit.json()["mape"] <= 0.08
    cal_id = fit.json()["id"]
    assert bob.get(f"/api/calibrations/{cal_id}/").status_code == 404
    assert bob.post(f"/api/calibrations/{cal_id}/save/", {"slug": "x"}).status_code == 404
    saved = alice.post(
        f"/api/calibrations/{cal_id}/save/", {"slug": "alice-vllm", "name": "Mine"}, format="json"
    )
    assert saved.status_code == 201, saved.json()
    assert saved.json()["slug"] == "alice-vllm"
    profile = RuntimeProfile.objects.get(slug="alice-vllm")
    assert (profile.owner, profile.visibility) == (user, "private")
    assert alice.get("/api/runtimes/alice-vllm/").status_code == 200
    assert bob.get("/api/runtimes/alice-vllm/").status_code == 404


def test_publishing_is_refused_to_non_staff(alice: Any, user: Any, catalog: Any) -> None:
    mset = MeasurementSetFactory(owner=user)
    cal_id = alice.post("/api/calibrations/", {"measurement_set": mset.slug}, format="json").json()[
        "id"
    ]
    refused = alice.post(
        f"/api/calibrations/{cal_id}/save/", {"slug": "pub", "publish": True}, format="json"
    )
    assert refused.status_code == 403
    assert not RuntimeProfile.objects.filter(slug="pub").exists()


def test_staff_publish_a_fit(carol: Any, staff: Any, catalog: Any) -> None:
    mset = MeasurementSetFactory(owner=staff)
    cal_id = carol.post("/api/calibrations/", {"measurement_set": mset.slug}, format="json").json()[
        "id"
    ]
    published = carol.post(
        f"/api/calibrations/{cal_id}/save/", {"slug": "pub", "publish": True}, format="json"
    )
    assert published.status_code == 201
    assert RuntimeProfile.objects.get(slug="pub").visibility == "public"


def test_an_uploaded_csv_is_stored_private_and_fitted(alice: Any, catalog: Any) -> None:
    response = alice.post(
        "/api/calibrations/",
        {
            "slug": "upload",
            "stack": "vllm-fp16",
            "file": SimpleUploadedFile("a100.csv", a100_csv(), content_type="text/csv"),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    assert MeasurementSet.objects.get(slug="upload").visibility == "private"
    assert Calibration.objects.get().measurement_set.slug == "upload"


def test_a_set_is_deleted_by_its_owner_only(
    alice: Any, bob: Any, carol: Any, user: Any, staff: Any, catalog: Any
) -> None:
    mine = MeasurementSetFactory(owner=user, visibility="shared")
    assert bob.delete(f"/api/measurements/{mine.slug}/").status_code == 403
    assert alice.delete(f"/api/measurements/{mine.slug}/").status_code == 204
    public = MeasurementSetFactory(owner=staff, visibility="public")
    assert alice.delete(f"/api/measurements/{public.slug}/").status_code == 403
    assert carol.delete(f"/api/measurements/{public.slug}/").status_code == 204
    assert not MeasurementSet.objects.exists()
