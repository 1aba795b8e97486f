"""The plan report says, for every placement of the recommendation, how its runtime profile
was calibrated (measured on the device, transferred from others, or derived)."""

from __future__ import annotations

from simulations.core.planner import Search
from tests.core.planner.helpers import parse, small_doc


def test_the_recommendation_says_where_each_devices_figures_come_from() -> None:
    doc = small_doc()
    doc["space"]["devices"].append({"device": "h100-sxm", "max_count": 1})
    report = Search(parse(doc)).run()
    rec = report["recommendation"]
    assert rec is not None
    entries = rec["calibration"]
    assert [e["device"] for e in entries] == [d["device"] for d in rec["system"]["devices"]]
    for e in entries:
        if e["device"] in ("a100-80gb", "v100s", "u280"):
            assert e["calibration"] == "measured", e
        else:
            assert e["calibration"] == "transferred", e
            assert "not measured on" in e["calibration_note"]
    h100 = next(r for r in report["per_device_type"] if r["device"] == "h100-sxm")
    assert h100["cheapest"] is not None
    first = h100["cheapest"]["calibration"][0]
    assert (first["device"], first["calibration"]) == ("h100-sxm", "transferred")
    assert first["calibration_note"] == (
        "hf-eager-fp16: predicted from a100-80gb, v100s measurements; not measured on h100-sxm."
    )
