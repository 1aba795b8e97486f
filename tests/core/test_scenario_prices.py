"""A scenario device entry's ``price_usd`` (the user's quote per device): validation by JSON
path, and capex / cost efficiency / price provenance in the result for every policy."""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.errors import SpecError
from simulations.core.scenario import MAX_PRICE_USD, parse_scenario, scenario_to_document
from simulations.core.spec import DevicePlacement
from tests.core.quoted_scenarios import homogeneous, run_systems, scenario_doc, scenario_errors

CATALOG = builtin_catalog()


_doc = functools.partial(scenario_doc, name="quoted prices")
_errors = functools.partial(scenario_errors, catalog=CATALOG)
_run = functools.partial(run_systems, catalog=CATALOG)


@pytest.mark.parametrize(
    ("price", "words"),
    [
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (-float("inf"), "finite"),
        (-3500, "positive"),
        (0, "positive"),
        (MAX_PRICE_USD * 10, "at most"),
        ("3500", "must be a number, got string"),
        (True, "must be a number, got boolean"),
        ([3500], "must be a number, got array"),
    ],
)
def test_it_rejects_a_bad_quoted_price_naming_its_path(price: Any, words: str) -> None:
    doc = _doc(
        homogeneous({"device": "a100-80gb", "count": 1}),
        homogeneous(
            {"device": "a100-80gb", "count": 1},
            {"device": "a10g", "count": 2, "price_usd": price},
            name="other",
        ),
    )
    errs = _errors(doc)
    assert list(errs) == ["systems[1].devices[1].price_usd"]
    assert words in errs["systems[1].devices[1].price_usd"][0]


def test_the_largest_quote_and_a_null_one_are_accepted() -> None:
    doc = _doc(
        homogeneous(
            {"device": "a10g", "count": 1, "price_usd": MAX_PRICE_USD},
            {"device": "a100-80gb", "count": 1, "price_usd": None},
        )
    )
    placements = parse_scenario(doc, CATALOG).systems[0].devices
    assert placements[0].quoted_price_usd == MAX_PRICE_USD
    assert placements[1].quoted_price_usd is None


def test_a_placement_built_in_code_refuses_a_non_finite_quote() -> None:
    a10g = CATALOG.devices["a10g"]
    runtime = CATALOG.runtimes["vllm-fp16"]
    with pytest.raises(SpecError) as info:
        DevicePlacement(a10g, 1, runtime, quoted_price_usd=float("nan"))
    assert info.value.field == "a10g.price_usd"


def test_a_quote_prices_a_device_the_catalog_does_not() -> None:
    assert CATALOG.devices["a10g"].price_usd is None
    unquoted, quoted = _run(
        _doc(
            homogeneous({"device": "a10g", "count": 4}, name="catalog"),
            homogeneous({"device": "a10g", "count": 4, "price_usd": 3500}, name="quoted"),
        )
    )
    assert unquoted["capex_usd"] is None and unquoted["cost_efficiency_tok_s_per_usd"] is None
    assert unquoted["devices"][0]["price_usd"] is None
    assert unquoted["devices"][0]["price_source"] is None
    assert quoted["capex_usd"] == 4 * 3500
    assert math.isclose(
        quoted["cost_efficiency_tok_s_per_usd"], quoted["throughput_tok_s"] / (4 * 3500)
    )
    assert quoted["devices"][0]["price_usd"] == 3500
    assert quoted["devices"][0]["price_source"] == "scenario"
    assert quoted["prices"] == [
        {"device": "a10g", "role": "", "count": 4, "price_usd": 3500, "price_source": "scenario"}
    ]


