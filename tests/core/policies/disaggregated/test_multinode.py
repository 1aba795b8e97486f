"""Pools that span nodes: KV transfers and tensor-parallel collectives that cross nodes use
the NIC link (GLITCHES §III's multi-node deployment)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulations.core.errors import ScenarioValidationError

from .conftest import doc, parse, run_sim

ONE_EACH: list[dict[str, Any]] = [
    {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "prefill"},
    {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
]


def test_a_kv_transfer_across_nodes_takes_the_nic() -> None:
    # Two nodes of one device each: the hand-over crosses 100G Ethernet, exactly as a
    # direct 100G link between the two devices of one node would carry it.
    across, _ = run_sim(
        doc({"devices_per_node": 1, "nic_link": "ethernet-100g"}, ONE_EACH, requests=80)
    )
    direct, _ = run_sim(doc({"kv_link": "ethernet-100g"}, ONE_EACH, requests=80))
    local, _ = run_sim(doc({}, ONE_EACH, requests=80))
    assert across.extra["nodes"] == 2 and local.extra["nodes"] == 1
    np.testing.assert_array_equal(across.finish, direct.finish)
    assert np.mean(across.finish) > np.mean(local.finish)


def test_instances_on_one_node_keep_their_local_path() -> None:
    # Prefill GPU and first decode GPU on node 0, two more decode GPUs on node 1. A request
    # that finds every decode GPU empty goes to the first (ties to the lowest index), on
    # node 0, and finishes as on one node; one handed to node 1 crosses the NIC, later.
    devices = [
        *ONE_EACH,
        {"device": "a100-80gb", "count": 2, "runtime": "vllm-fp16", "role": "decode"},
    ]
    isolated = {"kind": "poisson", "rate_per_s": 0.01}
    two, _ = run_sim(
        doc(
            {"devices_per_node": 2, "nic_link": "ethernet-100g"},
            devices,
            requests=30,
            arrival=isolated,
        )
    )
    one, _ = run_sim(doc({}, devices, requests=30, arrival=isolated))
    assert two.extra["nodes"] == 2
    local = [r for r in range(30) if two.d_unit[r] == two.decode[0].index]
    remote = [r for r in range(30) if two.d_unit[r] > two.decode[0].index]
    assert len(local) > 20 and remote
    assert [two.finish[r] for r in local] == [one.finish[r] for r in local]
    assert all(two.finish[r] > one.finish[r] for r in remote)


def test_a_tensor_parallel_group_across_nodes_all_reduces_over_the_nic() -> None:
    devices = [
        {"device": "a100-80gb", "count": 2, "runtime": "vllm-fp16", "role": "prefill"},
        {"device": "a100-80gb", "count": 2, "runtime": "vllm-fp16", "role": "decode"},
    ]
    options = {
        "prefill_tensor_parallel": 2,
        "decode_tensor_parallel": 2,
        "devices_per_node": 3,
        "link": "nvlink3",
        "nic_link": "ethernet-100g",
    }
    sim, req = run_sim(doc(options, devices, requests=40))
    prefill, decode = sim.units
    assert prefill.parallel is not None and decode.parallel is not None
    assert prefill.parallel["link"] == "nvlink3"  # devices 0-1: node 0
    assert decode.parallel["link"] == "ethernet-100g"  # devices 2-3: nodes 0 and 1
    assert sim.done == len(req)


def test_a_system_over_nodes_without_a_nic_link_is_refused() -> None:
    with pytest.raises(ScenarioValidationError) as err:
        parse(doc({"devices_per_node": 1}, ONE_EACH))
    assert "systems[0].options.nic_link" in err.value.errors
