"""A device family added from a test alone (``tests/core/toy``: one module and one data
entry) is a first-class device on the Django side too, with no migration and no Django code
naming it: its runtime profile and device are stored through the API (the kind, the
``params`` and their schema come from the family's registration), and a scenario and a
capacity plan run on it as jobs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from rest_framework.test import APIClient

from simulations.catalog.models import Device, RuntimeProfile
from simulations.core.devices import device_kinds
from simulations.plans.models import Plan
from simulations.runs import tasks
from simulations.runs.models import SimulationRun
from tests.core.toy import device_family as toy
from tests.simulations.test_plan_job import Outbox

pytestmark = pytest.mark.django_db(transaction=True)

TOY = "toy-accel-1"


@pytest.fixture
def family() -> Iterator[None]:
    with toy.registered():
        yield


@pytest.fixture(autouse=True)
def _fresh_plan_cache() -> None:
    from simulations.plans import tasks as plan_tasks

    plan_tasks._searches.clear()
    plan_tasks._specs.clear()


def _store_the_family(carol: APIClient) -> None:
    data = toy.records()
    runtime = dict(data["runtimes"][0])
    response = carol.post("/api/runtimes/", runtime, format="json")
    assert response.status_code == 201, response.json()
    response = carol.post("/api/devices/", data["devices"][0], format="json")
    assert response.status_code == 201, response.json()


def _workload(requests: int) -> dict[str, Any]:
    return {
        "requests": requests,
        "input_tokens": {"dist": "uniform", "low": 128, "high": 1024},
        "output_tokens": {"dist": "uniform", "low": 16, "high": 128},
        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
        "seed": 7,
    }


@pytest.mark.usefixtures("family")
def test_the_toy_family_is_stored_through_the_api_with_its_schema(
    carol: APIClient, catalog: Any
) -> None:
    kinds = {k["kind"]: k for k in carol.get("/api/devices/kinds/").json()}
    assert [p["name"] for p in kinds[toy.KIND]["params"]] == ["lanes", "clock_ghz"]
    assert kinds[toy.KIND]["params"][1]["label"] == "Clock (GHz)"
    _store_the_family(carol)
    row = Device.objects.get(slug=TOY)
    assert (row.kind, row.params) == (toy.KIND, {"lanes": 65536, "clock_ghz": 1.5})
    assert RuntimeProfile.objects.get(slug="toy-fp16").default_for_kind
    shown = carol.get(f"/api/devices/{TOY}/").json()
    assert shown["params"] == {"lanes": 65536, "clock_ghz": 1.5}
    assert shown["sources"]["params.lanes"].startswith("test fixture")
    bad = {**toy.records()["devices"][0], "slug": "toy-bad", "params": {"lanes": 0}}
    response = carol.post("/api/devices/", bad, format="json")
    assert response.status_code == 400
    assert {"params.lanes", "params.clock_ghz"} & set(response.json()), response.json()
    assert not Device.objects.filter(slug="toy-bad").exists()


def test_without_its_registration_the_kind_is_refused(carol: APIClient, catalog: Any) -> None:
    assert toy.KIND not in device_kinds()
    response = carol.post("/api/devices/", toy.records()["devices"][0], format="json")
    assert response.status_code == 400 and "kind" in response.json()


@pytest.mark.usefixtures("family")
def test_a_scenario_runs_on_the_toy_family(carol: APIClient, catalog: Any) -> None:
    _store_the_family(carol)
    document = {
        "name": "toy family",
        "model": "llama2-7b",
        "workload": _workload(40),
        "systems": [
            {
                "name": "2x toy",
                "policy": "homogeneous",
                "devices": [{"device": TOY, "count": 2}],
                "options": {"max_batch": 8},
            }
        ],
    }
    scenario = carol.post("/api/scenarios/", {"document": document}, format="json")
    assert scenario.status_code == 201, scenario.json()
    with mock.patch("simulations.runs.tasks.run_simulation.delay"):
        run = carol.post("/api/runs/", {"scenario": scenario.json()["id"]}, format="json")
    assert run.status_code == 202, run.json()
    tasks.run_simulation.apply(args=(run.json()["id"],))
    stored = SimulationRun.objects.get(pk=run.json()["id"])
    assert stored.status == "succeeded", stored.error
    system = stored.result["systems"][0]
    assert system["devices"][0]["device"] == TOY
    assert system["throughput_tok_s"] > 0 and system["capex_usd"] == 2 * 9000


@pytest.mark.usefixtures("family")
def test_a_plan_searches_the_toy_family(
    carol: APIClient, catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store_the_family(carol)
    outbox = Outbox(monkeypatch)
    document = {
        "name": "toy family plan",
        "model": "llama2-7b",
        "workload": _workload(60),
        "targets": {"ttft_p90_ms": 2000, "tpot_p90_ms": 60},
        "space": {
            "devices": [{"device": TOY, "max_count": 4}, {"device": "a100-80gb", "max_count": 2}],
            "policies": [{"policy": "homogeneous", "options": {"max_batch": [1, 8]}}],
        },
        "search": {"sensitivity": False, "round_size": 4},
    }
    response = carol.post("/api/plans/", {"document": document}, format="json")
    assert response.status_code == 202, response.json()
    outbox.deliver_all()
    plan = Plan.objects.get(pk=response.json()["id"])
    assert plan.status == "succeeded", plan.error
    assert TOY in plan.result["recommendation"]["key"]  # the cheapest system meeting targets
