"""The scenario builder: form ↔ document, errors beside their fields, nothing stored on error."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from django.http import QueryDict

from frontend import builder
from simulations.runs.models import SimulationRun
from simulations.scenarios import services
from simulations.scenarios.models import Scenario

from .conftest import glitches_document

pytestmark = pytest.mark.django_db


def form_of(state: builder.BuilderState) -> dict[str, str]:
    """The POST data a browser sends for ``state`` (what the builder template renders)."""
    wl = state.workload
    data = {
        "name": state.name,
        "description": state.description,
        "model": state.model,
        "wl-source": wl.source,
        "wl-requests": wl.requests,
        "wl-arrival": wl.arrival,
        "wl-rate": wl.rate,
        "wl-trace": wl.trace,
        "wl-time-scale": wl.time_scale,
        "wl-seed": wl.seed,
        "baseline": str(state.baseline),
        "sys-count": str(len(state.systems)),
    }
    for prefix, lf in (("wl-in", wl.input), ("wl-out", wl.output)):
        data[f"{prefix}-dist"] = lf.dist
        for k in ("value", "low", "high", "median", "sigma"):
            data[f"{prefix}-{k}"] = getattr(lf, k)
    for key, _, _ in builder.SLO_FIELDS:
        data[f"slo-{key}"] = state.slo.get(key, "")
    for key, _, _ in builder.COST_FIELDS:
        data[f"costs-{key}"] = state.costs.get(key, "")
    data["costs-cloud"] = state.cloud_prices
    if state.capacity_on:
        data["capacity-on"] = "on"
    for key, _, _ in builder.CAPACITY_FIELDS:
        data[f"capacity-{key}"] = state.capacity.get(key, "")
    for i, s in enumerate(state.systems):
        data[f"sys-{i}-name"] = s.name
        data[f"sys-{i}-policy"] = s.policy
        data[f"sys-{i}-dev-count"] = str(len(s.devices))
        for opt, text in s.options.get(s.policy, {}).items():
            data[f"sys-{i}-opt-{s.policy}-{opt}"] = text
        for j, d in enumerate(s.devices):
            for k in ("device", "count", "role", "runtime", "price_usd", "tdp_w"):
                data[f"sys-{i}-dev-{j}-{k}"] = getattr(d, k)
    return data


def test_a_document_survives_the_form_round_trip(seeded: Any) -> None:
    doc = glitches_document()
    state = builder.state_from_document(doc)
    again = builder.state_from_post(QueryDict(mutable=True) | form_of(state))
    out = again.to_document()
    assert out["systems"] == doc["systems"]
    assert out["workload"] == doc["workload"]
    assert out["slo"] == doc["slo"]
    assert (out["name"], out["model"]) == (doc["name"], doc["model"])


def test_the_baseline_goes_first_in_the_document() -> None:
    state = builder.state_from_document(glitches_document())
    state.baseline = 1
    doc = state.to_document()
    assert [s["name"] for s in doc["systems"]] == ["8xA100", "1xA100+7xU280"]
    assert state.order == [1, 0]


def test_option_texts_become_typed_values() -> None:
    state = builder.state_from_document(glitches_document())
    state.systems[0].options["glitches"] = {"prefetch_ratio": "8", "gpu_decode": "false"}
    opts = state.to_document()["systems"][0]["options"]
    assert opts == {"prefetch_ratio": 8, "gpu_decode": False}


def test_text_where_a_number_belongs_reaches_the_validator_as_text() -> None:
    state = builder.state_from_document(glitches_document())
    state.systems[1].devices[0].count = "eight"
    assert state.to_document()["systems"][1]["devices"][0]["count"] == "eight"


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ("name", ("form", "name")),
        ("model", ("form", "model")),
        ("workload.requests", ("form", "wl-requests")),
        ("workload.input_tokens.high", ("form", "wl-in-high")),
        ("workload.output_tokens", ("form", "wl-out-value")),
        ("workload.arrival.rate_per_s", ("form", "wl-rate")),
        ("slo.ttft_p90_ms", ("form", "slo-ttft_p90_ms")),
        ("systems[0].name", ("system", 1, "name")),
        ("systems[1].options.prefetch_ratio", ("system", 0, "opt-prefetch_ratio")),
        ("systems[1].devices[1].count", ("device", 0, 1, "count")),
        ("systems[0].devices", ("system", 1, "devices")),
        ("systems[1].devices[0].price_usd", ("device", 0, 0, "price_usd")),
        ("systems[1].devices[0].tdp_w", ("device", 0, 0, "tdp_w")),
    ],
)
def test_json_paths_map_to_the_fields_that_show_them(path: str, where: tuple) -> None:
    state = builder.state_from_document(glitches_document())
    state.baseline = 1
    state.to_document()
    block_of = {doc_i: block for block, doc_i in enumerate(state.order)}
    assert builder.field_for_path(path, block_of, state) == where


def test_add_and_remove_buttons_edit_the_form() -> None:
    state = builder.state_from_document(glitches_document())
    assert builder.apply_action(state, "add_device-1")
    assert len(state.systems[1].devices) == 2
    assert builder.apply_action(state, "add_system")
    assert len(state.systems) == 3
    state.baseline = 2
    assert builder.apply_action(state, "remove_system-0")
    assert len(state.systems) == 2 and state.baseline == 1
    assert not builder.apply_action(state, "save")


def test_the_builder_saves_and_runs_a_valid_scenario(alice_client: Any, seeded: Any) -> None:
    data = form_of(builder.state_from_document(glitches_document()))
    data["action"] = "save_run"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    assert response["Location"] == f"/runs/{run.pk}/"
    assert run.document == glitches_document()


def test_invalid_input_shows_errors_beside_the_fields_and_stores_nothing(
    alice_client: Any, seeded: Any
) -> None:
    state = builder.state_from_document(glitches_document())
    state.systems[0].devices[1].count = "0"
    state.systems[1].devices[0].device = "no-such-gpu"
    state.systems[0].options["glitches"] = {"prefetch_ratio": "1000"}
    state.workload.requests = "-3"
    data = form_of(state)
    data["action"] = "save_run"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    html = response.content.decode()
    assert Scenario.objects.count() == 0
    assert SimulationRun.objects.count() == 0

    def errors_after(marker: str) -> str:
        # the field's cell, to its end (a device select lists the whole catalog first)
        tail = html.split(marker, 1)[1]
        return tail[: tail.index("</td>")]

    count_cell = errors_after('name="sys-0-dev-1-count"')
    assert "must be at least 1" in count_cell
    device_cell = errors_after('name="sys-1-dev-0-device"')
    assert "unknown device &#x27;no-such-gpu&#x27;" in device_cell
    option = html.split('id="f-sys-0-opt-glitches-prefetch_ratio"', 1)[1][:1200]
    assert "must be at most 64" in option
    requests = html.split('id="f-wl-requests"', 1)[1][:600]
    assert "must be at least 1" in requests
    assert re.search(r"\d+ problems? — nothing was saved", html)


def test_the_example_prefills_the_builder(alice_client: Any, seeded: Any) -> None:
    html = alice_client.get("/scenarios/new/?example=glitches-vs-8xa100").content.decode()
    assert 'value="1xA100+7xU280"' in html
    assert 'name="sys-0-dev-1-count" value="7"' in html
    assert '<option value="u280" selected>' in html


def test_a_trace_example_is_rewritten_to_a_stored_trace(alice_client: Any, seeded: Any) -> None:
    from simulations.scenarios.models import Trace

    html = alice_client.get("/scenarios/new/?example=glitches-azure-conv-poisson").content.decode()
    trace = Trace.objects.get()
    assert trace.slug == "azure-conv-2023"
    assert trace.request_count > 1000
    assert f'<option value="{trace.slug}" selected>' in html


def test_another_users_scenario_cannot_be_edited(
    client: Any, other_user: Any, glitches_run: Any
) -> None:
    client.force_login(other_user)
    pk = glitches_run.scenario_id
    assert client.get(f"/scenarios/{pk}/edit/").status_code == 404
    assert client.get(f"/scenarios/{pk}/").status_code == 404
    assert client.post(f"/scenarios/{pk}/run/").status_code == 404


def test_a_saved_workload_can_stand_in_for_the_custom_one(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    from simulations.scenarios import services

    workload = services.workload_create(
        owner=user,
        name="short chats",
        requests=30,
        input_tokens={"dist": "uniform", "low": 100, "high": 300},
        output_tokens=64,
        arrival_kind="poisson",
        rate_per_s=0.5,
        seed=9,
    )
    data = form_of(builder.state_from_document(glitches_document()))
    data.update({"wl-source": str(workload.pk), "wl-requests": "not used", "action": "save"})
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 302
    assert Scenario.objects.get().document["workload"] == workload.to_document()


def test_someone_elses_private_workload_cannot_be_used(
    alice_client: Any, other_user: Any, seeded: Any
) -> None:
    from simulations.scenarios import services

    theirs = services.workload_create(
        owner=other_user, name="private", requests=5, input_tokens=10, output_tokens=10
    )
    data = form_of(builder.state_from_document(glitches_document()))
    data.update({"wl-source": str(theirs.pk), "action": "save"})
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    assert "choose a saved workload you can read" in response.content.decode()
    assert not Scenario.objects.exists()


# --- quoted prices (``price_usd`` per device entry) ---------------------------------------


def quoted_document() -> dict[str, Any]:
    """The GLITCHES comparison with a quote on the U280s (integer) and the A100s (float);
    the GLITCHES system's A100 keeps the catalog price."""
    doc = glitches_document()
    doc["systems"][0]["devices"][1]["price_usd"] = 6500
    doc["systems"][1]["devices"][0]["price_usd"] = 15999.5
    return doc


