"""The run page (lifecycle, comparison charts), its status endpoint, figures and exports."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from typing import Any

import pytest

from simulations.choices import RunStatus
from simulations.runs.models import SimulationRun

pytestmark = pytest.mark.django_db


def figures(html_text: str) -> dict[str, dict[str, Any]]:
    """The Plotly figures embedded in a page, by element id."""
    out = {}
    for fig_id, body in re.findall(
        r'<script type="application/json" id="([\w-]+)-data">(.*?)</script>', html_text, re.S
    ):
        out[fig_id] = json.loads(body)
    return out


def run_figures(client: Any, path: str) -> dict[str, dict[str, Any]]:
    """The Plotly figures of a run page, by element id: the page names the URL of its
    charts' data (``data-charts-src``), which is fetched as a browser does."""
    page = client.get(path)
    assert page.status_code == 200
    src = re.search(r'data-charts-src="([^"]+)"', page.content.decode())
    assert src is not None, "the page does not load its charts"
    response = client.get(html.unescape(src.group(1)))
    assert response.status_code == 200
    charts: dict[str, dict[str, Any]] = response.json()["charts"]
    for fig_id in charts:
        assert f'id="{fig_id}"' in page.content.decode(), f"no element for chart {fig_id}"
    return charts


def test_the_run_page_compares_the_systems_normalised_to_the_baseline(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    response = alice_client.get(f"/runs/{glitches_run.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    figs = run_figures(alice_client, f"/runs/{glitches_run.pk}/")
    assert {"efficiency", "latency-cdf", "latency-percentiles", "utilisation", "energy"} <= set(
        figs
    )
    systems = glitches_run.result["systems"]
    bars = figs["efficiency"]["data"]
    assert [t["y"][0] for t in bars] == [1.0, 1.0, 1.0]  # the baseline against itself
    expected = systems[1]["throughput_tok_s"] / systems[0]["throughput_tok_s"]
    assert bars[0]["y"][1] == pytest.approx(expected)
    assert "Throughput (tok/s)" in json.dumps(figs["efficiency"]["layout"])
    assert 'aria-valuenow="100"' in page


def test_another_baseline_renormalises_every_ratio(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    figs = run_figures(alice_client, f"/runs/{glitches_run.pk}/?baseline=1")
    systems = glitches_run.result["systems"]
    cost = figs["efficiency"]["data"][1]["y"]
    key = "cost_efficiency_tok_s_per_usd"
    assert cost[0] == pytest.approx(systems[0][key] / systems[1][key])
    assert cost[1] == pytest.approx(1.0)


def test_the_cdfs_come_from_the_result_quantiles(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    figs = run_figures(alice_client, f"/runs/{glitches_run.pk}/")
    traces = [t for t in figs["latency-cdf"]["data"] if not t["name"].startswith("p90 target")]
    first = glitches_run.result["systems"][0]["latency_cdf"]
    assert traces[0]["x"] == first["ttft_ms"]
    assert traces[0]["y"] == first["q"]
    targets = [t for t in figs["latency-cdf"]["data"] if t["name"].startswith("p90 target")]
    assert {t["x"][0] for t in targets} == {2000, 100}


def test_the_timeline_draws_every_device_of_the_chosen_system(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    gantt = run_figures(alice_client, f"/runs/{glitches_run.pk}/?timeline=0")["timeline"]
    rows = {y for t in gantt["data"] for y in t["y"]}
    assert any(r.startswith("a100-80gb #0") for r in rows)
    assert sum(1 for r in rows if r.startswith("u280") and "PCIe" not in r) == 7
    assert {t["name"] for t in gantt["data"]} >= {"prefill", "decode", "transfer"}
    second = run_figures(alice_client, f"/runs/{glitches_run.pk}/?timeline=1")["timeline"]
    assert "8xA100" in second["layout"]["title"]["text"]


def test_the_roofline_figure_places_the_scenario_operating_points(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    body = alice_client.get(f"/runs/{glitches_run.pk}/figures/roofline.json").json()
    points = [t for t in body["figure"]["data"] if t["name"].endswith("operating points")]
    assert {t["name"].split(" ")[0] for t in points} == {"a100-80gb", "u280"}
    for t in points:
        assert t["text"] == ["prefill", "decode"]
        assert t["x"][0] > t["x"][1]  # prefill is far more compute-intense than decode


def test_the_status_endpoint_reports_progress(alice_client: Any, queued_run: SimulationRun) -> None:
    body = alice_client.get(f"/runs/{queued_run.pk}/status.json").json()
    assert body == {
        **body,
        "status": "queued",
        "progress": 0,
        "final": False,
        "error": "",
    }


def test_a_failed_run_shows_its_error_plainly(alice_client: Any, queued_run: SimulationRun) -> None:
    from simulations.runs import services as run_services

    claim = run_services.run_claim(queued_run.pk, worker="test:1")
    run_services.run_mark_failed(
        queued_run.pk, claim.attempt, "does not fit: weights exceed memory"
    )
    html = alice_client.get(f"/runs/{queued_run.pk}/").content.decode()
    assert "The run failed." in html
    assert "does not fit: weights exceed memory" in html
    assert 'id="comparison"' not in html


def test_cancel_stops_a_queued_run(alice_client: Any, queued_run: SimulationRun) -> None:
    response = alice_client.post(f"/runs/{queued_run.pk}/cancel/")
    assert response.status_code == 302
    assert SimulationRun.objects.get(pk=queued_run.pk).status == RunStatus.CANCELLED


def test_the_csv_export_has_a_row_per_system_with_ratios(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    response = alice_client.get(f"/runs/{glitches_run.pk}/result.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    text = response.content.decode()
    systems_part = text.split("\n\n")[0]
    rows = list(csv.DictReader(io.StringIO(systems_part)))
    result = glitches_run.result["systems"]
    assert [r["system"] for r in rows] == [s["name"] for s in result]
    assert float(rows[1]["throughput_tok_s"]) == pytest.approx(result[1]["throughput_tok_s"])
    assert float(rows[0]["throughput_tok_s_vs_baseline"]) == 1.0
    assert float(rows[1]["ttft_ms_p90"]) == pytest.approx(result[1]["ttft_ms"]["p90"])
    devices = list(csv.DictReader(io.StringIO(text.split("\n\n")[1])))
    assert {d["device"] for d in devices} == {"a100-80gb", "u280"}


def test_the_json_exports_round_trip(alice_client: Any, glitches_run: SimulationRun) -> None:
    result = json.loads(alice_client.get(f"/runs/{glitches_run.pk}/result.json").content)
    assert result == glitches_run.result
    scenario = json.loads(alice_client.get(f"/runs/{glitches_run.pk}/scenario.json").content)
    assert scenario == glitches_run.document
    from simulations.scenarios import services as scenario_services

    scenario_services.scenario_validate(scenario)  # re-runnable as it is


@pytest.mark.parametrize(
    "suffix",
    ["", "status.json", "result.csv", "result.json", "scenario.json", "figures/roofline.json"],
)
def test_another_user_gets_404_for_every_run_url(
    client: Any, other_user: Any, glitches_run: SimulationRun, suffix: str
) -> None:
    client.force_login(other_user)
    assert client.get(f"/runs/{glitches_run.pk}/{suffix}").status_code == 404


def test_another_user_cannot_cancel(
    client: Any, other_user: Any, queued_run: SimulationRun
) -> None:
    client.force_login(other_user)
    assert client.post(f"/runs/{queued_run.pk}/cancel/").status_code == 404
    assert SimulationRun.objects.get(pk=queued_run.pk).status == RunStatus.QUEUED


def test_signed_out_visitors_are_sent_to_sign_in(client: Any, glitches_run: SimulationRun) -> None:
    response = client.get(f"/runs/{glitches_run.pk}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_system_names_are_escaped_in_the_page_and_the_charts(alice_client: Any, user: Any) -> None:
    from simulations.catalog.services import catalog_seed

    from .conftest import glitches_document, store_succeeded_run

    catalog_seed()
    doc = glitches_document(10)
    doc["systems"][1]["name"] = '<img src=x onerror="alert(1)">'
    run = store_succeeded_run(user, doc)
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "<img src=x" not in page
    figs = run_figures(alice_client, f"/runs/{run.pk}/")
    hover = json.dumps(figs["efficiency"]["data"][0]["hovertext"])
    assert "&lt;img src=x" in hover and "<img" not in hover


def test_the_scenario_document_panel_shows_json(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    page = alice_client.get(f"/runs/{glitches_run.pk}/").content.decode()
    panel = page.split("Scenario document", 1)[1]
    body = re.search(r'<pre class="code"[^>]*>(.*?)</pre>', panel, re.S)
    assert body is not None
    assert json.loads(html.unescape(body.group(1))) == glitches_run.document


def test_a_long_system_name_is_shortened_in_the_table_with_the_full_name_as_title(
    alice_client: Any, user: Any
) -> None:
    from simulations.catalog.services import catalog_seed

    from .conftest import glitches_document, store_succeeded_run

    catalog_seed()
    doc = glitches_document(10)
    long_name = "1x a100-80gb (vllm) + 7x u280 (flightllm, prefetch 4) " * 3
    doc["systems"][1]["name"] = long_name.strip()
    run = store_succeeded_run(user, doc)
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    head = page.split('<table id="summary"', 1)[1].split("</thead>", 1)[0]
    assert f'title="{html.escape(long_name.strip(), quote=True)}"' in head
    assert html.escape(long_name.strip()) not in re.sub(r'title="[^"]*"', "", head)


def test_requests_clipped_to_the_context_are_counted_on_the_page_and_in_the_csv(
    alice_client: Any, glitches_run: SimulationRun
) -> None:
    result = glitches_run.result
    result["systems"][1]["clipped_requests"] = 3
    SimulationRun.objects.filter(pk=glitches_run.pk).update(result=result)
    glitches_run.refresh_from_db()
    page = alice_client.get(f"/runs/{glitches_run.pk}/").content.decode()
    notice = page.split('id="clipped"', 1)[1].split("</div>", 1)[0]
    system = result["systems"][1]
    assert f"{html.escape(system['name'])}: 3 of {system['requests']} requests" in notice
    text = alice_client.get(f"/runs/{glitches_run.pk}/result.csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text.split("\n\n")[0])))
    assert [r["clipped_requests"] for r in rows] == ["0", "3"]


def test_the_page_csv_and_the_api_csv_share_one_schema(
    alice_client: Any, user: Any, glitches_run: SimulationRun
) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(user)
    api_csv = api.get(f"/api/runs/{glitches_run.pk}/result/?format=csv").content.decode()
    page_csv = alice_client.get(f"/runs/{glitches_run.pk}/result.csv").content.decode()
    assert page_csv.split("\n\n")[0].strip() == api_csv.strip()
    header = api_csv.splitlines()[0].split(",")
    assert {"ttft_ms_p90", "throughput_tok_s_vs_baseline", "clipped_requests"} <= set(header)
