"""Dashboard page render time: every page of a 10-system comparison under 300 ms of
server time.

The run is a real one: a 10-system LLaMA2-7B comparison (GLITCHES nodes with A100, V100S
and H100 prefill GPUs, homogeneous batch-1 and continuous-batching nodes of A100, A100-40GB,
V100S, H100, U280 and A10G; 200 requests of 1536 + 512 tokens, closed arrivals) simulated by
the core in this process and stored through the services, so the result document has the
real size of its per-device timelines (about 1 MB of JSON). What is timed is the Django
test client's request → response (URL routing, session, the database reads, the result
document's JSON decoding, building the Plotly figures with plotly.py and rendering the
template) — server time without a network. One warm-up request first (template and
figure-module caches, as on any running server).

Rows: the run page, its comparison charts' JSON (built once per result version, then
served from the cache — the warm-up request builds it), the roofline figure it loads
afterwards (evaluates the core's device models at the scenario's operating points once per
run and catalog version, then cached: the rounds measure the cached answer), the result
CSV, the scenario builder on the 10-system scenario, the scenario page and the dashboard.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db  # makes pytest-django create the test database

TARGET_MS = 300.0
ROUNDS = 8

SYSTEMS: list[tuple[str, str, list[dict[str, Any]], dict[str, Any]]] = [
    ("8xA100 batch-1", "homogeneous", [{"device": "a100-80gb", "count": 8}], {}),
    (
        "1xA100+7xU280",
        "glitches",
        [
            {"device": "a100-80gb", "count": 1, "role": "prefill"},
            {"device": "u280", "count": 7, "role": "decode"},
        ],
        {"prefetch_ratio": 4},
    ),
    (
        "1xV100S+7xU280",
        "glitches",
        [
            {"device": "v100s", "count": 1, "role": "prefill"},
            {"device": "u280", "count": 7, "role": "decode"},
        ],
        {},
    ),
    (
        "1xH100+7xU280",
        "glitches",
        [
            {"device": "h100-sxm", "count": 1, "role": "prefill"},
            {"device": "u280", "count": 7, "role": "decode"},
        ],
        {},
    ),
    ("8xV100S batch-1", "homogeneous", [{"device": "v100s", "count": 8}], {}),
    ("8xU280 batch-1", "homogeneous", [{"device": "u280", "count": 8}], {}),
    ("8xA100-40GB batch-1", "homogeneous", [{"device": "a100-40gb", "count": 8}], {}),
    ("2xH100 batch-1", "homogeneous", [{"device": "h100-sxm", "count": 2}], {}),
    (
        "4xA100 vLLM-like",
        "homogeneous",
        [{"device": "a100-80gb", "count": 4, "runtime": "vllm-fp16"}],
        {"max_batch": 64},
    ),
    ("4xA10G batch-1", "homogeneous", [{"device": "a10g", "count": 4}], {}),
]
DOCUMENT = {
    "name": "ten systems for LLaMA2-7B",
    "model": "llama2-7b",
    "workload": {
        "requests": 200,
        "input_tokens": 1536,
        "output_tokens": 512,
        "arrival": {"kind": "closed"},
        "seed": 0,
    },
    "systems": [
        {"name": n, "policy": p, "devices": d, **({"options": o} if o else {})}
        for n, p, d, o in SYSTEMS
    ],
    "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 100},
}


@pytest.fixture(scope="module")
def comparison(django_db_setup: Any, django_db_blocker: Any) -> Any:
    """A signed-in client and the succeeded 10-system run (stored once for the module)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from simulations.catalog import services as catalog_services
    from simulations.core.simulate import simulate
    from simulations.runs import services as run_services
    from simulations.scenarios import services as scenario_services

    # never write to a real database: only the test database pytest-django created
    assert "test" in str(connection.settings_dict["NAME"]), connection.settings_dict["NAME"]
    with django_db_blocker.unblock():
        catalog_services.catalog_seed()
        user = get_user_model().objects.create_user("bench-pages", password="x")
        scenario = scenario_services.scenario_create(owner=user, document=DOCUMENT)
        run = run_services.simulation_run_create(scenario=scenario, owner=user)
        claim = run_services.run_claim(run.pk, worker="bench:1")
        assert claim is not None
        result = simulate(scenario_services.scenario_validate(DOCUMENT))
        assert run_services.run_mark_succeeded(run.pk, claim.attempt, result)
        client = Client()
        client.force_login(user)
        yield client, run, scenario
        run.delete()
        scenario.delete()
        user.delete()


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("run page (charts loaded from charts.json)", "/runs/{run}/"),
        ("comparison charts JSON (cached per result)", "/runs/{run}/charts.json"),
        ("roofline figure (core operating points)", "/runs/{run}/figures/roofline.json"),
        ("result CSV", "/runs/{run}/result.csv"),
        ("scenario builder", "/scenarios/{scenario}/edit/"),
        ("scenario page", "/scenarios/{scenario}/"),
        ("dashboard", "/"),
    ],
)
def test_bench_page(
    benchmark: Any, comparison: Any, django_db_blocker: Any, name: str, url: str
) -> None:
    client, run, scenario = comparison
    path = url.format(run=run.pk, scenario=scenario.pk)
    with django_db_blocker.unblock():
        first = client.get(path)  # warm-up (and a check that the page works)
        assert first.status_code == 200, first.content[:500]
        if "runs/" in path and path.endswith(f"{run.pk}/"):
            assert b"data-charts-src" in first.content  # the charts come from charts.json

        def render() -> int:
            return client.get(path).status_code

        status = benchmark.pedantic(render, rounds=ROUNDS, iterations=1)
    assert status == 200
    benchmark.extra_info.update(
        name=f"page: {name} (10-system comparison)", unit="ms", target=TARGET_MS
    )
