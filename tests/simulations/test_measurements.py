"""Measurement sets as catalog data and calibrations: import
through the service and the CLI (bad cells named by line and column, nothing stored
half-way), visibility, the fit, saving a private profile and publishing."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from simulations.catalog.models import RuntimeProfile
from simulations.core.errors import ScenarioValidationError
from simulations.measurements import selectors
from simulations.measurements import services as msvc
from simulations.measurements.models import Calibration, MeasurementSet
from simulations.scenarios import services
from tests.factories import A100_OPERATORS, MeasurementSetFactory
from tests.frontend.conftest import glitches_document

pytestmark = pytest.mark.django_db

E2E_HEADER = "device,model,stack,precision,tp,phase,tokens,batch,kv_tokens,latency_ms,power_w\n"


def _bad_operator_csv() -> str:
    """The A100 file with one bad cell: line 5's time is text."""
    lines = A100_OPERATORS.read_text(encoding="utf-8").splitlines()
    cells = lines[4].split(",")
    cells[10] = "fast"
    lines[4] = ",".join(cells)
    return "\n".join(lines) + "\n"


def test_it_imports_the_a100_operator_set_with_its_metadata(
    user: Any, builtin_catalog_rows: Any
) -> None:
    mset = MeasurementSetFactory(owner=user)
    assert (mset.device.slug, mset.llm.slug, mset.runtime.slug) == (
        "a100-80gb",
        "llama2-7b",
        "vllm-fp16",
    )
    assert mset.format == "operators"
    assert mset.row_count == 62
    assert mset.precision == "fp16"
    assert mset.tensor_parallel == 1
    assert mset.visibility == "private"
    assert mset.rows[0]["line"] == 2
    assert mset.to_core().rows[3].op == "attn_post_proj"


def test_a_bad_cell_is_named_by_line_and_column_and_nothing_is_stored(
    user: Any, builtin_catalog_rows: Any
) -> None:
    with pytest.raises(ValidationError) as info:
        msvc.measurement_set_import(
            slug="bad", name="bad", text=_bad_operator_csv(), stack="vllm-fp16", owner=user
        )
    assert info.value.message_dict["text"] == [
        "line 5, column time_ms_per_layer: must be a number, not 'fast'"
    ]
    assert not MeasurementSet.objects.exists()


def test_a_row_of_another_device_is_refused_by_line_and_column(
    user: Any, builtin_catalog_rows: Any
) -> None:
    text = E2E_HEADER + (
        "a100-80gb,llama2-7b,vllm,fp16,1,prefill,1024,1,,80.0,\n"
        "h100-sxm,llama2-7b,vllm,fp16,1,decode,,1,1024,10.0,\n"
    )
    with pytest.raises(ValidationError) as info:
        msvc.measurement_set_import(
            slug="mixed", name="mixed", text=text, stack="vllm-fp16", owner=user
        )
    assert info.value.message_dict["text"] == [
        "line 3, column device: 'h100-sxm' is not the set's a100-80gb"
    ]
    assert not MeasurementSet.objects.exists()


def test_end_to_end_points_import_with_optional_power(user: Any, builtin_catalog_rows: Any) -> None:
    text = E2E_HEADER + (
        "a100-80gb,llama2-7b,vllm,fp16,1,prefill,1024,1,,80.0,310\n"
        "a100-80gb,llama2-7b,vllm,fp16,1,decode,,32,1024,21.5,\n"
    )
    mset = msvc.measurement_set_import(
        slug="e2e", name="e2e", text=text, stack="vllm-fp16", owner=user
    )
    assert mset.format == "end_to_end"
    assert [r["power_w"] for r in mset.rows] == [310.0, None]
    assert [(r["phase"], r["batch"], r["kv_tokens"]) for r in mset.rows] == [
        ("prefill", 1, 0),
        ("decode", 32, 1024),
    ]


def test_only_staff_publish_a_measurement_set(user: Any, builtin_catalog_rows: Any) -> None:
    with pytest.raises(ValidationError) as info:
        MeasurementSetFactory(owner=user, visibility="public")
    assert "visibility" in info.value.message_dict


