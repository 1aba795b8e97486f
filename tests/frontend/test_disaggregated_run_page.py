"""The run page shows a disaggregated system's hand-over and pools: the policy declares its
``disaggregated`` block (``Policy.result_blocks``) and the page shows a block's notes, which
carry the KV-transfer share, each pool's utilisation and the queueing at the hand-over."""

from __future__ import annotations

from frontend.views import runs
from simulations.core.simulate import simulate
from tests.core.policies.disaggregated.conftest import doc, parse


def test_the_run_page_shows_the_kv_transfer_pools_and_hand_over_queueing() -> None:
    system = simulate(parse(doc({"memory_utilization": 0.2}, requests=60)))["systems"][0]
    blocks = runs._blocks(system)
    assert blocks[0] is system["disaggregated"]
    notes = blocks[0]["notes"]
    assert "KV transfer:" in notes and "of the requests' time" in notes
    assert "prefill pool" in notes and "decode pool" in notes
    assert "queueing at the hand-over" in notes
