"""H2M2 boards in the search space: memory capacities as a searched, priced dimension."""

from __future__ import annotations

from typing import Any

from simulations.core.planner import Search, evaluate_config
from tests.core.planner.helpers import every_config, parse, small_doc


def _doc() -> dict[str, Any]:
    doc = small_doc(targets={"tpot_p90_ms": 12})
    doc["workload"]["requests"] = 24
    doc["space"] = {
        "devices": [
            {
                "device": "h2m2",
                "max_count": 2,
                "price_usd": 9000,
                "memory_options": {
                    "hbm_gb": [2, 48],
                    "lpddr_gb": [4, 256],
                    "hbm_usd_per_gb": 20,
                    "lpddr_usd_per_gb": 4,
                },
            }
        ],
        "policies": [{"policy": "h2m2", "options": {"mapping": ["h2m2"], "max_batch": [8]}}],
    }
    return doc


def test_a_board_too_small_for_the_weights_is_ruled_out_and_the_engine_agrees() -> None:
    plan = parse(_doc())
    search = Search(plan)
    report = search.run()
    rows = {c.key: (c, v.row(i)) for c, v, i in every_config(search)}
    cfg, row = rows["h2m2:1xh2m2[hbm2+lpddr4]:mapping=h2m2,max_batch=8"]
    assert row["verdict"] == "memory" and "weights" in row["detail"]
    assert not evaluate_config(plan, cfg).feasible
    assert rows["h2m2:1xh2m2[hbm48+lpddr4]:mapping=h2m2,max_batch=8"][1]["verdict"] == "possible"
    rec = report["recommendation"]
    assert rec is not None and "[hbm" in rec["key"]


def test_the_report_prices_each_memory_configuration_and_keeps_it_out_of_the_scenario() -> None:
    report = Search(parse(_doc())).run()
    items = {d["label"]: d for d in report["per_device_type"]}
    assert items["h2m2[hbm48+lpddr256]"]["price_usd"] == 9000 + 48 * 20 + 256 * 4
    assert "memory_options" in items["h2m2[hbm48+lpddr256]"]["price_source"]
    assert report["recommendation"]["key"] in report["scenario_omits"]["keys"]
    assert report["scenario"] is None


def test_ttft_counts_from_arrival_so_light_load_meets_a_target_a_closed_queue_misses() -> None:
    """The policy batches the requests that have arrived: spread out, each waits for its own
    batch only; all at once, the later batches queue behind the first (screen and engine
    agree on both)."""
    verdicts = {}
    for label, arrival in (
        ("closed", {"kind": "closed"}),
        ("light", {"kind": "poisson", "rate_per_s": 0.2}),
    ):
        doc = _doc()
        doc["targets"] = {"ttft_p90_ms": 400}
        doc["workload"]["arrival"] = arrival
        plan = parse(doc)
        search = Search(plan)
        search.run()
        key = "h2m2:1xh2m2[hbm48+lpddr256]:mapping=h2m2,max_batch=8"
        cfg, verdict, i = next((c, v, i) for c, v, i in every_config(search) if c.key == key)
        verdicts[label] = (verdict.row(i)["verdict"], evaluate_config(plan, cfg).feasible)
    assert verdicts == {"closed": ("ttft_alone", False), "light": ("possible", True)}