def cell_after(html: str, marker: str) -> str:
    """The table cell of the builder's HTML that holds ``marker`` (to its ``</td>``)."""
    tail = html.split(marker, 1)[1]
    return tail[: tail.index("</td>")]


def test_quoted_prices_survive_the_form_round_trip() -> None:
    doc = quoted_document()
    state = builder.state_from_document(doc)
    assert state.systems[0].devices[1].price_usd == "6500"
    assert state.systems[1].devices[0].price_usd == "15999.5"
    assert state.systems[0].devices[0].price_usd == ""
    out = builder.state_from_post(QueryDict(mutable=True) | form_of(state)).to_document()
    assert out["systems"] == doc["systems"]
    assert out["systems"][0]["devices"][1]["price_usd"] == 6500
    assert isinstance(out["systems"][0]["devices"][1]["price_usd"], int)


def test_an_empty_price_field_puts_no_price_in_the_document() -> None:
    state = builder.state_from_document(quoted_document())
    state.systems[0].devices[1].price_usd = ""
    state.systems[1].devices[0].price_usd = "   "
    out = builder.state_from_post(QueryDict(mutable=True) | form_of(state)).to_document()
    assert all("price_usd" not in d for s in out["systems"] for d in s["devices"])


def test_a_price_that_is_not_a_finite_number_reaches_the_validator_as_such() -> None:
    state = builder.state_from_document(glitches_document())
    row = state.systems[1].devices[0]
    for text, value in (("$3,500", "$3,500"), ("-5", -5), ("1e9", 1e9), ("4000.0", 4000.0)):
        row.price_usd = text
        assert state.to_document()["systems"][1]["devices"][0]["price_usd"] == value
    row.price_usd = "NaN"
    assert math.isnan(state.to_document()["systems"][1]["devices"][0]["price_usd"])
    row.price_usd = "-Infinity"
    assert state.to_document()["systems"][1]["devices"][0]["price_usd"] == -math.inf


