"""GLITCHES scheduler (§III): dispatch rules, overlap of the KV stream, equivalences."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from simulations.core.engine.core import DECODE, PREFILL, SimOutput
from simulations.core.engine.requests import RequestSet, generate_requests
from simulations.core.errors import SpecError
from simulations.core.policies import get_policy
from simulations.core.policies.disaggregated.sim import DisaggSim
from simulations.core.policies.disaggregated.transfer import fifo_two_hop
from simulations.core.policies.glitches.policy import GlitchesPolicy, kv_transfer_seconds
from simulations.core.policies.homogeneous import HomogeneousPolicy
from simulations.core.spec import ArrivalSpec, LengthDist, SystemSpec, WorkloadSpec
from tests.core.engine.doubles import (
    LLAMA7B,
    fpga_spec,
    gpu_spec,
    mixed_factory,
    placement,
    system,
)


def _system(gpus: int = 1, fpgas: int = 3, gpu_mem: float = 80, **options: object) -> SystemSpec:
    parts = [placement(gpu_spec(mem_gb=gpu_mem), gpus, "prefill")]
    if fpgas:
        parts.append(placement(fpga_spec(), fpgas, "decode", bits=4, kv_bits=8))
    return system("g", "glitches", *parts, **options)


def _requests(n: int = 120, rate: float | None = None, seed: int = 5) -> RequestSet:
    wl = WorkloadSpec(
        requests=n,
        input_tokens=LengthDist("uniform", low=64, high=2048),
        output_tokens=LengthDist("uniform", low=1, high=400),
        arrival=ArrivalSpec("closed") if rate is None else ArrivalSpec("poisson", rate_per_s=rate),
        seed=seed,
    )
    return generate_requests(wl, LLAMA7B)


def _sim(sys: SystemSpec, reqs: RequestSet, *, reference: bool = False) -> DisaggSim:
    pol = GlitchesPolicy(mixed_factory(), reference=reference, audit=True, timeline_cap=None)
    return pol.build_sim(sys, LLAMA7B, reqs)


def _run(sys: SystemSpec, reqs: RequestSet, *, reference: bool = False) -> SimOutput:
    return _sim(sys, reqs, reference=reference).run()


def test_it_is_registered_with_prefill_and_decode_roles() -> None:
    cls = get_policy("glitches")
    assert cls is GlitchesPolicy
    desc = cls.describe()
    assert [r["name"] for r in desc["roles"]] == ["prefill", "decode"]
    opts = {o["name"]: o for o in desc["options"]}
    assert opts["prefetch_ratio"]["default"] == 4


SCENARIOS = [
    pytest.param(dict(gpus=1, fpgas=3), None, id="1gpu-3fpga-closed"),
    pytest.param(dict(gpus=1, fpgas=3), 1.5, id="1gpu-3fpga-poisson"),
    pytest.param(dict(gpus=2, fpgas=5), 4.0, id="2gpu-5fpga-poisson"),
    pytest.param(dict(gpus=1, fpgas=2, gpu_mem=17), None, id="gpu-memory-full"),
    pytest.param(dict(gpus=1, fpgas=0), 0.5, id="gpu-only"),
]


@pytest.mark.parametrize(("kw", "rate"), SCENARIOS)
def test_fast_forward_gives_the_step_by_step_times(kw: dict, rate: float | None) -> None:
    reqs = _requests(rate=rate)
    fast = _run(_system(**kw), reqs)
    ref = _run(_system(**kw), reqs, reference=True)
    assert ref.events > 3 * fast.events
    for a, b in ((fast.first_token_s, ref.first_token_s), (fast.finish_s, ref.finish_s)):
        assert (np.abs(a - b) / np.abs(b)).max() < 1e-9
    assert np.array_equal(fast.finished_on, ref.finished_on)


@pytest.mark.parametrize(("kw", "rate"), SCENARIOS)
def test_invariants_hold(kw: dict, rate: float | None) -> None:
    reqs = _requests(rate=rate)
    out = _run(_system(**kw), reqs)
    assert np.all(np.isfinite(out.finish_s))
    assert np.all(out.first_token_s >= reqs.arrival_s)
    assert np.all(out.finish_s >= out.first_token_s)
    produced = sum(u.decode_tokens + u.prefill_outputs for u in out.units)
    assert produced == int(reqs.output_tokens.sum())
    assert sum(u.prefill_tokens for u in out.units) == int(reqs.input_tokens.sum())
    for u in out.units:
        iv = sorted(u.timeline, key=lambda x: x[0])
        assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(iv))
        assert u.mem_peak_bytes <= u.mem_capacity_bytes
        if u.role == "decode":
            assert all(x[2] == DECODE for x in iv)  # FPGAs never prefill


@pytest.mark.parametrize(("kw", "rate"), SCENARIOS[:4])
def test_an_fpga_is_never_idle_while_a_decode_waits(kw: dict, rate: float | None) -> None:
    sim = _sim(_system(**kw), _requests(rate=rate))
    sim.run()
    waited = [s for s in sim.state_log if s[2] > 0]
    assert waited, "the scenario should make decodes wait"
    assert all(idle_fpgas == 0 for _, idle_fpgas, _, _, _ in waited)
    # and no prefill stays waiting while an idle GPU has room for it
    assert not any(s[4] for s in sim.state_log)


@pytest.mark.parametrize(("kw", "rate"), SCENARIOS[:4])
def test_the_gpu_decodes_only_when_every_fpga_is_busy_and_no_prefill_fits(
    kw: dict, rate: float | None
) -> None:
    sim = _sim(_system(**kw), _requests(rate=rate))
    out = sim.run()
    starts = [e for e in sim.fallback_log if not e[3]]
    assert starts, "the scenario should make a GPU decode"
    assert all(idle_fpgas == 0 for _, _, _, _, idle_fpgas, _ in starts)
    assert not any(head_fits for *_, head_fits in sim.fallback_log)
    assert out.extra["decodes_on_gpu"] == len(starts)


def test_a_waiting_prefill_stops_the_gpu_decode_at_the_next_iteration() -> None:
    # One FPGA busy with a long decode; the GPU decodes request 1 when request 2 arrives.
    reqs = RequestSet.from_lists([0.0, 0.0, 3.0], [512, 512, 512], [2000, 2000, 10])
    sim = _sim(_system(fpgas=1), reqs)
    out = sim.run()
    gpu = out.units[0]
    prefill_2 = next(x for x in gpu.timeline if x[2] == PREFILL and x[3] == 2)
    step = sim.units[0].curve.step(1, 1024)[0]
    assert 3.0 < prefill_2[0] <= 3.0 + 1.5 * step
    # the GPU decode of request 1 resumes after the prefill and is split around it
    decodes_1 = [x for x in gpu.timeline if x[2] == DECODE and x[3] == 1]
    assert len(decodes_1) == 2
    assert decodes_1[0][1] <= prefill_2[0] + 1e-12 <= prefill_2[1] <= decodes_1[1][0] + 1e-12
    assert out.finished_on[1] == 0  # the paused decode stays on its GPU


def test_the_kv_stream_overlaps_the_prefill_and_exposes_only_the_last_layer() -> None:
    reqs = RequestSet.from_lists([0.0], [2048], [50])
    sim = _sim(_system(fpgas=2), reqs)
    out = sim.run()
    gpu, fpga = out.units[0], out.units[1]
    prefill = next(x for x in gpu.timeline if x[2] == PREFILL)
    recv = next(x for x in fpga.link_timeline if x[5] == "in")
    decode = next(x for x in fpga.timeline if x[2] == DECODE)
    assert prefill[0] < recv[0] < prefill[1]  # the transfer starts during the prefill
    layer_bytes = 2048 * LLAMA7B.kv_bytes_per_token(8) / LLAMA7B.n_layers
    hop = gpu_spec().host_link.transfer_s(layer_bytes) + fpga_spec().host_link.transfer_s(  # type: ignore[union-attr]
        layer_bytes
    )
    whole = kv_transfer_seconds(LLAMA7B, 2048, gpu_spec(), fpga_spec(), 8)
    assert decode[0] - prefill[1] < 1.5 * hop
    assert decode[0] - prefill[1] < 0.1 * whole
    assert out.extra["decodes_streamed_to_fpga"] == 1


def test_a_decode_that_waits_for_an_fpga_gets_its_whole_kv_sent_later() -> None:
    # 1 FPGA, 3 requests at once: the GPU prefills all three; request 1 and 2 wait.
    reqs = RequestSet.from_lists([0.0] * 3, [1024] * 3, [300] * 3)
    out = _run(_system(fpgas=1, gpu_decode=False), reqs)
    assert out.extra["decodes_dispatched_to_fpga"] == 2
    assert out.extra["decodes_on_gpu"] == 0
    assert np.all(out.finished_on == 1)
    gpu = out.units[0]
    assert not any(x[2] == DECODE for x in gpu.timeline)


@pytest.mark.parametrize("layers", [1, 2, 7, 32])
def test_the_layer_pipeline_closed_form_matches_the_recursion(layers: int) -> None:
    rng = np.random.default_rng(layers)
    for _ in range(200):
        start, c, h1, h2 = rng.uniform(0, 1, 4) * [10, 0.01, 0.02, 0.02]
        f1, f2 = start + rng.uniform(-0.2, 0.2, 2)
        c2 = c3 = -math.inf
        first = None
        for i in range(layers):
            s2 = max(f1 if i == 0 else c2, start + (i + 1) * c)
            first = s2 if first is None else first
            c2 = s2 + h1
            c3 = max(f2 if i == 0 else c3, c2) + h2
        got = fifo_two_hop(start, c, h1, h2, layers, f1, f2)
        assert got[0] == pytest.approx(first)
        assert got[1] == pytest.approx(c2)
        assert got[2] == pytest.approx(c3)


def test_one_gpu_without_fpgas_serves_like_homogeneous_batch_one() -> None:
    # Sparse arrivals: every request is served alone, so both give the same times.
    dense = _requests(n=60)
    reqs = RequestSet.from_lists(np.arange(60) * 60.0, dense.input_tokens, dense.output_tokens)
    g = _run(_system(fpgas=0), reqs)
    hom_sys = system("h", "homogeneous", placement(gpu_spec(), 1), max_batch=1)
    h = HomogeneousPolicy(mixed_factory()).simulate(hom_sys, LLAMA7B, reqs)
    assert (np.abs(g.finish_s - h.finish_s) / h.finish_s).max() < 1e-9
    assert (np.abs(g.first_token_s - h.first_token_s) / h.first_token_s).max() < 1e-9
    # Saturated (closed) load: the order differs (prefills first) but not the total work.
    reqs = _requests(n=60)
    g = _run(_system(fpgas=0), reqs)
    h = HomogeneousPolicy(mixed_factory()).simulate(hom_sys, LLAMA7B, reqs)
    assert g.t_end == pytest.approx(h.t_end, rel=1e-9)
    assert g.units[0].busy_j == pytest.approx(h.units[0].busy_j, rel=1e-9)


def test_a_higher_prefetch_ratio_speeds_up_fpga_decode() -> None:
    reqs = _requests(n=40)
    m1 = _run(_system(prefetch_ratio=1, gpu_decode=False), reqs)
    m4 = _run(_system(prefetch_ratio=4, gpu_decode=False), reqs)
    assert m4.t_end < m1.t_end


def test_it_is_deterministic() -> None:
    reqs = _requests(rate=2.0)
    a = _run(_system(gpus=2, fpgas=4), reqs)
    b = _run(_system(gpus=2, fpgas=4), reqs)
    assert np.array_equal(a.finish_s, b.finish_s)


@pytest.mark.parametrize(
    ("devices", "field"),
    [
        ([placement(fpga_spec(), 1, "prefill")], "devices[0].role"),
        (
            [placement(gpu_spec(), 1, "prefill"), placement(gpu_spec(), 1, "decode")],
            "devices[1].role",
        ),
        ([placement(gpu_spec(), 1, "draft")], "devices[0].role"),
        ([placement(fpga_spec(), 2, "decode", bits=4)], "devices"),
    ],
)
def test_it_names_the_field_of_a_bad_system(devices: list, field: str) -> None:
    sys = system("bad", "glitches", *devices)
    with pytest.raises(SpecError) as err:
        _run(sys, _requests(n=2))
    assert err.value.field == field


def test_an_unknown_option_is_rejected() -> None:
    with pytest.raises(SpecError) as err:
        _run(_system(prefetch=4), _requests(n=2))
    assert err.value.field == "options.prefetch"


def test_with_the_catalog_models_fast_forward_still_matches_the_reference() -> None:
    # The real U280 model is a staircase in the cached tokens (tile-quantised KV loads),
    # which the fast path sums from dense prefix tables; the A100 model has roofline kinks.
    from simulations.core.catalog import builtin_catalog
    from simulations.core.spec import DevicePlacement

    cat = builtin_catalog()
    model = cat.model("llama2-7b")

    def pl(slug: str, n: int, role: str = "") -> DevicePlacement:
        d = cat.device(slug)
        return DevicePlacement(d, n, cat.default_runtime(d), role)

    wl = WorkloadSpec(
        requests=40,
        input_tokens=LengthDist("uniform", low=50, high=2000),
        output_tokens=LengthDist("uniform", low=1, high=300),
        arrival=ArrivalSpec("poisson", rate_per_s=2.0),
        seed=1,
    )
    reqs = generate_requests(wl, model)
    for sys_, cls in (
        (system("g", "glitches", pl("a100-80gb", 1, "prefill"), pl("u280", 3, "decode")), None),
        (system("h", "homogeneous", pl("a100-80gb", 2), max_batch=32), HomogeneousPolicy),
        (system("f", "homogeneous", pl("u280", 2)), HomogeneousPolicy),
    ):
        pol_cls = cls or GlitchesPolicy
        fast = pol_cls().simulate(sys_, model, reqs)
        ref = pol_cls(reference=True).simulate(sys_, model, reqs)
        assert (np.abs(fast.finish_s - ref.finish_s) / ref.finish_s).max() < 1e-9
        assert (np.abs(fast.first_token_s - ref.first_token_s) / ref.first_token_s).max() < 1e-9
