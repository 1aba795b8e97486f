"""GLITCHES is a member of the disaggregated family: the ``disaggregated`` policy whose
scheduler runs with GLITCHES' rules (:data:`~simulations.core.policies.disaggregated.sim.
GLITCHES`) serves a GPU-prefill, FPGA-decode system as the ``glitches`` policy does, and
each rule it sets is one the family's scheduler keeps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.engine.core import DECODE, SimOutput
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.policies.disaggregated import DisaggregatedPolicy
from simulations.core.policies.disaggregated.sim import GLITCHES, DisaggSim, Scheduling
from simulations.core.policies.glitches import GlitchesPolicy
from simulations.core.spec import (
    ArrivalSpec,
    DevicePlacement,
    LengthDist,
    SystemSpec,
    WorkloadSpec,
)

CAT = builtin_catalog()
MODEL = CAT.model("llama2-7b")


def _pl(slug: str, n: int, role: str) -> DevicePlacement:
    d = CAT.device(slug)
    return DevicePlacement(d, n, CAT.default_runtime(d), role)


def _systems(gpus: int, fpgas: int, gpu_decode: bool) -> tuple[SystemSpec, SystemSpec]:
    devices = (_pl("a100-80gb", gpus, "prefill"), _pl("u280", fpgas, "decode"))
    glitches = SystemSpec("g", "glitches", devices, {"gpu_decode": gpu_decode})
    # GLITCHES' batch-1 GPU prefill and FPGA decode and its default prefetch ratio
    options = {"prefill_max_batch": 1, "decode_max_batch": 1, "prefetch_ratio": 4}
    disagg = SystemSpec("d", "disaggregated", devices, options)
    return glitches, disagg


def _requests(rate: float, seed: int = 3) -> RequestSet:
    wl = WorkloadSpec(
        requests=60,
        input_tokens=LengthDist("uniform", low=64, high=2048),
        output_tokens=LengthDist("uniform", low=1, high=300),
        arrival=ArrivalSpec("poisson", rate_per_s=rate),
        seed=seed,
    )
    return generate_requests(wl, MODEL)


def _same(a: SimOutput, b: SimOutput) -> None:
    """Every time, placement, event count and device figure equal: the same scheduler
    with the same rules on the same cost models."""
    assert a.events == b.events
    assert np.array_equal(a.first_token_s, b.first_token_s)
    assert np.array_equal(a.finish_s, b.finish_s)
    assert np.array_equal(a.finished_on, b.finished_on)
    for ua, ub in zip(a.units, b.units, strict=True):
        fields = ("device", "busy_s", "busy_j", "decode_tokens", "prefill_tokens", "mem_peak_bytes")
        assert [getattr(ua, f) for f in fields] == [getattr(ub, f) for f in fields]


@pytest.mark.parametrize(
    ("gpus", "fpgas", "gpu_decode", "rate"),
    [
        pytest.param(1, 3, True, 3.0, id="1gpu-3fpga-fallback"),
        pytest.param(2, 2, True, 6.0, id="2gpu-2fpga-fallback"),
        pytest.param(1, 2, False, 3.0, id="no-gpu-decode"),
    ],
)
def test_the_disaggregated_policy_with_glitches_rules_serves_as_glitches_does(
    gpus: int, fpgas: int, gpu_decode: bool, rate: float
) -> None:
    reqs = _requests(rate)
    g_sys, d_sys = _systems(gpus, fpgas, gpu_decode)
    g_sim = GlitchesPolicy().build_sim(g_sys, MODEL, reqs)
    rules = replace(GLITCHES, fallback_decode=gpu_decode)
    member: Any = type("_GlitchesRules", (DisaggregatedPolicy,), {"scheduling": rules})
    d_sim = member().build_sim(d_sys, MODEL, reqs)
    assert type(g_sim) is DisaggSim and type(d_sim) is DisaggSim
    g, d = g_sim.run(), d_sim.run()
    _same(g, d)
    counters = (
        "decodes_streamed_to_fpga",
        "decodes_dispatched_to_fpga",
        "decodes_on_gpu",
        "mean_exposed_kv_transfer_ms",
    )
    assert [g.extra[k] for k in counters] == [d.extra[k] for k in counters]
    # the scenario exercises the paper's rules: hand-overs that waited for an FPGA, and
    # GPU decodes when the fallback is on
    assert g.extra["decodes_dispatched_to_fpga"] > 0
    assert (g.extra["decodes_on_gpu"] > 0) is gpu_decode


def test_the_default_rules_serve_the_same_system_differently() -> None:
    # The same pools under the family's defaults (routed prefill, most-free-KV dispatch,
    # no fallback, interleaved links): the rules above are what made the two agree.
    reqs = _requests(6.0)
    g_sys, d_sys = _systems(2, 2, True)
    g = GlitchesPolicy().simulate(g_sys, MODEL, reqs)
    d = DisaggregatedPolicy().simulate(d_sys, MODEL, reqs)
    assert not np.allclose(g.finish_s, d.finish_s, rtol=1e-6)
    assert "decodes_on_gpu" not in d.extra
    assert not any(x[2] == DECODE for x in d.units[0].timeline)


@pytest.mark.parametrize(
    ("rules", "what"),
    [
        (replace(GLITCHES, decode_dispatch="most_free_kv"), "dispatch"),
        (replace(GLITCHES, fifo_kv_links=False), "links"),
    ],
)
def test_each_of_glitches_rules_matters_on_a_busy_system(rules: Scheduling, what: str) -> None:
    # A U280 (8 GB HBM) listed before a VHK158 (32 GB) makes most-free-KV dispatch prefer
    # the VHK158 where FCFS takes the U280; concurrent KV streams share a GPU's PCIe link.
    reqs = _requests(6.0)
    devices = (
        _pl("a100-80gb", 2, "prefill"),
        _pl("u280", 1, "decode"),
        _pl("vhk158", 1, "decode"),
    )
    sys_ = SystemSpec("d", "disaggregated", devices, {"prefill_max_batch": 1})
    paper: Any = type("_Paper", (DisaggregatedPolicy,), {"scheduling": GLITCHES})
    other: Any = type("_Other", (DisaggregatedPolicy,), {"scheduling": rules})
    a = paper().simulate(sys_, MODEL, reqs)
    b = other().simulate(sys_, MODEL, reqs)
    assert not np.array_equal(a.finish_s, b.finish_s), what


def test_a_short_prompt_waits_for_its_host_sampled_first_token() -> None:
    # A 1-token prompt's KV (8 KB a layer at 8-bit KV, over two PCIe hops) arrives before
    # the 64 KB of logits have crossed, so the token's round trip through the host sets the
    # decode's start.
    reqs = RequestSet.from_lists([0.0], [1], [20])
    _, sys_ = _systems(1, 1, True)
    starts = []
    for first in (True, False):
        rules = replace(GLITCHES, host_first_token=first)
        member: Any = type("_Member", (DisaggregatedPolicy,), {"scheduling": rules})
        sim = member().build_sim(sys_, MODEL, reqs)
        sim.run()
        starts.append(sim.decode_start[0] - sim.prefill_end[0])
    gpu, fpga = CAT.device("a100-80gb").host_link, CAT.device("u280").host_link
    assert gpu is not None and fpga is not None
    round_trip = gpu.transfer_s(MODEL.vocab_size * 2) + fpga.transfer_s(4)
    assert starts[0] == pytest.approx(round_trip, rel=1e-12)
    assert starts[1] < starts[0]