def test_editing_a_quoted_scenario_shows_and_keeps_its_quotes(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    scenario = services.scenario_create(owner=user, document=quoted_document())
    html = alice_client.get(f"/scenarios/{scenario.pk}/edit/").content.decode()
    assert 'name="sys-0-dev-1-price_usd" value="6500"' in html
    assert 'name="sys-1-dev-0-price_usd" value="15999.5"' in html
    # an empty field says what it stands for: the row's catalog price
    assert 'name="sys-0-dev-0-price_usd" value="" placeholder="catalog: 17000"' in html

    data = form_of(builder.state_from_document(scenario.document))
    data["action"] = "save"
    response = alice_client.post(f"/scenarios/{scenario.pk}/edit/", data)
    assert response.status_code == 302
    scenario.refresh_from_db()
    assert scenario.document == quoted_document()


def test_clearing_a_quote_in_the_builder_removes_it(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    scenario = services.scenario_create(owner=user, document=quoted_document())
    data = form_of(builder.state_from_document(scenario.document))
    data.update({"sys-0-dev-1-price_usd": "", "action": "save"})
    assert alice_client.post(f"/scenarios/{scenario.pk}/edit/", data).status_code == 302
    scenario.refresh_from_db()
    assert "price_usd" not in scenario.document["systems"][0]["devices"][1]
    assert scenario.document["systems"][1]["devices"][0]["price_usd"] == 15999.5


def test_an_editing_button_keeps_the_typed_prices(alice_client: Any, seeded: Any) -> None:
    data = form_of(builder.state_from_document(quoted_document()))
    data.update({"sys-1-dev-0-price_usd": "not yet", "action": "remove_device-0-0"})
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="sys-0-dev-0-price_usd" value="6500"' in html
    assert 'name="sys-1-dev-0-price_usd" value="not yet"' in html
    assert not Scenario.objects.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NaN", "Price (USD) must be finite"),
        ("inf", "Price (USD) must be finite"),
        ("-5", "Price (USD) must be positive"),
        ("0", "Price (USD) must be positive"),
        ("100000001", "Price (USD) must be at most 1e+08"),
        ("3,500", "Price (USD) must be a number"),
    ],
)
def test_an_invalid_price_is_shown_on_its_rows_field_and_nothing_is_stored(
    alice_client: Any, user: Any, seeded: Any, text: str, message: str
) -> None:
    scenario = services.scenario_create(owner=user, document=quoted_document())
    before = (scenario.document, scenario.updated_at)
    state = builder.state_from_document(scenario.document)
    state.name = "renamed"
    state.systems[1].devices[0].price_usd = text
    data = form_of(state)
    data["action"] = "save_run"
    response = alice_client.post(f"/scenarios/{scenario.pk}/edit/", data)
    assert response.status_code == 400
    html = response.content.decode()
    cell = cell_after(html, 'name="sys-1-dev-0-price_usd"')
    assert message in cell
    assert 'id="f-sys-1-dev-0-price_usd-errors"' in cell
    assert f'value="{text}"' in cell  # what was typed is there to correct
    assert re.search(r'<td class="has-error">\s*<input id="f-sys-1-dev-0-price_usd"', html)
    # only that field: the other rows' price cells show no error
    for other in ("sys-0-dev-0", "sys-0-dev-1"):
        assert "errorlist" not in cell_after(html, f'name="{other}-price_usd"')
    assert re.search(r"1 problem — nothing was saved", html)
    scenario.refresh_from_db()
    assert (scenario.document, scenario.updated_at) == before
    assert Scenario.objects.count() == 1
    assert not SimulationRun.objects.exists()


