"""Capacity plan pages: submit a plan document, errors by JSON path with nothing stored, and
a finished plan's recommendation and Pareto front."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import timezone

from simulations.choices import RunStatus
from simulations.plans.models import Plan
from tests.core.planner.helpers import small_doc

from .test_run_pages import figures

pytestmark = pytest.mark.django_db


def test_a_plan_document_is_stored_and_queued(alice_client: Any, seeded: Any) -> None:
    response = alice_client.post("/plans/", {"document": json.dumps(small_doc())})
    assert response.status_code == 302
    plan = Plan.objects.get()
    assert response["Location"] == f"/plans/{plan.pk}/"
    html = alice_client.get(response["Location"]).content.decode()
    assert 'id="run-progress"' in html and "Queued" in html


def test_a_bad_plan_names_the_path_and_stores_nothing(alice_client: Any, seeded: Any) -> None:
    doc = small_doc()
    doc["space"]["devices"][0]["device"] = "no-such-gpu"
    response = alice_client.post("/plans/", {"document": json.dumps(doc)})
    assert response.status_code == 400
    assert "space.devices[0].device" in response.content.decode()
    assert not Plan.objects.exists()
    response = alice_client.post("/plans/", {"document": "{not json"})
    assert response.status_code == 400 and "not valid JSON" in response.content.decode()


def test_a_finished_plan_shows_its_recommendation_and_pareto_front(
    alice_client: Any, user: Any, seeded: Any, other_user: Any, client: Any
) -> None:
    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan, plan_search
    from simulations.plans import services

    result = plan_search(parse_plan(small_doc(), builtin_catalog()))
    plan = services.plan_create(spec=small_doc(), owner=user)
    Plan.objects.filter(pk=plan.pk).update(
        status=RunStatus.SUCCEEDED, result=result, progress=100, finished_at=timezone.now()
    )
    html = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    assert result["recommendation"]["description"] in html
    # Each device type's price is shown with where it came from.
    assert "GLITCHES Table II (A100 cost $17,000)" in html
    pareto = figures(html)["pareto"]["data"]
    plotted = sum(len(t["x"]) for t in pareto if t["name"] != "Pareto front")
    assert plotted == len(result["evaluated"])
    met = next(t for t in pareto if t["name"] == "meets the SLO")
    assert len(met["x"]) == sum(1 for e in result["evaluated"] if e["feasible"])
    front = next(t for t in pareto if t["name"] == "Pareto front")
    assert front["x"] == [p["capex_usd"] for p in result["pareto"]["capex_vs_throughput"]]
    response = alice_client.post(f"/plans/{plan.pk}/scenario/")
    assert response.status_code == 302 and "/scenarios/" in response["Location"]
    client.force_login(other_user)
    assert client.get(f"/plans/{plan.pk}/").status_code == 404


def test_the_plan_headline_gives_the_recommendations_p90_latencies(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan, plan_search
    from simulations.plans import services

    result = plan_search(parse_plan(small_doc(), builtin_catalog()))
    plan = services.plan_create(spec=small_doc(), owner=user)
    Plan.objects.filter(pk=plan.pk).update(
        status=RunStatus.SUCCEEDED, result=result, progress=100, finished_at=timezone.now()
    )
    html = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    lead = html.split('<p class="lead">', 1)[1].split("</p>", 1)[0]
    assert "n/a" not in lead
    metrics = result["recommendation"]["metrics"]
    from frontend.charts.base import fmt

    assert f"p90 TTFT {fmt(metrics['ttft_ms']['p90'])} ms" in lead
    assert f"p90 TPOT {fmt(metrics['tpot_ms']['p90'])} ms" in lead


def test_the_pareto_table_shows_enough_digits_to_tell_configurations_apart(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    import re

    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan, plan_search
    from simulations.plans import services

    result = plan_search(parse_plan(small_doc(), builtin_catalog()))
    first, second = result["evaluated"][:2]
    first["metrics"]["throughput_tok_s"] = 235.3
    second["metrics"]["throughput_tok_s"] = 235.306
    result["pareto"]["capex_vs_throughput"] = [{"key": first["key"]}, {"key": second["key"]}]
    plan = services.plan_create(spec=small_doc(), owner=user)
    Plan.objects.filter(pk=plan.pk).update(
        status=RunStatus.SUCCEEDED, result=result, progress=100, finished_at=timezone.now()
    )
    html = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    table = html.split('<table id="front">', 1)[1].split("</table>", 1)[0]
    cells = re.findall(r'<td class="num">([^<]*)</td>', table)
    throughputs = cells[1::2]
    assert len(throughputs) == 2 and throughputs[0] != throughputs[1], throughputs


def test_a_finished_plan_shows_its_energy_front_load_sensitivity_and_csv_link(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    """Everything the CLI prints is on the page: the capex-vs-energy front and the load
    sensitivity; the confirmed configurations download as the API's CSV."""
    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan, plan_search
    from simulations.plans import services
    from simulations.plans.models import PlanResult

    doc = small_doc()
    doc["search"]["sensitivity"] = True
    result = plan_search(parse_plan(doc, builtin_catalog()))
    sens = result["sensitivity"]
    assert sens and sens["applicable"]
    plan = services.plan_create(spec=doc, owner=user)
    for e in result["evaluated"]:
        PlanResult.objects.create(
            plan=plan,
            key=e["key"],
            round=1,
            feasible=bool(e["feasible"]),
            capex_usd=e["capex_usd"],
            evaluation=e,
        )
    Plan.objects.filter(pk=plan.pk).update(
        status=RunStatus.SUCCEEDED,
        result=result,
        progress=100,
        finished_at=timezone.now(),
        confirmed=len(result["evaluated"]),
    )
    html = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    energy = html.split('<table id="energy-front">', 1)[1].split("</table>", 1)[0]
    for p in result["pareto"]["capex_vs_energy_per_token"]:
        assert p["description"] in energy
    section = html.split('id="load-sensitivity"', 1)[1].split("</section>", 1)[0]
    assert sens["summary"].split(" (")[0][:40] in section.replace("&#x27;", "'")
    link = html.split('id="export-csv"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
    csv_text = alice_client.get(link.replace("&amp;", "&")).content.decode()
    header, *rows = csv_text.strip().splitlines()
    assert "key" in header and len(rows) == len(result["evaluated"])


def _form_data(**over: Any) -> dict[str, Any]:
    data = {
        "mode": "form",
        "name": "form plan",
        "model": "llama2-7b",
        "objective": "capex",
        "lengths": "uniform",
        "in_low": "64",
        "in_high": "1024",
        "out_low": "8",
        "out_high": "200",
        "requests": "60",
        "rate_per_s": "1.5",
        "seed": "3",
        "ttft_p90_ms": "1000",
        "tpot_p90_ms": "50",
        "devices": ["a100-80gb", "u280"],
        "policies": ["homogeneous", "glitches"],
        "max_count": "4",
        "max_devices_per_node": "8",
        "sensitivity": "on",
    }
    data.update(over)
    return data


def test_the_plan_form_writes_the_plan_document_the_cli_accepts(
    alice_client: Any, seeded: Any
) -> None:
    response = alice_client.post("/plans/", _form_data(max_capex_usd="90000"))
    assert response.status_code == 302, response.content.decode()[:3000]
    doc = Plan.objects.get().document
    assert doc["model"] == "llama2-7b"
    assert doc["workload"]["input_tokens"] == {"dist": "uniform", "low": 64, "high": 1024}
    assert doc["workload"]["arrival"] == {"kind": "poisson", "rate_per_s": 1.5}
    assert doc["targets"] == {"ttft_p90_ms": 1000.0, "tpot_p90_ms": 50.0}
    assert doc["space"]["devices"] == [
        {"device": "a100-80gb", "max_count": 4},
        {"device": "u280", "max_count": 4},
    ]
    assert [p["policy"] for p in doc["space"]["policies"]] == ["homogeneous", "glitches"]
    assert doc["constraints"]["max_capex_usd"] == 90000.0
    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan

    parse_plan(doc, builtin_catalog())  # what the CLI's parser accepts


def test_the_plan_form_can_take_a_stored_traces_lengths(alice_client: Any, seeded: Any) -> None:
    html = alice_client.get("/plans/").content.decode()
    assert 'value="azure-conv-2023"' in html  # the shipped traces are offered
    response = alice_client.post("/plans/", _form_data(lengths="azure-conv-2023"))
    assert response.status_code == 302
    doc = Plan.objects.get().document
    assert doc["workload"]["output_tokens"] == {"dist": "trace", "trace": "azure-conv-2023"}


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"in_high": ""}, "in_high"),
        ({"in_low": "900", "in_high": "100"}, "in_high"),
        ({"objective": "tco_per_year"}, "electricity_usd_per_kwh"),
        ({"devices": []}, "devices"),
        ({"ttft_p90_ms": "nan"}, "ttft_p90_ms"),
    ],
)
def test_the_plan_form_refuses_bad_input_beside_the_field_and_stores_nothing(
    alice_client: Any, seeded: Any, over: dict[str, Any], field: str
) -> None:
    response = alice_client.post("/plans/", _form_data(**over))
    assert response.status_code == 400
    html = response.content.decode()
    assert f'id="id_{field}"' in html and "errorlist" in html
    assert not Plan.objects.exists()