def test_a_quote_overrides_the_catalog_price_entry_by_entry() -> None:
    catalog_price = CATALOG.devices["a100-80gb"].price_usd
    assert catalog_price is not None
    (result,) = _run(
        _doc(
            {
                "name": "split",
                "policy": "glitches",
                "devices": [
                    {"device": "a100-80gb", "count": 1, "role": "prefill", "price_usd": 15000},
                    {"device": "u280", "count": 3, "role": "decode"},
                ],
            }
        )
    )
    u280 = CATALOG.devices["u280"].price_usd
    assert u280 is not None
    assert result["capex_usd"] == 15000 + 3 * u280
    by_device = {d["device"]: d for d in result["prices"]}
    assert by_device["a100-80gb"]["price_source"] == "scenario"
    assert by_device["u280"] == {
        "device": "u280",
        "role": "decode",
        "count": 3,
        "price_usd": u280,
        "price_source": "catalog",
    }


@pytest.mark.parametrize("policy", ["neo", "gpu-only", "fastdecode+"])
def test_neo_nodes_pay_for_every_tensor_parallel_gpu_and_the_host_cpu(policy: str) -> None:
    # gpu-only leaves the host idle (no engine unit) and runs its GPUs as one TP unit;
    # both were bought, so capex counts them all.
    (result,) = _run(
        _doc(
            {
                "name": policy,
                "policy": policy,
                "devices": [
                    {
                        "device": "a10g",
                        "count": 2,
                        "role": "gpu",
                        "runtime": "vllm-fp16",
                        "price_usd": 3500,
                    },
                    {"device": "g5-4xlarge-cpu", "count": 1, "role": "cpu", "price_usd": 1500},
                ],
            },
            model="llama3.1-8b",
        )
    )
    assert result["capex_usd"] == 2 * 3500 + 1500
    assert {p["device"]: p["price_source"] for p in result["prices"]} == {
        "a10g": "scenario",
        "g5-4xlarge-cpu": "scenario",
    }
    for d in result["devices"]:
        assert d["price_source"] == "scenario"


def test_a_soc_is_priced_by_its_processors_quotes() -> None:
    (result,) = _run(
        _doc(
            {
                "name": "phone",
                "policy": "heterollm",
                "options": {"mode": "hetero-tensor"},
                "devices": [
                    {
                        "device": "adreno-750",
                        "count": 1,
                        "role": "gpu",
                        "runtime": "w4a16-opencl-adreno",
                        "price_usd": 300,
                    },
                    {"device": "hexagon-npu", "count": 1, "role": "npu", "price_usd": 200},
                ],
            },
            model="llama3.2-3b",
        )
    )
    assert result["capex_usd"] == 500
    assert {d["device"]: (d["price_usd"], d["price_source"]) for d in result["devices"]} == {
        "adreno-750": (300, "scenario"),
        "hexagon-npu": (200, "scenario"),
    }


def test_a_quote_survives_scenario_to_document() -> None:
    doc = _doc(
        homogeneous(
            {"device": "a10g", "count": 2, "price_usd": 3500},
            {"device": "a100-80gb", "count": 1},
        )
    )
    spec = parse_scenario(doc, CATALOG)
    out = scenario_to_document(spec)
    devices = out["systems"][0]["devices"]
    assert devices[0]["price_usd"] == 3500
    assert "price_usd" not in devices[1]
    assert parse_scenario(out, CATALOG) == spec


def test_an_h2m2_board_is_priced_by_its_quote() -> None:
    assert CATALOG.devices["h2m2"].price_usd is None
    unquoted, quoted = _run(
        _doc(
            {
                "name": "catalog",
                "policy": "h2m2",
                "devices": [{"device": "h2m2", "count": 1}],
                "options": {"mapping": "h2m2", "max_batch": 4},
            },
            {
                "name": "quoted",
                "policy": "h2m2",
                "devices": [{"device": "h2m2", "count": 1, "price_usd": 15000}],
                "options": {"mapping": "h2m2", "max_batch": 4},
            },
            model="llama2-70b",
        )
    )
    assert unquoted["capex_usd"] is None and unquoted["cost_efficiency_tok_s_per_usd"] is None
    assert quoted["capex_usd"] == 15000
    assert math.isclose(quoted["cost_efficiency_tok_s_per_usd"], quoted["throughput_tok_s"] / 15000)
    assert [(d["price_usd"], d["price_source"]) for d in quoted["devices"]] == [(15000, "scenario")]
