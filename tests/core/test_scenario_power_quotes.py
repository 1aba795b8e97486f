"""A scenario device entry's ``tdp_w`` (the user's power quote per device): a device whose
vendor publishes no power (catalog ``tdp_w`` null) is refused without one, by JSON path;
with one it runs, the quote replacing the catalog figure for every device model, so energy
scales with it and latency does not; results say where the power came from; the quote
survives re-serialisation and separates otherwise identical systems."""

from __future__ import annotations

import copy
import functools
import math
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog, catalog_from_records, iter_records
from simulations.core.errors import SpecError
from simulations.core.scenario import MAX_TDP_W, parse_scenario, scenario_to_document
from simulations.core.simulate import _system_key, simulate
from simulations.core.spec import DevicePlacement, DeviceSpec
from tests.core.quoted_scenarios import homogeneous, run_systems, scenario_doc, scenario_errors

BASE = builtin_catalog()
#: The A100 80GB record with its power taken away, as the catalog holds devices whose vendor
#: publishes none (TPUs, Alveo V80). Its idle_w is 0 in the catalog, so every joule the GPU
#: model charges is a fraction of tdp_w and energy must scale exactly with a quote.
_RECORD = next(r for r in iter_records("devices") if r["slug"] == "a100-80gb")
UNPOWERED = "a100-unpowered"
CATALOG = catalog_from_records(
    devices=[
        {
            **copy.deepcopy(_RECORD),
            "slug": UNPOWERED,
            "name": "A100 80GB without a published power",
            "tdp_w": None,
            "sources": {**_RECORD["sources"], "tdp_w": "test double: not published"},
        },
        # No shipped record has a nonzero idle power; this double has one to bound quotes.
        {
            **copy.deepcopy(_RECORD),
            "slug": "a100-idling",
            "name": "A100 80GB with an idle power",
            "tdp_w": None,
            "idle_w": 50,
        },
    ],
    base=BASE,
)


_doc = functools.partial(scenario_doc, name="quoted power")
_errors = functools.partial(scenario_errors, catalog=CATALOG)
_run = functools.partial(run_systems, catalog=CATALOG)


def test_the_catalog_record_loads_without_a_power_figure() -> None:
    device = CATALOG.devices[UNPOWERED]
    assert device.tdp_w is None
    with pytest.raises(SpecError) as info:
        _ = device.board_power_w
    assert info.value.field == f"{UNPOWERED}.tdp_w"


def test_a_device_record_still_refuses_a_bad_published_power() -> None:
    for bad in (0, -5, float("nan"), float("inf")):
        with pytest.raises(SpecError) as info:
            DeviceSpec(**{**_kwargs(), "tdp_w": bad})
        assert info.value.field == "x.tdp_w"
    with pytest.raises(SpecError) as info:
        DeviceSpec(**{**_kwargs(), "tdp_w": 10, "idle_w": 20})
    assert info.value.field == "x.idle_w"
    # Idle power above an unknown board power cannot be checked, so it is not refused.
    assert DeviceSpec(**{**_kwargs(), "tdp_w": None, "idle_w": 20}).tdp_w is None


def _kwargs() -> dict[str, Any]:
    return {
        "slug": "x",
        "name": "x",
        "kind": "gpu",
        "vendor": "v",
        "memory": BASE.devices["a100-80gb"].memory,
        "tdp_w": 300,
        "idle_w": 0,
        "fp16_tflops": 100,
    }


def test_a_device_without_published_power_is_refused_without_a_quote_naming_the_field() -> None:
    errs = _errors(
        _doc(homogeneous({"device": "a100-80gb", "count": 1}, {"device": UNPOWERED, "count": 1}))
    )
    assert list(errs) == ["systems[0].devices[1].tdp_w"]
    (message,) = errs["systems[0].devices[1].tdp_w"]
    assert message == (
        f"{UNPOWERED} has no published power (see its source); give the board power you "
        "measured or were quoted, in W"
    )