def test_a_new_scenario_with_a_bad_price_is_not_stored(alice_client: Any, seeded: Any) -> None:
    state = builder.state_from_document(glitches_document())
    state.systems[0].devices[0].price_usd = "-1"
    data = form_of(state)
    data["action"] = "save"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    assert "Price (USD) must be positive" in cell_after(
        response.content.decode(), 'name="sys-0-dev-0-price_usd"'
    )
    assert not Scenario.objects.exists()


# --- quoted powers (``tdp_w`` per device entry) -------------------------------------------

UNPOWERED = "a100-unpowered"


@pytest.fixture
def unpowered(seeded: Any) -> Any:
    """The A100 80GB stored again without a published power, as the catalog holds TPUs."""
    from dataclasses import replace

    from simulations.catalog.services import device_save
    from simulations.core.catalog import builtin_catalog

    a100 = builtin_catalog().devices["a100-80gb"]
    return device_save(replace(a100, slug=UNPOWERED, name="A100 without power", tdp_w=None))


def unpowered_document(**entry: Any) -> dict[str, Any]:
    """The GLITCHES comparison whose 8×A100 system runs on the unpowered copy."""
    doc = glitches_document()
    doc["systems"][1]["devices"][0].update(device=UNPOWERED, **entry)
    return doc


def test_quoted_powers_survive_the_form_round_trip() -> None:
    doc = glitches_document()
    doc["systems"][0]["devices"][0]["tdp_w"] = 275
    doc["systems"][1]["devices"][0]["tdp_w"] = 312.5
    state = builder.state_from_document(doc)
    assert state.systems[0].devices[0].tdp_w == "275"
    assert state.systems[0].devices[1].tdp_w == ""
    out = builder.state_from_post(QueryDict(mutable=True) | form_of(state)).to_document()
    assert out["systems"] == doc["systems"]
    assert "tdp_w" not in out["systems"][0]["devices"][1]


