"""The sweep page: its Pareto front only holds configurations that meet the SLO, compared at
the same arrival rate; its status reads like a run's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone

from simulations.sweeps.models import ConfigurationStatus, Sweep, SweepResult, SweepStatus

from .conftest import glitches_document
from .test_run_pages import figures

pytestmark = pytest.mark.django_db

RATES = [0.2, 0.6]
#: (rate, system, capex, throughput, SLO met)
POINTS = [
    (0.2, "A", 100.0, 50.0, True),
    (0.2, "B", 200.0, 200.0, False),
    (0.6, "A", 100.0, 80.0, True),
    (0.6, "B", 200.0, 150.0, True),
]


def _sweep(user: Any, **fields: Any) -> Sweep:
    sweep = Sweep.objects.create(
        owner=user,
        name="load",
        template=glitches_document(20),
        axes=[{"name": "rate_per_s", "path": "workload.arrival.rate_per_s", "values": RATES}],
        total=2,
        chunk_size=2,
        succeeded_count=2,
        **fields,
    )
    for i, rate in enumerate(RATES):
        systems = [
            {"name": name, "capex_usd": capex, "throughput_tok_s": tput, "slo_met": met}
            for r, name, capex, tput, met in POINTS
            if r == rate
        ]
        SweepResult.objects.create(
            sweep=sweep,
            index=i,
            parameters={"rate_per_s": rate},
            status=ConfigurationStatus.SUCCEEDED,
            result={"systems": systems},
        )
    return sweep


def test_the_pareto_front_holds_only_slo_meeting_points_at_one_rate(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    sweep = _sweep(user)
    html = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    rows = re.findall(r"<tr class=\"front\">(.*?)</tr>", html, re.S)
    on_front = set()
    for r in rows:
        rate = re.search(r"<code>rate_per_s=([\d.]+)</code>", r)
        assert rate is not None
        on_front.add((rate.group(1), r.split("<td>")[3][0]))
    assert on_front == {("0.2", "A"), ("0.6", "A"), ("0.6", "B")}
    assert all("missed" not in r for r in rows)
    fronts = [t for t in figures(html)["pareto"]["data"] if t["name"].startswith("Pareto front")]
    assert sorted(len(t["x"]) for t in fronts) == [1, 2]  # one line per arrival rate


def test_a_finished_sweep_without_failures_reads_succeeded(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    sweep = _sweep(user, status=SweepStatus.FINISHED, finished_at=timezone.now(), summary={})
    html = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert re.search(r'<span class="badge status-finished">Succeeded</span>', html)
    listing = alice_client.get("/sweeps/").content.decode()
    assert re.search(r'<span class="badge status-finished">Succeeded</span>', listing)


def test_a_sweep_page_links_its_results_as_the_apis_csv(
    alice_client: Any, user: Any, seeded: Any
) -> None:
    sweep = _sweep(user, status=SweepStatus.FINISHED, finished_at=timezone.now(), summary={})
    html = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    link = html.split('id="export-csv"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
    response = alice_client.get(link.replace("&amp;", "&"))
    assert response["Content-Type"].startswith("text/csv")
    header, *rows = response.content.decode().strip().splitlines()
    assert "rate_per_s" in header and len(rows) == len(POINTS)  # one row per configuration × system


def test_a_scenario_sweeps_any_numeric_setting_from_its_page(
    alice_client: Any, user: Any, seeded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simulations.scenarios import services as scenario_services
    from simulations.sweeps import services as sweep_services

    monkeypatch.setattr(sweep_services, "_enqueue_chunks", lambda *args: None)
    scenario = scenario_services.scenario_create(owner=user, document=glitches_document(20))
    html = alice_client.get(f"/scenarios/{scenario.pk}/").content.decode()
    # the arrival rate, counts and every numeric option of each system's policy are offered
    for path in (
        "workload.arrival.rate_per_s",
        "systems[0].options.prefetch_ratio",
        "systems[1].devices[0].count",
        "systems[1].options.max_batch",
    ):
        assert f'value="{path}"' in html, path
    url = f"/scenarios/{scenario.pk}/load-sweep/"
    response = alice_client.post(
        url, {"parameter": "systems[1].options.max_batch", "values": "1, 8, 32"}
    )
    assert response.status_code == 302
    sweep = Sweep.objects.get()
    assert sweep.axes == [
        {"name": "max_batch", "path": "systems[1].options.max_batch", "values": [1, 8, 32]}
    ]
    assert response["Location"] == f"/sweeps/{sweep.pk}/"
    # a whole-number setting refuses fractions; nothing more is stored
    alice_client.post(url, {"parameter": "systems[1].options.max_batch", "values": "1, 2.5"})
    alice_client.post(url, {"parameter": "workload.seed", "values": "1, nan"})
    assert Sweep.objects.count() == 1