@pytest.mark.parametrize(
    ("quote", "words"),
    [
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (-300, "positive"),
        (0, "positive"),
        (MAX_TDP_W * 10, "at most"),
        ("300", "must be a number, got string"),
        (True, "must be a number, got boolean"),
    ],
)
def test_it_rejects_a_bad_power_quote_naming_its_path(quote: Any, words: str) -> None:
    errs = _errors(_doc(homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": quote})))
    assert list(errs) == ["systems[0].devices[0].tdp_w"]
    assert words in errs["systems[0].devices[0].tdp_w"][0]


def test_a_power_quote_below_the_idle_power_is_refused() -> None:
    errs = _errors(_doc(homogeneous({"device": "a100-idling", "count": 1, "tdp_w": 25})))
    assert list(errs) == ["systems[0].devices[0].tdp_w"]
    assert "idle power (50 W" in errs["systems[0].devices[0].tdp_w"][0]
    spec = parse_scenario(
        _doc(homogeneous({"device": "a100-idling", "count": 1, "tdp_w": 50})), CATALOG
    )
    assert spec.systems[0].devices[0].device.tdp_w == 50


def test_a_placement_built_in_code_refuses_a_device_without_power_and_without_a_quote() -> None:
    runtime = BASE.runtimes["vllm-fp16"]
    with pytest.raises(SpecError) as info:
        DevicePlacement(CATALOG.devices[UNPOWERED], 1, runtime)
    assert info.value.field == f"{UNPOWERED}.tdp_w"
    with pytest.raises(SpecError) as info:
        DevicePlacement(CATALOG.devices[UNPOWERED], 1, runtime, quoted_tdp_w=float("nan"))
    assert info.value.field == f"{UNPOWERED}.tdp_w"


def test_a_quote_becomes_the_placements_device_power() -> None:
    spec = parse_scenario(
        _doc(homogeneous({"device": UNPOWERED, "count": 2, "tdp_w": 350})), CATALOG
    )
    (placement,) = spec.systems[0].devices
    assert placement.quoted_tdp_w == 350
    assert placement.device.tdp_w == 350
    assert placement.device.slug == UNPOWERED
    # The catalog's record is untouched (a copy carries the quote).
    assert CATALOG.devices[UNPOWERED].tdp_w is None


def test_a_device_without_published_power_runs_with_a_quote_and_says_where_it_came_from() -> None:
    (result,) = _run(_doc(homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": 300})))
    assert result["energy_j"] > 0
    (device,) = result["devices"]
    assert device["tdp_w"] == 300
    assert device["power_source"] == "scenario"
    assert result["prices"] == [
        {
            "device": UNPOWERED,
            "role": "",
            "count": 1,
            "price_usd": _RECORD["price_usd"],
            "price_source": "catalog",
            "tdp_w": 300,
            "power_source": "scenario",
        }
    ]


def test_a_catalog_powered_placement_adds_no_power_keys() -> None:
    (result,) = _run(_doc(homogeneous({"device": "a100-80gb", "count": 1})))
    assert "tdp_w" not in result["devices"][0] and "power_source" not in result["devices"][0]
    assert "tdp_w" not in result["prices"][0]


def test_a_quote_equal_to_the_catalog_figure_gives_the_catalog_devices_figures() -> None:
    catalog, quoted = _run(
        _doc(
            homogeneous({"device": "a100-80gb", "count": 1}, name="catalog"),
            homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": _RECORD["tdp_w"]}, name="q"),
        )
    )
    for key in ("energy_j", "avg_power_w", "energy_j_per_token", "span_s", "throughput_tok_s"):
        assert quoted[key] == catalog[key], key


def test_a_quote_scales_energy_proportionally_and_leaves_latency_alone() -> None:
    low, high = _run(
        _doc(
            homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": 250}, name="low"),
            homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": 500}, name="high"),
        )
    )
    for key in ("energy_j", "avg_power_w", "energy_j_per_token"):
        assert math.isclose(high[key], 2 * low[key], rel_tol=1e-12), key
    assert math.isclose(
        high["energy_efficiency_tok_s_per_w"], low["energy_efficiency_tok_s_per_w"] / 2
    )
    assert math.isclose(high["devices"][0]["energy_j"], 2 * low["devices"][0]["energy_j"])
    for key in ("span_s", "throughput_tok_s", "ttft_ms", "tpot_ms", "e2e_s", "latency_cdf"):
        assert high[key] == low[key], key


def test_a_quote_overrides_a_published_power() -> None:
    catalog, quoted = _run(
        _doc(
            homogeneous({"device": "a100-80gb", "count": 1}, name="catalog"),
            homogeneous(
                {"device": "a100-80gb", "count": 1, "tdp_w": 2 * _RECORD["tdp_w"]}, name="q"
            ),
        )
    )
    assert math.isclose(quoted["energy_j"], 2 * catalog["energy_j"], rel_tol=1e-12)
    assert quoted["devices"][0]["power_source"] == "scenario"


def test_systems_differing_only_in_quoted_power_do_not_share_results() -> None:
    spec = parse_scenario(
        _doc(
            homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": 250}, name="a"),
            homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": 500}, name="b"),
            homogeneous({"device": UNPOWERED, "count": 1, "tdp_w": 250}, name="c"),
        ),
        CATALOG,
    )
    a, b, c = (_system_key(s) for s in spec.systems)
    assert a != b
    assert a == c
    ra, rb, rc = simulate(spec)["systems"]
    assert ra["energy_j"] != rb["energy_j"]
    assert ra["energy_j"] == rc["energy_j"]


def test_a_power_quote_survives_scenario_to_document() -> None:
    doc = _doc(
        homogeneous(
            {"device": UNPOWERED, "count": 2, "tdp_w": 275, "price_usd": 9000},
            {"device": "a100-80gb", "count": 1},
        )
    )
    spec = parse_scenario(doc, CATALOG)
    out = scenario_to_document(spec)
    devices = out["systems"][0]["devices"]
    assert devices[0]["tdp_w"] == 275
    assert devices[0]["price_usd"] == 9000
    assert "tdp_w" not in devices[1]
    assert parse_scenario(out, CATALOG) == spec