def test_the_builder_posts_the_power_field_as_the_placements_tdp_w(
    alice_client: Any, unpowered: Any
) -> None:
    state = builder.state_from_document(unpowered_document())
    state.systems[1].devices[0].tdp_w = "300"
    data = form_of(state)
    assert data["sys-1-dev-0-tdp_w"] == "300"
    data["action"] = "save"
    assert alice_client.post("/scenarios/new/", data).status_code == 302
    assert Scenario.objects.get().document == unpowered_document(tdp_w=300)


def test_the_power_field_says_what_an_empty_one_stands_for(
    alice_client: Any, user: Any, unpowered: Any
) -> None:
    scenario = services.scenario_create(owner=user, document=unpowered_document(tdp_w=300))
    html = alice_client.get(f"/scenarios/{scenario.pk}/edit/").content.decode()
    assert 'name="sys-1-dev-0-tdp_w" value="300"' in html
    # an empty field of a device with a catalog power shows that power (the A100: 300 W)
    assert 'name="sys-0-dev-0-tdp_w" value="" placeholder="catalog: 300"' in html
    scenario.document["systems"][1]["devices"][0].pop("tdp_w")
    state = builder.state_from_document(scenario.document)
    data = form_of(state)
    data["action"] = "save"
    response = alice_client.post(f"/scenarios/{scenario.pk}/edit/", data)
    assert 'placeholder="not published: required"' in response.content.decode()


def test_a_device_without_published_power_and_no_power_is_refused_on_its_field(
    alice_client: Any, unpowered: Any
) -> None:
    data = form_of(builder.state_from_document(unpowered_document()))
    data["action"] = "save_run"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    html = response.content.decode()
    cell = cell_after(html, 'name="sys-1-dev-0-tdp_w"')
    assert f"{UNPOWERED} has no published power (see its source)" in cell
    assert 'id="f-sys-1-dev-0-tdp_w-errors"' in cell
    assert re.search(r'<td class="has-error">\s*<input id="f-sys-1-dev-0-tdp_w"', html)
    assert not Scenario.objects.exists() and not SimulationRun.objects.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NaN", "Power (W) must be finite"),
        ("-5", "Power (W) must be positive"),
        ("0", "Power (W) must be positive"),
        ("2e6", "Power (W) must be at most 1e+06"),
        ("300 W", "Power (W) must be a number"),
    ],
)
def test_an_invalid_power_is_shown_on_its_rows_field(
    alice_client: Any, unpowered: Any, text: str, message: str
) -> None:
    state = builder.state_from_document(unpowered_document())
    state.systems[1].devices[0].tdp_w = text
    data = form_of(state)
    data["action"] = "save"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    assert message in cell_after(response.content.decode(), 'name="sys-1-dev-0-tdp_w"')
    assert not Scenario.objects.exists()


def tp_document() -> dict[str, Any]:
    """Llama-3.1-70B on 4×H100 TP4 over NVLink 4 (a fixed-length workload: no trace)."""
    return {
        "name": "70B TP4",
        "model": "llama3.1-70b",
        "workload": {
            "requests": 10,
            "input_tokens": 128,
            "output_tokens": 16,
            "arrival": {"kind": "closed"},
            "seed": 0,
        },
        "systems": [
            {
                "name": "4xH100 TP4",
                "policy": "homogeneous",
                "devices": [{"device": "h100-sxm", "count": 4, "runtime": "vllm-fp16"}],
                "options": {"max_batch": 64, "tensor_parallel": 4, "link": "nvlink4"},
            }
        ],
    }


def test_the_builder_offers_the_catalog_links_and_keeps_the_chosen_one(
    alice_client: Any, seeded: Any
) -> None:
    state = builder.state_from_document(tp_document())
    data = form_of(state)
    data["action"] = "validate"
    html = alice_client.post("/scenarios/new/", data).content.decode()
    select = html.split('id="f-sys-0-opt-homogeneous-link"', 1)[1].split("</select>", 1)[0]
    assert '<option value="nvlink4" selected>' in select
    assert "NVLink 4 with NVSwitch (H100/H200 SXM, HGX H100) (nvlink4, 450 GB/s)" in select
    assert "(pcie4-x16, 31.5 GB/s)" in select
    assert '<option value="">— none —</option>' in select
    tp = html.split('id="f-sys-0-opt-homogeneous-tensor_parallel"', 1)[1][:300]
    assert 'value="4"' in tp
    assert 'id="f-sys-0-opt-homogeneous-pipeline_parallel"' in html
    assert 'id="f-sys-0-opt-homogeneous-micro_batches"' in html


