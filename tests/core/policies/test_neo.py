"""Neo's scheduler and engine (§3): invariants of every schedule, the GPU-only fallback,
FastDecode+ and GPU-only Neo, determinism and the fast-forward against the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulations.core.engine.core import SimOutput
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies import get_policy
from simulations.core.policies.neo import FastDecodePlusPolicy, GpuOnlyPolicy, NeoPolicy
from simulations.core.policies.neo.scheduler import NeoScheduler, Schedule
from simulations.core.spec import DevicePlacement, SloSpec, SystemSpec
from tests.core.policies.neo_doubles import CPU_RT, GQA8B, LLAMA7B, cpu, gpu, node, requests


def _run(
    policy: NeoPolicy | FastDecodePlusPolicy, reqs: RequestSet, **options: object
) -> SimOutput:
    return policy.simulate(node(policy.name, **options), LLAMA7B, reqs)


def _assert_finished_once(out: SimOutput) -> None:
    r = out.requests
    assert np.all(np.isfinite(out.finish_s))
    assert np.array_equal(out.generated, r.output_tokens)
    assert np.all(out.first_token_s >= r.arrival_s)
    assert np.all(out.finish_s >= out.first_token_s)


def test_every_chosen_two_batch_schedule_keeps_both_inequalities() -> None:
    pol = NeoPolicy(audit=True)
    out = _run(pol, requests(150, rate=6.0))
    sim = pol.last_sim
    assert sim is not None
    two = [s for s in sim.schedules if s[0]]
    assert len(two) > 20, "the workload must exercise asymmetric pipelining"
    for _two_batch, forced, holds, est, *_ in two:
        assert not forced
        assert holds
        t_l0, t_l1, t_ga0, t_ca0, t_ca1 = est
        assert t_ca0 <= t_l1 + t_ga0 + 1e-15
        assert t_ca1 <= t_l0 + 1e-15
    assert out.extra["estimate_violations"] == 0
    assert out.extra["cpu_decode_tokens"] > 0


def test_schedule_inequality_check_rejects_a_cpu_bound_batch() -> None:
    ok = Schedule(two_batch=True, t_l0=2.0, t_l1=1.0, t_ga0=0.5, t_ca0=1.4, t_ca1=2.0)
    assert ok.inequalities_hold()
    assert not Schedule(two_batch=True, t_l0=1.0, t_l1=1.0, t_ca1=1.5).inequalities_hold()
    assert not Schedule(
        two_batch=True, t_l0=3.0, t_l1=1.0, t_ga0=0.1, t_ca0=1.2
    ).inequalities_hold()


def test_gpu_kv_cache_never_exceeds_its_pool_or_the_gpu_memory() -> None:
    out = _run(NeoPolicy(), requests(150, rate=6.0))
    assert 0 < out.extra["peak_gpu_blocks"] <= out.extra["kv_pool_blocks_gpu"]
    assert out.extra["peak_cpu_blocks"] <= out.extra["kv_pool_blocks_cpu"]
    g = out.units[0]
    assert g.mem_peak_bytes <= g.mem_capacity_bytes * 0.99
    assert out.extra["swap_outs"] + out.extra["prefills_to_cpu"] > 0


def test_a_scheduler_that_skips_swap_out_is_caught_overflowing_the_gpu_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = NeoScheduler.plan

    def no_swap_out(self: NeoScheduler) -> Schedule:
        # Keep every request on the GPU: no swap-out, every prefill GPU-resident.
        sch = plan(self)
        sch.gpu_dec = sch.gpu_dec + sch.swap_out
        sch.swap_out = []
        sch.prefill_gpu, sch.prefill_cpu = sch.prefill_gpu + sch.prefill_cpu, []
        return sch

    monkeypatch.setattr(NeoScheduler, "plan", no_swap_out)
    with pytest.raises(AssertionError, match="GPU KV cache overflows"):
        _run(NeoPolicy(), requests(150, rate=6.0))


@pytest.mark.parametrize(
    ("policy", "options"),
    [(NeoPolicy, {}), (NeoPolicy, {"cpu_offload": False}), (FastDecodePlusPolicy, {})],
)
def test_every_plans_gpu_attention_width_is_the_sum_over_its_gpu_decodes(
    monkeypatch: pytest.MonkeyPatch, policy: type[NeoPolicy], options: dict[str, object]
) -> None:
    """The scheduler reads the GPU runqueue's context sum from the simulator's running
    total; every plan's GPU attention estimate must be the one of Σ (c + 1) summed over
    its GPU decodes (swaps, recomputes and completions included)."""
    plan = NeoScheduler.plan
    seen = {"plans": 0, "swaps": 0}

    def checked(self: NeoScheduler) -> Schedule:
        sch = plan(self)
        sim, tab = self.sim, self.sim.table
        width = sum(sim.ctx[r] + 1 for r in sch.gpu_dec)
        pref = sch.prefill_gpu + sch.prefill_cpu
        expect = sum(tab.prefill_attn(sim.plen[r]) for r in pref) + tab.gpu_decode_attn(width)
        assert sim.gpu_ctx == sum(sim.ctx[r] for r in sim.gpu_q)
        if not sch.forced:
            assert sch.t_ga0 == pytest.approx(expect, rel=1e-12, abs=1e-15)
        seen["plans"] += 1
        seen["swaps"] += len(sch.swap_in) + len(sch.swap_out) + len(sch.recompute)
        return sch

    monkeypatch.setattr(NeoScheduler, "plan", checked)
    _assert_finished_once(_run(policy(), requests(150, rate=6.0), **options))
    assert seen["plans"] > 0
    if policy is NeoPolicy:
        assert seen["swaps"] > 0


@pytest.mark.parametrize("policy", [NeoPolicy, FastDecodePlusPolicy])
@pytest.mark.parametrize("rate", [None, 2.0, 8.0])
def test_every_request_finishes_exactly_once(policy: type[NeoPolicy], rate: float | None) -> None:
    out = _run(policy(), requests(120, rate=rate))
    _assert_finished_once(out)
    assert np.all(out.finished_on >= 0)


def test_large_memory_gpu_with_short_outputs_stays_gpu_only() -> None:
    big = gpu("big-gpu", mem_gb=80, bw=2000, tflops=312)
    system = node("neo", gpu_spec=big)
    out = NeoPolicy().simulate(system, LLAMA7B, requests(200, out=(4, 24), rate=4.0))
    _assert_finished_once(out)
    assert out.extra["two_batch_iterations"] == 0
    assert out.extra["cpu_decode_tokens"] == 0
    assert out.extra["prefills_to_cpu"] == 0


def test_memory_starved_gpu_offloads_and_beats_gpu_only() -> None:
    reqs = requests(300, inp=(200, 300), out=(150, 250))
    neo = _run(NeoPolicy(), reqs)
    base = GpuOnlyPolicy().simulate(node("gpu-only"), LLAMA7B, reqs)
    assert neo.extra["cpu_decode_tokens"] > 0
    assert neo.t_end < base.t_end


def test_results_are_deterministic() -> None:
    reqs = requests(150, rate=5.0)
    a = _run(NeoPolicy(), reqs)
    b = _run(NeoPolicy(), reqs)
    assert np.array_equal(a.finish_s, b.finish_s)
    assert np.array_equal(a.first_token_s, b.first_token_s)
    assert {k: v for k, v in a.extra.items() if k != "options"} == {
        k: v for k, v in b.extra.items() if k != "options"
    }


@pytest.mark.parametrize(
    ("policy", "options"),
    [(NeoPolicy, {}), (NeoPolicy, {"cpu_offload": False}), (FastDecodePlusPolicy, {})],
)
@pytest.mark.parametrize("rate", [None, 0.7, 5.0])
def test_fast_forward_equals_the_step_by_step_reference(
    policy: type[NeoPolicy], options: dict[str, object], rate: float | None
) -> None:
    reqs = requests(80, inp=(32, 400), out=(2, 400), rate=rate, seed=11)
    fast = _run(policy(audit=True), reqs, **options)
    ref = _run(policy(reference=True, audit=True), reqs, **options)
    np.testing.assert_allclose(fast.finish_s, ref.finish_s, rtol=1e-12)
    np.testing.assert_allclose(fast.first_token_s, ref.first_token_s, rtol=1e-12)
    assert fast.extra["iterations"] == ref.extra["iterations"]
    assert fast.extra["cpu_decode_tokens"] == ref.extra["cpu_decode_tokens"]
    assert fast.extra["runs"] <= ref.extra["runs"]


def test_fast_forward_skips_iterations_of_long_decodes() -> None:
    out = _run(NeoPolicy(), requests(20, inp=(64, 128), out=(500, 600), rate=0.05))
    assert out.extra["runs"] * 10 < out.extra["iterations"]


def test_fastdecode_plus_keeps_every_kv_cache_on_the_cpu() -> None:
    out = _run(FastDecodePlusPolicy(), requests(100, rate=4.0))
    _assert_finished_once(out)
    assert out.extra["peak_gpu_blocks"] == 0
    assert out.extra["gpu_decode_tokens"] == 0
    assert out.extra["cpu_decode_tokens"] == int(out.requests.output_tokens.sum()) - 100


def test_fastdecode_plus_becomes_cpu_bound_at_long_outputs() -> None:
    reqs = requests(200, inp=(900, 1100), out=(700, 800))
    fd = _run(FastDecodePlusPolicy(), reqs)
    neo = _run(NeoPolicy(), reqs)
    assert fd.extra["forced_cpu_iterations"] > 0
    assert fd.t_end > neo.t_end


def test_gpu_only_neo_never_decodes_on_the_cpu() -> None:
    out = _run(NeoPolicy(), requests(150, rate=6.0), cpu_offload=False)
    _assert_finished_once(out)
    assert out.extra["cpu_decode_tokens"] == 0
    assert out.extra["two_batch_iterations"] == 0
    assert out.extra["prefills_to_cpu"] == 0


def test_more_cpu_bandwidth_offloads_more() -> None:
    reqs = requests(200, inp=(200, 300), out=(150, 250))
    slow = NeoPolicy().simulate(node("neo", cpu_spec=cpu(bw=20)), LLAMA7B, reqs)
    fast = NeoPolicy().simulate(node("neo", cpu_spec=cpu(bw=200)), LLAMA7B, reqs)
    assert fast.extra["cpu_decode_tokens"] > slow.extra["cpu_decode_tokens"]
    assert fast.t_end < slow.t_end


def test_two_batch_iterations_last_what_the_pipelining_equation_says() -> None:
    pol = NeoPolicy(audit=True)
    _run(pol, requests(120, rate=6.0))
    sim = pol.last_sim
    assert sim is not None
    checked = 0
    for two, _forced, _holds, _est, exact, *_counts, dur, n in sim.schedules:
        if not two or n != 1:
            continue
        t_l0, t_l1, t_ga0, t_ca0, t_ca1 = exact
        layers = LLAMA7B.n_layers * (max(t_l0, t_ca1) + max(t_l1 + t_ga0, t_ca0))
        assert dur >= layers
        assert dur <= layers * 1.05  # plus the sub-batches' pre/post-layer (embedding, LM head)
        checked += 1
    assert checked > 10


def test_tensor_parallel_node_runs_with_per_gpu_weight_shards() -> None:
    big = gpu("h-like", mem_gb=40, bw=2000, tflops=312)
    pol = NeoPolicy()
    out = pol.simulate(node("neo", gpu_spec=big, gpus=2), GQA8B, requests(60, rate=3.0))
    _assert_finished_once(out)
    gpus = [u for u in out.units if u.role == "gpu"]
    assert len(gpus) == 2
    single = NeoPolicy().simulate(node("neo", gpu_spec=big), GQA8B, requests(60, rate=3.0))
    one = next(u for u in single.units if u.role == "gpu")
    assert gpus[0].mem_peak_bytes < one.mem_peak_bytes
    assert out.t_end <= single.t_end


def test_rejects_a_node_without_a_host_cpu() -> None:
    system = SystemSpec(
        "n", "neo", (DevicePlacement(gpu(), 1, node("neo").devices[0].runtime, "gpu"),)
    )
    with pytest.raises(SpecError, match="role 'cpu'"):
        NeoPolicy().simulate(system, LLAMA7B, requests(4))


def test_rejects_two_host_cpus() -> None:
    system = SystemSpec(
        "n",
        "neo",
        (node("neo").devices[0], DevicePlacement(cpu(), 2, CPU_RT, "cpu")),
    )
    with pytest.raises(SpecError, match="one host CPU"):
        NeoPolicy().simulate(system, LLAMA7B, requests(4))


def test_rejects_a_request_larger_than_the_gpu_cache() -> None:
    with pytest.raises(CapacityError, match="GPU KV cache"):
        _run(NeoPolicy(), requests(4, inp=(5000, 5000), out=(1000, 1000)))


def test_rejects_unknown_options() -> None:
    with pytest.raises(SpecError, match=r"options\.prefetch"):
        NeoPolicy.resolve_options({"prefetch": 1})


def test_registry_has_neo_and_its_baselines() -> None:
    assert get_policy("neo") is NeoPolicy
    assert get_policy("fastdecode+") is FastDecodePlusPolicy
    assert get_policy("gpu-only") is GpuOnlyPolicy
    assert {r.name for r in NeoPolicy.roles} == {"gpu", "cpu"}
    assert not next(r for r in GpuOnlyPolicy.roles if r.name == "cpu").required


def test_run_returns_a_result_document_for_every_policy() -> None:
    from simulations.core.spec import ArrivalSpec, LengthDist, WorkloadSpec

    wl = WorkloadSpec(
        requests=40,
        input_tokens=LengthDist("uniform", low=64, high=256),
        output_tokens=LengthDist("uniform", low=4, high=64),
        arrival=ArrivalSpec("poisson", rate_per_s=4.0),
        seed=1,
    )
    rng = np.random.default_rng(0)
    for cls in (NeoPolicy, FastDecodePlusPolicy, GpuOnlyPolicy):
        doc = cls().run(node(cls.name), LLAMA7B, wl, SloSpec(), rng)
        assert doc["requests"] == 40
        assert math.isfinite(doc["throughput_tok_s"])
        assert doc["devices"][0]["count"] == 1
        assert doc["scheduler"]["options"]["block_size"] == 16


@pytest.mark.parametrize(
    ("seed", "rate", "inp", "out"),
    [
        (5, None, (64, 512), (8, 256)),
        (6, 8.0, (32, 900), (4, 400)),
        (7, None, (200, 300), (50, 60)),
    ],
)
def test_step4_bounds_give_the_schedules_of_the_full_scan(
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    rate: float | None,
    inp: tuple[int, int],
    out: tuple[int, int],
) -> None:
    """Step 4 settles its shortest-request checks by bounds where they decide: at every plan
    of a run (including the fast-forward's re-plans) the schedule is the one of the plan
    that always scans the rest, and the simulator's CPU floor is under every CPU-resident
    context."""
    plan = NeoScheduler.plan
    fields = [f for f in Schedule.__slots__ if not f.startswith("_")]
    stats = {"plans": 0, "settled": 0}

    def both(self: NeoScheduler) -> Schedule:
        sim = self.sim
        assert all(sim.ctx[r] >= sim.cpu_floor for r in sim.cpu_q)
        before = self.settled
        self.bounds = False
        full = plan(self)
        assert self.settled == before
        self.bounds = True
        sch = plan(self)
        stats["plans"] += 1
        stats["settled"] += self.settled - before
        for f in fields:
            assert getattr(sch, f) == getattr(full, f), f
        return sch

    monkeypatch.setattr(NeoScheduler, "plan", both)
    res = _run(NeoPolicy(audit=True), requests(300, inp=inp, out=out, rate=rate, seed=seed))
    _assert_finished_once(res)
    assert res.extra["cpu_decode_tokens"] > 0
    assert stats["settled"] > 0, "the workload must exercise the bounds"
