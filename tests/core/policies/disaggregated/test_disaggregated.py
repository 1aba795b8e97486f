"""The disaggregated policy: links, the ideal split, exactly-once phases, backpressure,
determinism, validation."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from simulations.core.devices import build_device_model
from simulations.core.engine.requests import generate_requests
from simulations.core.errors import ScenarioValidationError
from simulations.core.simulate import simulate

from .conftest import doc, parse, run_sim

#: KV paths from the fastest to the slowest for an A100 → A100 hand-over: free, NVLink 3
#: (300 GB/s), PCIe 5 x16 (63), the default host round trip over each A100's PCIe 4 link
#: (two hops of 31.5 GB/s), 100G Ethernet (12.5).
LINKS: list[dict[str, Any]] = [
    {"kv_free": True},
    {"kv_link": "nvlink3"},
    {"kv_link": "pcie5-x16"},
    {},
    {"kv_link": "ethernet-100g"},
]


def _ttft(sim: Any) -> np.ndarray:
    return np.array(sim.first) - np.array(sim.arrival)


@pytest.mark.parametrize("overlap", [True, False])
def test_a_slower_link_never_lowers_ttft(overlap: bool) -> None:
    # A small KV pool on the prefill GPU (memory_utilization 0.2: ~2.4 GB next to 13.5 GB
    # of weights) so that KV waiting on the wire holds prefill memory back.
    stats = []
    for link in LINKS:
        sim, _ = run_sim(
            doc({**link, "memory_utilization": 0.2, "kv_overlap": overlap}, requests=150)
        )
        t = _ttft(sim)
        stats.append([t.mean(), *np.percentile(t, [50, 90, 99])])
    for faster, slower in itertools.pairwise(stats):
        assert all(s >= f - 1e-12 for f, s in zip(faster, slower, strict=True))
    # and the slowest link does cost TTFT here (the test can fail)
    assert stats[-1][0] > stats[0][0]


def _isolated(options: dict[str, Any]) -> Any:
    """Requests far apart (one every ~100 s): nothing queues anywhere."""
    return run_sim(
        doc(options, requests=12, arrival={"kind": "poisson", "rate_per_s": 0.01}),
        reference=True,
    )


def test_zero_cost_transfer_equals_the_ideal_split() -> None:
    # The ideal split: a request's decode starts on the decode device the moment its
    # prefill ends, so end-to-end = its prefill alone + its decode steps alone, each costed
    # by the device model directly.
    sim, req = _isolated({"kv_free": True})
    spec = parse(doc())
    model = spec.model
    p = spec.systems[0].devices[0]
    dm = build_device_model(p.device, p.runtime)
    for i in range(len(req)):
        prompt, out = int(req.input_tokens[i]), int(req.output_tokens[i])
        prefill = dm.prefill(model, [prompt]).seconds
        decode = sum(dm.decode_step(model, 1, prompt + k).seconds for k in range(out - 1))
        assert sim.first[i] == pytest.approx(sim.arrival[i] + prefill, rel=1e-12)
        assert sim.finish[i] == pytest.approx(sim.arrival[i] + prefill + decode, rel=1e-9)
        if out > 1:
            assert sim.decode_start[i] == sim.prefill_end[i]


def test_a_real_link_exposes_exactly_the_transfer_the_ideal_split_hides() -> None:
    ideal, req = _isolated({"kv_free": True})
    real, _ = _isolated({"kv_link": "ethernet-100g", "kv_overlap": False})
    kv_per_token = parse(doc()).model.kv_bytes_per_token(16)
    for i in range(len(req)):
        if req.output_tokens[i] == 1:
            continue
        assert real.first[i] == ideal.first[i]
        # not overlapped: the KV crosses 100G Ethernet (12.5 GB/s, 2.7 µs a layer) after
        # the prefill, layer by layer
        layers = 32
        wire = layers * (2.7e-6 + req.input_tokens[i] * kv_per_token / layers / 12.5e9)
        assert real.decode_start[i] - real.prefill_end[i] == pytest.approx(wire, rel=1e-9)
        assert real.finish[i] - ideal.finish[i] == pytest.approx(wire, rel=1e-9)


def _phases_once(sim: Any, req: Any) -> None:
    out = req.output_tokens
    assert sim.prefills == [1] * len(req)
    assert sim.decodes == [1 if o > 1 else 0 for o in out]
    assert sim.done == len(req)
    assert list(sim.generated) == list(out)
    assert not any(math.isnan(f) for f in sim.finish)


@pytest.mark.parametrize(
    "options",
    [{}, {"kv_overlap": False}, {"kv_link": "nvlink3", "prefill_max_batch": 1}, {"kv_free": True}],
)
def test_every_request_is_prefilled_once_and_decoded_once(options: dict[str, Any]) -> None:
    sim, req = run_sim(doc(options, requests=200, arrival={"kind": "closed"}))
    _phases_once(sim, req)


def test_backpressure_never_loses_a_request() -> None:
    # Decode GPUs with room for about two long requests' KV each, every request at once:
    # most prefilled requests must wait at the hand-over, holding prefill memory.
    sim, req = run_sim(doc({"memory_utilization": 0.2}, requests=200, arrival={"kind": "closed"}))
    _phases_once(sim, req)
    assert sim.backpressured > 0
    waited = [sim.handover_start[r] - sim.prefill_end[r] for r in range(len(req))]
    assert max(w for w in waited if not math.isnan(w)) > 0
    for u in sim.units:
        # peaks never pass the pool (alloc would have raised past the memory)
        assert u.mem_peak - u.weights <= sim.pool[u.index] * (1 + 1e-12)


def test_an_fpga_decode_pool_decodes_one_request_at_a_time() -> None:
    devices = [
        {"device": "a100-80gb", "count": 1, "role": "prefill"},
        {"device": "u280", "count": 2, "role": "decode"},
    ]
    sim, req = run_sim(doc({}, devices, requests=40, arrival={"kind": "closed"}))
    _phases_once(sim, req)
    assert sim.batch_cap[1:] == [1, 1]
    assert max(sim.slots) == 0


def test_mixed_device_types_in_one_pool_share_the_work() -> None:
    devices = [
        {"device": "h100-sxm", "count": 1, "runtime": "vllm-fp16", "role": "prefill"},
        {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "prefill"},
        {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
        {"device": "l40s", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
    ]
    # Every request at once: the A100's larger free KV memory takes the first hand-overs,
    # the L40S those that come when the A100 has filled up to its level.
    sim, req = run_sim(doc({}, devices, requests=400, arrival={"kind": "closed"}))
    _phases_once(sim, req)
    assert all(u.prefill_outputs > 0 for u in sim.prefill)
    assert all(u.decode_tokens > 0 for u in sim.decode)


def test_prefill_goes_to_the_instance_with_the_fewest_outstanding_prompt_tokens() -> None:
    devices = [
        {"device": "a100-80gb", "count": 2, "runtime": "vllm-fp16", "role": "prefill"},
        {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
    ]
    # Every request arrives at once, before any prefill ends, so the routing is the greedy
    # rule replayed over the prompts in arrival order: each to the least-loaded instance.
    sim, req = run_sim(doc({}, devices, requests=40, arrival={"kind": "closed"}))
    load = [0, 0]
    for prompt in req.input_tokens.tolist():
        load[min((0, 1), key=lambda u: (load[u], u))] += int(prompt)
    assert [u.prefill_tokens for u in sim.prefill] == load
    assert abs(load[0] - load[1]) <= int(req.input_tokens.max())


def test_decode_goes_to_the_instance_with_the_most_free_kv_memory() -> None:
    devices = [
        {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "prefill"},
        {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
        {"device": "l40s", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
    ]
    # one request at a time: the A100 (more memory left after the weights) always wins
    isolated = {"kind": "poisson", "rate_per_s": 0.01}
    sim, req = run_sim(doc({}, devices, requests=10, arrival=isolated))
    a100, l40s = sim.decode
    assert a100.decode_tokens == int((req.output_tokens - 1).sum())
    assert l40s.decode_tokens == 0


def test_the_fast_path_equals_the_step_by_step_reference() -> None:
    fast, _ = run_sim(doc({}, requests=60))
    ref, _ = run_sim(doc({}, requests=60), reference=True)
    np.testing.assert_allclose(fast.first, ref.first, rtol=1e-9)
    np.testing.assert_allclose(fast.finish, ref.finish, rtol=1e-6)


def test_a_scenario_gives_the_same_result_for_its_seed() -> None:
    d = doc({}, requests=80)
    a, b = simulate(parse(d)), simulate(parse(d))
    assert a == b
    other = simulate(parse(doc({}, requests=80, seed=4)))
    assert other["systems"][0]["ttft_ms"] != a["systems"][0]["ttft_ms"]


def test_the_result_carries_the_hand_over_and_pool_blocks() -> None:
    entry = simulate(parse(doc({"kv_link": "pcie4-x16"}, requests=60)))["systems"][0]
    block = entry["disaggregated"]
    assert 0 <= block["kv_transfer_share"] < 1
    assert block["prefill_pool"]["instances"] == 1
    assert block["decode_pool"]["devices"] == 2
    assert 0 < block["decode_pool"]["busy_fraction"] <= 1
    assert block["handover_queueing"]["mean_ms"] >= 0
    assert "disaggregated" not in entry["scheduler"]
    # the run page shows a block's notes: the figures are in them
    notes = block["notes"]
    assert f"{block['decode_pool']['busy_fraction']:.0%} busy" in notes
    assert f"{block['kv_transfer_share'] * 100:.3g} % of the requests' time" in notes
    assert f"mean {block['handover_queueing']['mean_ms']:.1f} ms" in notes
    # one prefill A100, two decode A100s: the counts read as words
    assert "(1 instance of 1 device)" in notes and "(2 instances of 2 devices)" in notes


def test_the_block_carries_the_pools_device_types_and_the_kv_bytes_moved() -> None:
    devices = [
        {"device": "h100-sxm", "count": 2, "runtime": "vllm-fp16", "role": "prefill"},
        {"device": "a100-80gb", "count": 1, "runtime": "vllm-fp16", "role": "decode"},
        {"device": "a100-40gb", "count": 2, "runtime": "vllm-fp16", "role": "decode"},
    ]
    d = doc({"kv_link": "pcie4-x16", "memory_utilization": 0.5}, devices=devices, requests=60)
    spec = parse(d)
    block = simulate(spec)["systems"][0]["disaggregated"]
    assert block["prefill_pool"]["device_types"] == [
        {"device": "h100-sxm", "devices": 2, "instances": 2}
    ]
    assert block["decode_pool"]["device_types"] == [
        {"device": "a100-80gb", "devices": 1, "instances": 1},
        {"device": "a100-40gb", "devices": 2, "instances": 2},
    ]
    # every request with more than its first token hands its prompt's KV over, at the
    # decode runtime's KV precision (both decode runtimes are FP16)
    requests = generate_requests(spec.workload, spec.model)
    handed = requests.output_tokens > 1
    per_token = spec.model.kv_bytes_per_token(16)
    assert block["handed_over"] == int(handed.sum())
    assert block["kv_bytes_moved"] == pytest.approx(
        float(requests.input_tokens[handed].sum()) * per_token
    )
    assert 0 <= block["backpressured"] <= block["handed_over"]


@pytest.mark.parametrize(
    ("options", "devices", "field"),
    [
        ({"kv_link": "warp-drive"}, None, "systems[0].options.kv_link"),
        ({"devices_per_node": 2}, None, "systems[0].options.nic_link"),
        ({"decode_tensor_parallel": 2}, None, "systems[0].options.link"),
        (
            {"decode_tensor_parallel": 3, "link": "nvlink3"},
            None,
            "systems[0].options.decode_tensor_parallel",
        ),
        (
            {},
            [{"device": "a100-80gb", "count": 2, "runtime": "vllm-fp16", "role": "prefill"}],
            "systems[0].devices",
        ),
    ],
)
def test_a_system_it_cannot_run_is_refused_naming_the_field(
    options: dict[str, Any], devices: Any, field: str
) -> None:
    with pytest.raises(ScenarioValidationError) as err:
        parse(doc(options, devices))
    assert field in err.value.errors, err.value.errors