def test_parallel_options_reach_the_document_as_numbers_and_a_slug() -> None:
    state = builder.state_from_document(tp_document())
    again = builder.state_from_post(QueryDict(mutable=True) | form_of(state))
    assert again.to_document()["systems"][0]["options"] == {
        "max_batch": 64,
        "tensor_parallel": 4,
        "link": "nvlink4",
    }


@pytest.mark.parametrize(
    ("option", "text", "words"),
    [
        ("tensor_parallel", "3", "does not divide"),
        ("pipeline_parallel", "0", "must be at least 1"),
        ("link", "", "name the interconnect"),
    ],
)
def test_a_bad_parallel_option_is_shown_on_its_field_and_nothing_is_stored(
    alice_client: Any, seeded: Any, option: str, text: str, words: str
) -> None:
    state = builder.state_from_document(tp_document())
    state.systems[0].options["homogeneous"][option] = text
    data = form_of(state)
    data["action"] = "save_run"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    html = response.content.decode()
    field_html = html.split(f'id="f-sys-0-opt-homogeneous-{option}"', 1)[1][:2500]
    field_html = field_html.split('<div class="field', 1)[0]
    assert words in field_html
    assert Scenario.objects.count() == 0
    assert SimulationRun.objects.count() == 0


def test_a_new_system_in_the_builder_starts_with_continuous_batching() -> None:
    state = builder.BuilderState()
    assert builder.apply_action(state, "add_system")
    for block in state.systems:
        assert block.option_text("homogeneous", "max_batch") == "256"
        assert block.option_text("homogeneous", "chunked_prefill") == "true"
    state.model = "llama2-7b"
    doc = state.to_document()
    assert doc["systems"][1]["options"] == {
        "max_batch": 256,
        "max_batched_tokens": 2048,
        "chunked_prefill": True,
        "prefix_caching": True,
    }


def test_a_loaded_scenario_keeps_its_systems_options_in_the_builder() -> None:
    state = builder.state_from_document(glitches_document())
    homogeneous = [b for b in state.systems if b.policy == "homogeneous"]
    assert homogeneous
    for block in homogeneous:
        assert block.option_text("homogeneous", "chunked_prefill") == ""


def test_costs_and_capacity_survive_the_form_round_trip(seeded: Any) -> None:
    doc = glitches_document()
    doc["costs"] = {
        "electricity_usd_per_kwh": 0.12,
        "amortisation_years": 4,
        "pue": 1.3,
        "cloud_usd_per_device_hour": {"a100-80gb": "specialty-a100-80gb-2026-05@low", "u280": 1.5},
    }
    doc["capacity"] = {"requests": 50, "steps": 4}
    state = builder.state_from_document(doc)
    again = builder.state_from_post(QueryDict(mutable=True) | form_of(state))
    out = again.to_document()
    assert out["costs"] == doc["costs"]
    assert out["capacity"] == doc["capacity"]
    plain = builder.state_from_post(
        QueryDict(mutable=True) | form_of(builder.state_from_document(glitches_document()))
    ).to_document()
    assert "costs" not in plain and "capacity" not in plain


def test_the_builder_saves_costs_and_shows_a_bad_cloud_price_beside_its_field(
    alice_client: Any, seeded: Any
) -> None:
    state = builder.state_from_document(glitches_document())
    state.costs = {"electricity_usd_per_kwh": "0.1", "amortisation_years": "3"}
    state.cloud_prices = "a100-80gb=aws-p4d-24xlarge"  # an offer for another device
    data = form_of(state)
    data["action"] = "save"
    response = alice_client.post("/scenarios/new/", data)
    assert response.status_code == 400
    field = response.content.decode().split('id="f-costs-cloud"', 1)[1][:1500]
    assert "prices a100-40gb, not a100-80gb" in field
    assert not Scenario.objects.exists()
    state.cloud_prices = "a100-80gb=specialty-a100-80gb-2026-05@low"
    data = form_of(state)
    data["action"] = "save"
    assert alice_client.post("/scenarios/new/", data).status_code == 302
    stored = Scenario.objects.get().document["costs"]
    assert stored == {
        "electricity_usd_per_kwh": 0.1,
        "amortisation_years": 3,
        "cloud_usd_per_device_hour": {"a100-80gb": "specialty-a100-80gb-2026-05@low"},
    }
