"""A device family added from outside the core (``tests/core/toy``: one module and one data
entry, no change anywhere else) is a first-class device: the catalog checks its record
against the family's declared parameters, a scenario runs on it and the planner screens and
confirms systems built from it. (The database half — the record stored through the API and
planned from the database — is ``tests/api/test_device_family_db.py``.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from simulations.core.catalog import device_from_dict
from simulations.core.devices import build_device_model, check_device, describe_family
from simulations.core.errors import ScenarioValidationError, SpecError
from simulations.core.planner import Search, parse_plan
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from tests.core.planner.helpers import every_config, exhaustive
from tests.core.toy import device_family as toy

TOY = "toy-accel-1"


@pytest.fixture
def family() -> Iterator[None]:
    with toy.registered():
        yield


def _workload(requests: int = 40) -> dict[str, Any]:
    return {
        "requests": requests,
        "input_tokens": {"dist": "uniform", "low": 128, "high": 1024},
        "output_tokens": {"dist": "uniform", "low": 16, "high": 128},
        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
        "seed": 7,
    }


@pytest.mark.usefixtures("family")
def test_a_scenario_runs_on_the_new_family() -> None:
    cat = toy.catalog()
    doc = {
        "name": "toy family",
        "model": "llama2-7b",
        "workload": _workload(),
        "systems": [
            {
                "name": "2x toy",
                "policy": "homogeneous",
                "devices": [{"device": TOY, "count": 2}],
                "options": {"max_batch": 8},
            },
            {
                "name": "1x A100",
                "policy": "homogeneous",
                "devices": [{"device": "a100-80gb", "count": 1}],
            },
        ],
    }
    spec = parse_scenario(doc, cat)
    placement = spec.systems[0].devices[0]
    assert placement.runtime.slug == "toy-fp16"  # its kind's default, from the data
    result = simulate(spec)
    toy_system = result["systems"][0]
    assert toy_system["devices"][0]["device"] == TOY
    assert toy_system["throughput_tok_s"] > 0
    assert toy_system["capex_usd"] == 2 * 9000
    assert 0 < toy_system["devices"][0]["busy_fraction"] <= 1
    # the numbers are the family's: a decode step at the roofline of its lanes and memory
    dm = build_device_model(placement.device, placement.runtime)
    step = dm.decode_step(spec.model, 1, 512)
    assert step.seconds >= step.bytes / dm.bw * (1 - 1e-12)


@pytest.mark.usefixtures("family")
def test_the_planner_screens_and_confirms_systems_of_the_new_family() -> None:
    doc = {
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
    search = Search(parse_plan(doc, toy.catalog()))
    report = search.run()
    toy_rows = [(cfg, verdict, i) for cfg, verdict, i in every_config(search) if TOY in cfg.key]
    assert len(toy_rows) == 8
    # the screen bounded them with the family's answers (compute rate, stream floor, power)
    assert all(verdict.row(i)["verdict"] != "invalid" for _, verdict, i in toy_rows)
    results = exhaustive(search)
    for cfg, verdict, i in toy_rows:
        row = verdict.row(i)
        assert row["energy_floor_j_per_token"] is not None and row["energy_floor_j_per_token"] > 0
        if not verdict.possible[i]:
            assert not results[cfg.key][1].feasible, cfg.key
    assert any(ev.feasible for key, (_, ev) in results.items() if TOY in key)
    rec = report["recommendation"]
    assert rec is not None
    cheapest = min((cfg.capex_usd, key) for key, (cfg, ev) in results.items() if ev.feasible)[1]
    assert rec["key"] == cheapest
    assert TOY in rec["key"]  # the toy is the cheapest system that meets the targets
    assert sum(report["space"]["screened_out"].values()) > 0


@pytest.mark.usefixtures("family")
def test_the_family_declares_and_checks_its_parameters() -> None:
    schema = describe_family(toy.KIND)
    assert [p["name"] for p in schema["params"]] == ["lanes", "clock_ghz"]
    assert schema["params"][1]["unit"] == "GHz" and schema["params"][1]["required"]
    record = dict(toy.records()["devices"][0])
    check_device(device_from_dict(record))
    with pytest.raises(SpecError) as exc:
        device_from_dict({**record, "params": {"lanes": 1024}})
    assert exc.value.field == f"{TOY}.params.clock_ghz"
    with pytest.raises(SpecError) as exc:
        device_from_dict({**record, "params": {**record["params"], "lanes": 0}})
    assert exc.value.field == f"{TOY}.params.lanes"
    with pytest.raises(SpecError) as exc:
        device_from_dict({**record, "params": {**record["params"], "cores": 8}})
    assert exc.value.field == f"{TOY}.params.cores"


def test_a_kind_without_a_family_is_refused_by_the_catalog() -> None:
    """Outside the fixture the toy kind has no family: its record names the kind."""
    with pytest.raises(SpecError) as exc:
        device_from_dict(toy.records()["devices"][0])
    assert exc.value.field == f"{TOY}.kind"


def test_parallel_degrees_follow_the_familys_model_parallel_trait() -> None:
    """The ``homogeneous`` policy asks the family, not the kind, whether a group of its
    devices can serve one replica: the toy is refused tensor parallelism naming the device
    until its family declares ``model_parallel``, then the pair runs as one replica."""
    doc = {
        "name": "toy tensor parallel",
        "model": "llama2-7b",
        "workload": _workload(12),
        "systems": [
            {
                "name": "toy tp2",
                "policy": "homogeneous",
                "devices": [{"device": TOY, "count": 2}],
                "options": {"max_batch": 8, "tensor_parallel": 2, "link": "pcie4-x16"},
            }
        ],
    }
    with toy.registered(), pytest.raises(ScenarioValidationError) as exc:
        parse_scenario(doc, toy.catalog())
    assert list(exc.value.errors) == ["systems[0].devices[0].device"]
    assert "not toy-accel (toy-accel-1)" in exc.value.errors["systems[0].devices[0].device"][0]
    with toy.registered(toy.ShardedToyAccelModel):
        system = simulate(parse_scenario(doc, toy.catalog()))["systems"][0]
    parallel = system["devices"][0]["parallel"]
    assert (parallel["tensor_parallel"], parallel["replicas"]) == (2, 1)
    assert system["throughput_tok_s"] > 0