def test_a_users_private_set_is_invisible_to_others(
    user: Any, other_user: Any, builtin_catalog_rows: Any
) -> None:
    private = MeasurementSetFactory(owner=user)
    shared = MeasurementSetFactory(owner=user, visibility="shared")
    assert set(selectors.measurement_sets_visible_to(user)) == {private, shared}
    assert list(selectors.measurement_sets_visible_to(other_user)) == [shared]
    with pytest.raises(MeasurementSet.DoesNotExist):
        selectors.measurement_set_get_for(other_user, private.slug)


def test_the_cli_imports_a_catalog_set(builtin_catalog_rows: Any) -> None:
    out = io.StringIO()
    call_command(
        "import_measurements",
        str(A100_OPERATORS),
        "--device",
        "a100-80gb",
        "--model",
        "llama2-7b",
        "--stack",
        "vllm-fp16",
        stdout=out,
    )
    mset = MeasurementSet.objects.get()
    assert mset.slug == "a100-llama2-7b-vllm-operators"
    assert (mset.owner, mset.visibility) == (None, "public")
    assert "62 per-operator kernel times rows" in out.getvalue()


def test_the_cli_names_the_bad_cell_and_stores_nothing(
    tmp_path: Any, builtin_catalog_rows: Any
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(_bad_operator_csv(), encoding="utf-8")
    with pytest.raises(CommandError, match="line 5, column time_ms_per_layer"):
        call_command(
            "import_measurements",
            str(bad),
            "--device",
            "a100-80gb",
            "--model",
            "llama2-7b",
            "--stack",
            "vllm-fp16",
        )
    assert not MeasurementSet.objects.exists()


# --- calibration ---------------------------------------------------------------------------


def test_calibrate_then_save_makes_a_profile_private_to_its_user(
    user: Any, other_user: Any, builtin_catalog_rows: Any
) -> None:
    cal = msvc.calibration_run(owner=user, measurement_set=MeasurementSetFactory(owner=user))
    assert cal.mape is not None and cal.mape <= 0.08
    assert cal.holdout_mape is not None and cal.holdout_mape <= 0.15
    assert cal.report["rows"][0]["measured_ms"] == 0.005
    profile = msvc.calibration_save_profile(calibration=cal, user=user, slug="my-vllm")
    assert (profile.owner, profile.visibility, profile.default_for_kind) == (
        user,
        "private",
        False,
    )
    assert profile.compute_eff == pytest.approx(cal.report["parameters"]["compute_eff"]["value"])
    assert profile.params["gemm_n_half"] == pytest.approx(
        cal.report["parameters"]["gemm_n_half"]["value"]
    )
    assert profile.calibration["devices"] == ["a100-80gb"]
    assert profile.calibration["measurement_sets"] == [cal.measurement_set.slug]
    assert profile.calibration["fit_error"]["mape"] == pytest.approx(cal.mape)
    Calibration.objects.get(pk=cal.pk, profile=profile)
    assert profile in selectors.runtimes_visible_to(user)
    assert profile not in selectors.runtimes_visible_to(other_user)


def test_another_users_private_profile_is_an_unknown_runtime_in_their_scenario(
    user: Any, other_user: Any, builtin_catalog_rows: Any
) -> None:
    cal = msvc.calibration_run(owner=user, measurement_set=MeasurementSetFactory(owner=user))
    msvc.calibration_save_profile(calibration=cal, user=user, slug="my-vllm")
    doc = glitches_document()
    gpu = next(
        d for s in doc["systems"] for d in s["devices"] if d["device"] in ("a100-80gb", "a100-40gb")
    )
    gpu["device"] = "a100-80gb"
    gpu["runtime"] = "my-vllm"
    services.scenario_validate(doc, user=user)  # the owner may use it
    with pytest.raises(ScenarioValidationError, match="my-vllm"):
        services.scenario_validate(doc, user=other_user)


def test_publishing_a_fit_is_refused_to_non_staff(user: Any, builtin_catalog_rows: Any) -> None:
    cal = msvc.calibration_run(owner=user, measurement_set=MeasurementSetFactory(owner=user))
    with pytest.raises(PermissionDenied, match="only staff publish"):
        msvc.calibration_save_profile(calibration=cal, user=user, slug="pub", publish=True)
    assert not RuntimeProfile.objects.filter(slug="pub").exists()


def test_staff_publish_a_fit_to_the_catalog(staff: Any, builtin_catalog_rows: Any) -> None:
    cal = msvc.calibration_run(owner=staff, measurement_set=MeasurementSetFactory(owner=staff))
    profile = msvc.calibration_save_profile(
        calibration=cal, user=staff, slug="vllm-fp16-a100", publish=True
    )
    assert profile.visibility == "public"


def test_a_refused_fit_says_why_and_stores_nothing(user: Any, builtin_catalog_rows: Any) -> None:
    # two prefill points and nothing else cannot fix six end-to-end parameters
    text = E2E_HEADER + (
        "a100-80gb,llama2-7b,vllm,fp16,1,prefill,1024,1,,80.0,\n"
        "a100-80gb,llama2-7b,vllm,fp16,1,prefill,512,1,,41.0,\n"
    )
    mset = msvc.measurement_set_import(
        slug="thin", name="thin", text=text, stack="vllm-fp16", owner=user
    )
    with pytest.raises(ValidationError) as info:
        msvc.calibration_run(owner=user, measurement_set=mset)
    assert info.value.message_dict["fit"][0].startswith("fit refused: under-determined")
    assert not Calibration.objects.exists()


def test_a_set_too_large_for_an_interactive_fit_is_refused(
    user: Any, builtin_catalog_rows: Any, monkeypatch: Any
) -> None:
    mset = MeasurementSetFactory(owner=user)
    monkeypatch.setattr(msvc, "MAX_FIT_ROWS", 10)
    with pytest.raises(ValidationError, match="at most 10 rows"):
        msvc.calibration_run(owner=user, measurement_set=mset)


# --- admin ---------------------------------------------------------------------------------


def _admin_form(**overrides: Any) -> dict[str, Any]:
    from simulations.catalog.models import Device, LLMModel

    form = {
        "slug": "a100-ops",
        "name": "A100 operators",
        "device": Device.objects.get(slug="a100-80gb").pk,
        "llm": LLMModel.objects.get(slug="llama2-7b").pk,
        "runtime": RuntimeProfile.objects.get(slug="vllm-fp16").pk,
        "visibility": "public",
        "source": "",
        "notes": "",
    }
    form.update(overrides)
    return form


def test_staff_import_a_measurement_set_in_the_admin(
    client: Any, staff: Any, builtin_catalog_rows: Any
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(staff)
    upload = SimpleUploadedFile("a100.csv", A100_OPERATORS.read_bytes())
    response = client.post("/admin/simulations/measurementset/add/", _admin_form(csv_file=upload))
    assert response.status_code == 302, response.content.decode()[:2000]
    mset = MeasurementSet.objects.get()
    assert (mset.row_count, mset.owner, mset.visibility) == (62, staff, "public")
    assert mset.source.startswith("github microsoft/vidur")


def test_a_bad_admin_import_names_line_and_column_and_stores_nothing(
    client: Any, staff: Any, builtin_catalog_rows: Any
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(staff)
    upload = SimpleUploadedFile("bad.csv", _bad_operator_csv().encode())
    response = client.post("/admin/simulations/measurementset/add/", _admin_form(csv_file=upload))
    assert response.status_code == 200
    assert "line 5, column time_ms_per_layer: must be a number" in response.content.decode()
    assert not MeasurementSet.objects.exists()


def test_an_unknown_device_in_the_rows_is_named_by_line_and_column(
    user: Any, builtin_catalog_rows: Any
) -> None:
    text = E2E_HEADER + "made-up-gpu,llama2-7b,vllm,fp16,1,prefill,1024,1,,80.0,\n"
    with pytest.raises(ValidationError) as info:
        msvc.measurement_set_import(slug="b200", name="b200", text=text, stack="vllm-fp16")
    assert info.value.message_dict == {
        "text": ["line 2, column device: unknown device 'made-up-gpu'"]
    }


def test_a_stack_of_another_device_kind_is_refused(user: Any, builtin_catalog_rows: Any) -> None:
    text = E2E_HEADER + "a100-80gb,llama2-7b,,,1,prefill,1024,1,,80.0,\n"
    fpga_stack = RuntimeProfile.objects.filter(device_kind="fpga").first()
    with pytest.raises(ValidationError) as info:
        msvc.measurement_set_import(slug="x", name="x", text=text, stack=fpga_stack.slug)
    assert info.value.message_dict["stack"] == [
        f"{fpga_stack.slug} runs on fpga devices; a100-80gb is a gpu"
    ]
    assert not MeasurementSet.objects.exists()
