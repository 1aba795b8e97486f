"""Dashboard, workloads and traces, sweeps, validation, tokens and the offline assets."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api.models import ApiToken, hash_key
from frontend import examples, validation
from frontend.models import ValidationReport
from simulations.runs.models import SimulationRun
from simulations.scenarios.models import Trace, Workload

from .test_run_pages import figures

pytestmark = pytest.mark.django_db

TRACE_CSV = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n"
    "2023-11-16 18:15:51.1000000,1200,20\n"
    "2023-11-16 18:16:10.0000000,80,300\n"
)


def test_the_dashboard_offers_an_example_per_paper(alice_client: Any, seeded: Any) -> None:
    html = alice_client.get("/").content.decode()
    assert "1×A100 + 7×U280 vs 8×A100" in html
    papers = set(re.findall(r'<span class="tag">([^<]+)</span>', html))
    assert {"GLITCHES", "Neo", "HeteroLLM", "H2M2"} <= papers


def test_every_example_validates_against_the_seeded_catalog(seeded: Any) -> None:
    from simulations.scenarios import services

    for example in examples.available():
        examples.ensure_traces(example)
        services.scenario_validate(example.document)


def test_run_now_stores_the_example_and_queues_it(alice_client: Any, seeded: Any) -> None:
    response = alice_client.post("/examples/h2m2-gpt3-175b/run/")
    assert response.status_code == 302
    assert re.fullmatch(r"/runs/\d+/", response["Location"])
    html = alice_client.get("/").content.decode()
    assert "H2M2 vs LPDDR-only" in html  # listed among the recent runs


def test_run_now_past_the_quota_says_why_and_queues_nothing(
    alice_client: Any, seeded: Any, settings: Any
) -> None:
    settings.HETPLANNER_MAX_ACTIVE_RUNS_PER_USER = 1
    assert alice_client.post("/examples/h2m2-gpt3-175b/run/").status_code == 302
    response = alice_client.post("/examples/h2m2-gpt3-175b/run/", follow=True)
    assert "You have 1 runs queued or running; at most 1 at once." in response.content.decode()
    assert SimulationRun.objects.count() == 1


def test_the_workload_editor_saves_a_valid_workload(alice_client: Any, seeded: Any) -> None:
    response = alice_client.post(
        "/workloads/new/",
        {
            "name": "chat",
            "requests": 300,
            "in_dist": "lognormal",
            "in_median": 600,
            "in_sigma": 0.8,
            "in_high": 4000,
            "out_dist": "uniform",
            "out_low": 50,
            "out_high": 400,
            "arrival": "poisson",
            "rate_per_s": 2.5,
            "seed": 4,
            "time_scale": 1.0,
        },
    )
    assert response.status_code == 302
    workload = Workload.objects.get(name="chat")
    figs = figures(alice_client.get(f"/workloads/{workload.pk}/").content.decode())
    hist = figs["lengths"]["data"]
    assert sum(hist[0]["y"]) == 300 and sum(hist[1]["y"]) == 300
    assert max(hist[1]["x"]) <= 400
    assert figs["arrivals"]["layout"]["yaxis"]["title"]["text"] == "arrival rate (requests/s)"


def test_the_workload_editor_refuses_bounds_the_wrong_way_round(
    alice_client: Any, seeded: Any
) -> None:
    response = alice_client.post(
        "/workloads/new/",
        {
            "name": "bad",
            "requests": 10,
            "in_dist": "uniform",
            "in_low": 500,
            "in_high": 100,
            "out_dist": "fixed",
            "out_value": 10,
            "arrival": "closed",
            "seed": 0,
        },
    )
    assert response.status_code == 400
    assert not Workload.objects.exists()
    field = response.content.decode().split('data-field="in_high"', 1)[1][:800]
    assert "must not be below low" in field


def test_a_trace_upload_is_parsed_and_charted(alice_client: Any, seeded: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("t.csv", TRACE_CSV.encode(), content_type="text/csv")
    response = alice_client.post(
        "/traces/upload/", {"slug": "tiny", "name": "tiny trace", "file": upload}
    )
    assert response.status_code == 302
    trace = Trace.objects.get(slug="tiny")
    assert trace.request_count == 4
    figs = figures(alice_client.get("/traces/tiny/").content.decode())
    assert sum(figs["lengths"]["data"][0]["y"]) == 4
    rates = figs["arrivals"]["data"][0]
    assert sum(rates["y"]) * (rates["x"][1] - rates["x"][0]) == pytest.approx(4)


def test_a_large_trace_upload_shows_its_parse_status_then_its_error(
    alice_client: Any, seeded: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from unittest import mock

    from django.core.files.uploadedfile import SimpleUploadedFile

    from simulations.scenarios import tasks

    settings.HETPLANNER_TRACE_ASYNC_BYTES = 64
    bad = TRACE_CSV + "2023-11-16 18:17:00.0,-5,10\n"
    upload = SimpleUploadedFile("t.csv", bad.encode(), content_type="text/csv")
    with django_capture_on_commit_callbacks(execute=False):
        response = alice_client.post("/traces/upload/", {"slug": "later", "file": upload})
    assert response.status_code == 302
    page = alice_client.get("/traces/later/").content.decode()
    assert 'data-parse-status="queued"' in page and "Queued for parsing" in page
    listing = alice_client.get("/workloads/").content.decode()
    assert "Queued for parsing" in listing
    with mock.patch.object(tasks, "close_old_connections"):
        tasks.parse_trace.apply(args=[Trace.objects.get(slug="later").pk])
    page = alice_client.get("/traces/later/").content.decode()
    assert 'data-parse-status="failed"' in page
    assert "line 6" in page.split('id="trace-parse-error"', 1)[1][:600]


def test_a_broken_trace_is_refused_naming_the_line(alice_client: Any, seeded: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    bad = TRACE_CSV + "2023-11-16 18:17:00.0,-5,10\n"
    upload = SimpleUploadedFile("t.csv", bad.encode(), content_type="text/csv")
    response = alice_client.post("/traces/upload/", {"slug": "bad", "file": upload})
    assert response.status_code == 400
    assert not Trace.objects.filter(slug="bad").exists()
    assert re.search(r"line 6|row 5|rows\[4\]", response.content.decode())


def test_the_validation_page_shows_published_beside_reproduced(
    alice_client: Any, seeded: Any
) -> None:
    row = validation.compute("heterollm")
    assert row.status == ValidationReport.Status.READY
    html = alice_client.get("/validation/").content.decode()
    section = html.split('id="paper-heterollm"', 1)[1].split("</section>", 1)[0]
    checks = row.document["checks"]
    assert section.count('class="check ') == len(checks)
    first = checks[0]
    assert first["id"] in section
    assert "Rel. error" in section
    fig = figures(html)["validation-heterollm"]
    assert len(fig["data"][0]["x"]) == len([c for c in checks if c["paper_value"]])
    assert "Not computed yet" in html.split('id="paper-neo"', 1)[1].split("</section>", 1)[0]


def test_the_validation_page_groups_checks_by_basis_with_counts_and_the_headline(
    alice_client: Any, seeded: Any
) -> None:
    row = validation.compute("heterollm")
    checks = row.document["checks"]
    html = alice_client.get("/validation/").content.decode()
    section = html.split('id="paper-heterollm"', 1)[1].split("</section>", 1)[0]
    predictions = [c for c in checks if c["basis"] == "prediction" and c["discriminating"]]
    ok = sum(1 for c in predictions if c["ok"])
    assert f"Predictions within tolerance: {ok} of {len(predictions)}" in section
    for basis in ("prediction", "non_discriminating", "calibration", "input"):
        group = section.split(f'data-basis="{basis}" id="group-heterollm-{basis}"', 1)[1]
        group = group.split("</tbody>", 1)[0]
        if basis == "non_discriminating":
            members = [c for c in checks if c["basis"] == "prediction" and not c["discriminating"]]
        elif basis == "prediction":
            members = predictions
        else:
            members = [c for c in checks if c["basis"] == basis]
        assert members, basis
        assert group.count('class="check ') == len(members), basis
        within = sum(1 for c in members if c["ok"])
        assert f"{within} of {len(members)} within tolerance" in group, basis
    marked = section.count("passes at no effect</span>")
    assert marked == sum(1 for c in checks if not c["discriminating"])
    totals = html.split('id="validation-totals"', 1)[1].split("</section>", 1)[0]
    assert f"predictions within tolerance: {ok} of {len(predictions)}" in totals


def test_a_report_stored_before_checks_had_a_basis_shows_them_unlabelled(
    alice_client: Any, seeded: Any
) -> None:
    ValidationReport.objects.create(
        paper="h2m2",
        status=ValidationReport.Status.READY,
        document={"paper": "h2m2", "checks": [{"id": "h2m2.fig6.old", "ok": True}]},
    )
    html = alice_client.get("/validation/").content.decode()
    section = html.split('id="paper-h2m2"', 1)[1].split("</section>", 1)[0]
    assert "Unlabelled (computed before checks carried a basis)" in section
    assert "predictions within tolerance: 0 of 0" in html


def test_only_staff_queue_a_recomputation(alice_client: Any, client: Any, staff: Any) -> None:
    alice_client.post("/validation/glitches/recompute/")
    assert not ValidationReport.objects.exists()
    client.force_login(staff)
    client.post("/validation/glitches/recompute/")
    assert ValidationReport.objects.get(paper="glitches").requested_at is not None
    assert validation.request("glitches") is False  # already under way


def test_tokens_are_shown_once_stored_hashed_and_revocable(
    alice_client: Any, user: Any, other_user: Any, client: Any
) -> None:
    html = alice_client.post("/tokens/", {"name": "CI"}).content.decode()
    key = re.search(r'<code class="key">(hp_[\w-]+)</code>', html).group(1)
    token = ApiToken.objects.get(user=user)
    assert token.key_hash == hash_key(key) and key not in str(token.__dict__)
    assert key not in alice_client.get("/tokens/").content.decode()
    other = client.__class__()
    other.force_login(other_user)
    assert other.post(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert alice_client.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.exists()


def test_a_sweep_page_draws_the_pareto_front_and_latency_against_load(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    from simulations.sweeps.models import ConfigurationStatus, Sweep, SweepResult
    from simulations.sweeps.services import summarise_result

    from .conftest import glitches_document, simulated

    rates = [0.2, 0.6]
    sweep = Sweep.objects.create(
        owner=user,
        name="load",
        template=glitches_document(20),
        axes=[{"name": "rate_per_s", "path": "workload.arrival.rate_per_s", "values": rates}],
        total=2,
        chunk_size=2,
        succeeded_count=2,
    )
    for i, rate in enumerate(rates):
        doc = glitches_document(20)
        doc["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": rate}
        SweepResult.objects.create(
            sweep=sweep,
            index=i,
            parameters={"rate_per_s": rate},
            status=ConfigurationStatus.SUCCEEDED,
            result=summarise_result(simulated(doc)),
        )
    html = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    figs = figures(html)
    pareto = figs["pareto"]["data"]
    assert sum(len(t["x"]) for t in pareto if not t["name"].startswith("Pareto front")) == 4
    for front in (t for t in pareto if t["name"].startswith("Pareto front")):
        assert front["x"] == sorted(front["x"])
    load = figs["latency-load"]["data"]
    assert {t["name"] for t in load} >= {"1xA100+7xU280 p90", "8xA100 p50"}
    assert next(t for t in load if t["name"] == "8xA100 p90")["x"] == rates


def test_plotly_is_served_from_the_apps_own_static_files(client: Any, seeded: Any) -> None:
    response = client.get("/static/frontend/vendor/plotly.min.js")
    assert response.status_code == 200
    head = b"".join(response.streaming_content)[:2000]
    assert b"plotly.js" in head


def test_pages_reference_no_cdn(alice_client: Any, glitches_run: Any) -> None:
    for url in ("/", f"/runs/{glitches_run.pk}/", "/catalog/devices/a100-80gb/", "/scenarios/new/"):
        html = alice_client.get(url).content.decode()
        for src in re.findall(r'<script[^>]+src="([^"]+)"', html):
            assert src.startswith("/static/"), (url, src)
        # a URL on a CDN host; a bare "cdn" can occur inside a random CSRF token
        assert not re.search(r"(https?:)?//[^\s\"'<>]*cdn", html, re.I)


def test_a_report_with_an_infinite_error_is_stored_as_null(monkeypatch: Any, seeded: Any) -> None:
    import simulations.core.reproduce as reproduce_module

    def fake(paper: str) -> dict[str, Any]:
        return {
            "paper": paper,
            "checks": [{"id": "x", "paper_value": 0.0, "rel_err": float("inf")}],
        }

    monkeypatch.setattr(reproduce_module, "reproduce", fake)
    row = validation.compute("h2m2")
    row.refresh_from_db()
    assert row.document["checks"][0]["rel_err"] is None


def test_the_scenario_page_says_how_to_post_the_document(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    from simulations.scenarios import services as sim_services

    from .conftest import glitches_document

    scenario = sim_services.scenario_create(owner=user, document=glitches_document())
    page = alice_client.get(f"/scenarios/{scenario.pk}/").content.decode()
    assert "POST it to" not in page
    assert "{&quot;document&quot;: …}" in page or '{"document": …}' in page