def test_the_plan_form_lists_no_device_without_published_power(
    alice_client: Any, seeded: Any
) -> None:
    """The form has no quote fields, and a plan refuses a device without power unless the
    document quotes one (the JSON editor takes ``tdp_w``)."""
    from dataclasses import replace

    from simulations.catalog.services import device_save
    from simulations.core.catalog import builtin_catalog

    a100 = builtin_catalog().devices["a100-80gb"]
    device_save(replace(a100, slug="a100-unpowered", name="A100 without power", tdp_w=None))
    html = alice_client.get("/plans/").content.decode()
    assert 'value="a100-80gb"' in html
    assert 'value="a100-unpowered"' not in html
    response = alice_client.post("/plans/", _form_data(devices=["a100-unpowered"]))
    assert response.status_code == 400
    assert not Plan.objects.exists()


def test_a_finished_plan_shows_a_quoted_power_with_its_source(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan, plan_search
    from simulations.plans import services

    doc = small_doc()
    doc["space"]["devices"][0]["tdp_w"] = 275
    result = plan_search(parse_plan(doc, builtin_catalog()))
    plan = services.plan_create(spec=doc, owner=user)
    Plan.objects.filter(pk=plan.pk).update(
        status=RunStatus.SUCCEEDED, result=result, progress=100, finished_at=timezone.now()
    )
    html = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    assert "275 W" in html
    assert "plan document (space.devices[0].tdp_w)" in html
