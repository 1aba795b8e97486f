"""The admin: staff edit devices with memory tiers inline, import models, upload traces."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from simulations.catalog.models import Device, LLMModel
from simulations.choices import RunStatus
from simulations.runs.models import SimulationRun
from simulations.scenarios.models import Trace
from tests.core.test_hf_config import LLAMA32_3B
from tests.factories import SimulationRunFactory
from tests.simulations.test_services import MINI_TRACE

pytestmark = pytest.mark.django_db


def device_form(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "slug": "l4",
        "name": "NVIDIA L4",
        "kind": "gpu",
        "vendor": "NVIDIA",
        "tdp_w": "72",
        "idle_w": "16",
        "sources": json.dumps({"tdp_w": "NVIDIA L4 datasheet", "idle_w": "assumed"}),
        "notes": "",
        "memory_tiers-TOTAL_FORMS": "1",
        "memory_tiers-INITIAL_FORMS": "0",
        "memory_tiers-MIN_NUM_FORMS": "0",
        "memory_tiers-MAX_NUM_FORMS": "1000",
        "memory_tiers-0-order": "0",
        "memory_tiers-0-kind": "gddr",
        "memory_tiers-0-capacity_gb": "24",
        "memory_tiers-0-bw_gbps": "300",
    }
    data.update(overrides)
    return data


@pytest.fixture
def admin_client(client: Any, staff: Any) -> Any:
    client.force_login(staff)
    return client


def test_staff_add_a_device_with_its_memory_tiers(admin_client: Any) -> None:
    response = admin_client.post("/admin/simulations/device/add/", device_form())
    assert response.status_code == 302, response.content.decode()[:2000]
    device = Device.objects.get(slug="l4")
    assert [(t.kind, t.capacity_gb, t.bw_gbps) for t in device.memory_tiers.all()] == [
        ("gddr", 24.0, 300.0)
    ]


def test_staff_edit_a_seeded_device(admin_client: Any, builtin_catalog_rows: Any) -> None:
    device = Device.objects.get(slug="a100-80gb")
    page = admin_client.get(f"/admin/simulations/device/{device.pk}/change/")
    assert page.status_code == 200
    assert b"memory_tiers-0-capacity_gb" in page.content


def form_errors(response: Any) -> dict[str, str]:
    """Errors of the device form and its memory-tier inline, by field name."""
    errors = {k: " ".join(v) for k, v in response.context["adminform"].form.errors.items()}
    formset = response.context["inline_admin_formsets"][0].formset
    for form_errors_ in formset.errors:
        errors.update({f"memory.{k}": " ".join(v) for k, v in form_errors_.items()})
    if formset.non_form_errors():
        errors["memory"] = " ".join(formset.non_form_errors())
    return errors


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"tdp_w": "nan"}, "tdp_w", "Enter a number"),
        ({"tdp_w": "inf"}, "tdp_w", "Enter a number"),
        ({"tdp_w": "1e16"}, "tdp_w", "less than or equal to 1000000000000000"),
        ({"idle_w": "500"}, "idle_w", "Must not exceed the TDP"),
        ({"price_usd": "-5"}, "price_usd", "greater than zero"),
        ({"memory_tiers-0-bw_gbps": "-1"}, "memory.bw_gbps", "greater than zero"),
        ({"memory_tiers-0-capacity_gb": "0"}, "memory.capacity_gb", "greater than zero"),
        ({"memory_tiers-TOTAL_FORMS": "0"}, "memory", "at least one memory tier"),
        ({"host_link_kind": "pcie"}, "host_link_bw_gbps", "needs its bandwidth"),
        ({"slug": "Not A Slug"}, "slug", "lowercase"),
        ({"sources": json.dumps({"tdp_w": ""})}, "sources", "non-empty source"),
    ],
)
def test_invalid_devices_are_rejected_and_nothing_is_stored(
    admin_client: Any, overrides: dict[str, str], field: str, message: str
) -> None:
    response = admin_client.post("/admin/simulations/device/add/", device_form(**overrides))
    assert response.status_code == 200
    errors = form_errors(response)
    assert field in errors, errors
    assert message in errors[field]
    assert not Device.objects.exists()


def test_non_staff_cannot_reach_the_admin(client: Any, user: Any) -> None:
    client.force_login(user)
    assert client.get("/admin/simulations/device/").status_code == 302


def test_staff_import_a_model_from_a_hugging_face_config(admin_client: Any) -> None:
    url = "/admin/simulations/llmmodel/import-hf/"
    assert admin_client.get(url).status_code == 200
    upload = SimpleUploadedFile("config.json", json.dumps(LLAMA32_3B).encode())
    response = admin_client.post(
        url,
        {"slug": "llama-3b-imported", "name": "Llama 3B", "origin": "meta-llama/Llama-3.2-3B"},
        files=None,
    )
    assert response.status_code == 200  # no config given yet
    response = admin_client.post(
        url,
        {
            "slug": "llama-3b-imported",
            "name": "Llama 3B",
            "origin": "meta-llama/Llama-3.2-3B",
            "config_file": upload,
        },
    )
    assert response.status_code == 302
    model = LLMModel.objects.get(slug="llama-3b-imported")
    assert (model.n_layers, model.n_kv_heads, model.tied_embeddings) == (28, 8, True)
    assert model.sources["n_layers"] == "meta-llama/Llama-3.2-3B config.json: num_hidden_layers"


def test_a_bad_config_is_reported_on_the_import_page(admin_client: Any) -> None:
    response = admin_client.post(
        "/admin/simulations/llmmodel/import-hf/",
        {"slug": "x", "name": "x", "config_text": json.dumps({"model_type": "t5"})},
    )
    assert response.status_code == 200
    assert "unsupported model type" in response.content.decode()
    assert not LLMModel.objects.exists()


def test_staff_upload_a_trace(admin_client: Any, staff: Any) -> None:
    upload = SimpleUploadedFile("mini.csv", MINI_TRACE.encode())
    response = admin_client.post(
        "/admin/simulations/trace/add/",
        {"slug": "mini", "name": "Mini", "source": "test", "csv_file": upload},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    trace = Trace.objects.get(slug="mini")
    assert trace.request_count == 3
    assert trace.owner == staff


def test_a_bad_trace_upload_names_the_line(admin_client: Any) -> None:
    upload = SimpleUploadedFile("bad.csv", MINI_TRACE.replace("879", "x").encode())
    response = admin_client.post(
        "/admin/simulations/trace/add/", {"slug": "bad", "name": "Bad", "csv_file": upload}
    )
    assert response.status_code == 200
    assert "trace line 4" in response.content.decode()
    assert not Trace.objects.exists()


def test_runs_are_read_only_but_can_be_cancelled(admin_client: Any) -> None:
    run = SimulationRunFactory()
    page = admin_client.get(f"/admin/simulations/simulationrun/{run.pk}/change/")
    assert page.status_code == 200
    assert b'name="status"' not in page.content
    response = admin_client.post(
        "/admin/simulations/simulationrun/",
        {"action": "cancel_runs", "_selected_action": [run.pk]},
    )
    assert response.status_code == 302
    assert SimulationRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_a_scenario_saved_in_the_admin_protects_its_trace(
    admin_client: Any, user: Any, builtin_catalog_rows: Any
) -> None:
    from simulations.scenarios import services
    from simulations.scenarios.models import Scenario, TraceReference
    from tests.frontend.test_trace_pages import traced_document

    services.trace_import(slug="mini", name="mini", text=MINI_TRACE, owner=user)
    response = admin_client.post(
        "/admin/simulations/scenario/add/",
        {"owner": str(user.pk), "document": json.dumps(traced_document("mini"))},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    scenario = Scenario.objects.get()
    assert list(TraceReference.objects.values_list("trace__slug", "scenario_id")) == [
        ("mini", scenario.pk)
    ]


def test_a_devices_page_renders_its_familys_params_from_the_schema(
    admin_client: Any, builtin_catalog_rows: Any
) -> None:
    device = Device.objects.get(slug="u280")
    page = admin_client.get(f"/admin/simulations/device/{device.pk}/change/")
    form = page.context["adminform"].form
    clock = form.fields["param:fpga:clock_mhz"]
    assert clock.label == "Clock (MHz)" and "design clock" in clock.help_text
    assert form["param:fpga:clock_mhz"].value() == 225
    assert not any(name.startswith("param:npu:") for name in form.fields)  # its family only
    assert b"FPGA parameters" in page.content


def test_staff_add_an_fpga_with_its_params_and_bad_ones_are_named(admin_client: Any) -> None:
    fpga = device_form(slug="my-fpga", kind="fpga", **{"param:fpga:clock_mhz": "300"})
    response = admin_client.post("/admin/simulations/device/add/", fpga)
    assert response.status_code == 302, form_errors(response)
    assert Device.objects.get(slug="my-fpga").params == {"clock_mhz": 300.0}
    for field, data in (
        ("param:fpga:clock_mhz", {"param:fpga:clock_mhz": "-3"}),
        ("param:fpga:clock_mhz", {}),  # required for FPGAs
        ("param:cpu:cores", {"param:fpga:clock_mhz": "300", "param:cpu:cores": "8"}),
    ):
        response = admin_client.post(
            "/admin/simulations/device/add/", device_form(slug="bad-fpga", kind="fpga", **data)
        )
        assert response.status_code == 200
        assert field in form_errors(response), form_errors(response)
    assert not Device.objects.filter(slug="bad-fpga").exists()


def test_the_device_form_says_idle_power_0_means_unknown(admin_client: Any) -> None:
    page = admin_client.get("/admin/simulations/device/add/").content.decode()
    assert "0 if unknown" in page
