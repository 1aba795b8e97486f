"""The Neo reproduction's measuring rules (without running the whole reproduction)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulations.core.policies.neo import reproduction as runner
from simulations.core.policies.neo.policy import gpu_kv_pool
from simulations.core.reproduce import BoundCheck, base


def test_rate_at_latency_finds_where_a_rising_curve_crosses_the_level() -> None:
    seen: list[float] = []

    def lat(rate: float) -> float:
        seen.append(rate)
        return 0.1 + 1.0 / max(1e-9, 5.0 - rate) if rate < 5.0 else 1e9

    r = runner.rate_at_latency(lat, 2.0, start=0.5)
    exact = 5.0 - 1.0 / 1.9
    assert r == pytest.approx(exact, rel=0.01)
    assert len(seen) < 15


def test_rate_at_latency_searches_below_a_start_already_over_the_level() -> None:
    r = runner.rate_at_latency(lambda rate: rate, 1.0, start=4.0)
    assert r == pytest.approx(1.0, rel=0.02)


def test_rise_then_fall_needs_an_interior_peak_and_a_drop() -> None:
    assert runner._rises_then_falls([1.0, 1.2, 1.1])
    assert not runner._rises_then_falls([1.3, 1.2, 1.1])  # falls only
    assert not runner._rises_then_falls([1.0, 1.1, 1.2])  # rises only


def test_bound_checks_accept_values_on_the_right_side_only() -> None:
    up = BoundCheck("x", "q", "x", 0.6, 0.3, 0.1, bound="upper")
    assert up.ok and up.as_dict()["ok"]
    assert not BoundCheck("x", "q", "x", 0.6, 0.7, 0.1, bound="upper").ok
    assert BoundCheck("x", "q", "x", 0.95, 0.97, 0.0, bound="lower").ok
    assert not BoundCheck("x", "q", "x", 0.95, 0.90, 0.0, bound="lower").ok
    assert not BoundCheck("x", "q", "x", 0.6, math.nan, 0.1).ok


def test_osc_stand_in_lengths_stay_in_their_ranges() -> None:
    inp, out = runner._lengths("osc", 400)
    assert min(inp) >= 197 and max(inp) <= 555
    assert min(out) >= 25 and max(out) <= 74


def test_synthetic_lengths_are_within_ten_percent() -> None:
    rs = runner._synthetic(1000, 200, 300)
    assert np.all(rs.input_tokens >= 900) and np.all(rs.input_tokens <= 1100)
    assert np.all(rs.output_tokens >= 180) and np.all(rs.output_tokens <= 220)
    assert np.all(rs.arrival_s == 0)


def test_offline_runs_hold_four_times_what_neo_can_buffer_within_bounds() -> None:
    n_t4 = runner.offline_requests("t4", 500, 200)
    n_h100 = runner.offline_requests("h100", 500, 50)
    assert n_t4 == runner.OFFLINE_MIN  # the T4's caches hold few long requests
    assert n_h100 == runner.OFFLINE_MAX  # the HGX node holds the block table's 512


def test_the_neo_runner_is_registered() -> None:
    assert runner.neo_checks in base._RUNNERS["neo"]


def test_neo_never_decodes_faster_than_its_gpu_cache_and_host_bandwidth_allow() -> None:
    # The ceilings behind the T4 notes must really bound the simulator: a run that charged
    # no CPU attention, or decoded more GPU requests than the cache holds, would beat them.
    l_in, l_out = 500, 100
    gpu_ceiling, cpu_ceiling = runner.decode_ceilings("t4", l_in, l_out)
    system, cls = runner._system("t4", "neo")
    policy = cls()
    model = runner.builtin_catalog().model("llama2-7b")
    out = policy.simulate(system, model, runner._synthetic(l_in, l_out, 300))
    sim = policy.last_sim
    assert sim is not None
    span = float(np.max(out.finish_s))
    cpu_tokens = sim.stats["cpu_decode_tokens"]
    assert cpu_tokens > 0  # the memory-starved T4 offloads
    assert cpu_tokens / span <= cpu_ceiling
    decoded = sim.stats["gpu_decode_tokens"] + cpu_tokens
    assert decoded / span <= gpu_ceiling + cpu_ceiling


def test_ceilings_scale_with_the_host_bandwidth_and_shrink_with_context() -> None:
    _, cpu_4x = runner.decode_ceilings("a10g", 2000, 200, "g5-4xlarge-cpu")
    _, cpu_16x = runner.decode_ceilings("a10g", 2000, 200, "g5-16xlarge-cpu")
    assert cpu_16x == pytest.approx(4 * cpu_4x, rel=0.02)  # 204.8 vs 51.2 GB/s
    short = runner.decode_ceilings("t4", 500, 50)
    long = runner.decode_ceilings("t4", 2000, 50)
    assert long[0] < short[0] and long[1] < short[1]


def test_kv_sensitivity_uses_the_policys_rule() -> None:
    # At the catalog's capacity and SwiftLLM's 0.99 the helper must give the policy's own
    # sizing, else the note's driver-memory and vLLM-default figures would be off.
    sim, _ = runner._neo_costs("t4")
    g, shard = sim.costs.gpu, sim.costs.shard
    blocks = gpu_kv_pool(g, shard, utilization=0.99, tokens=sim.max_tokens, block_size=16)
    tokens = runner._kv_tokens_at("t4", g.memory_capacity_bytes, 0.99)
    assert blocks * 16 <= tokens < (blocks + 1) * 16
    assert runner._kv_tokens_at("t4", g.memory_capacity_bytes, 0.9) < tokens


def test_a_larger_gain_implies_a_smaller_baseline_cache() -> None:
    small = runner.implied_gpu_cache_tokens("t4", "osc", 6.0)
    smaller = runner.implied_gpu_cache_tokens("t4", "osc", 8.0)
    assert 0 < smaller < small


def test_the_t4_testbed_runs_the_authors_config_on_every_system() -> None:
    for variant in runner.VARIANTS:
        system, _ = runner._system("t4", variant)
        assert system.options["gpu_blocks"] == 54
        assert system.options["max_batched_tokens"] == 832
    a10g, _ = runner._system("a10g", "neo")
    assert "gpu_blocks" not in a10g.options  # no unmodified A10G config is published


def test_synthetic_grids_keep_requests_within_the_testbeds_longest() -> None:
    for l_in, outs in runner.synth_grid("t4"):
        assert outs  # every input has outputs to sweep
        for o in outs:
            rs = runner._synthetic(l_in, o, 200)
            assert int(np.max(rs.input_tokens + rs.output_tokens)) <= runner.T4_MAX_LEN
    assert runner.synth_grid("a10g") == [(i, runner.SYNTH_OUTPUTS) for i in runner.SYNTH_INPUTS]


@pytest.mark.parametrize("variant", ["neo", "fastdecode+", "gpu-only"])
def test_an_offline_run_stopped_at_its_window_gives_the_whole_runs_earliest_finishes(
    variant: str,
) -> None:
    """Speed: offline runs stop at the window's last completion; the earliest
    finishes must be exactly those of the run played to the end."""
    requests = runner._synthetic(250, 100, 120)
    k = 120 - (120 // 10) * 3 + 1
    early = runner._first_finishes("t4", variant, requests, None, k)
    whole = np.sort(runner._simulate("t4", variant, requests, None).finish_s)[:k]
    assert len(early) == k
    assert early.tolist() == whole.tolist()


def test_prefetching_in_two_processes_gives_the_sequential_values() -> None:
    tasks = [
        ("offline", "a10g", "gpu-only", 500, 50, None),
        ("offline", "a10g", "neo", 500, 50, None),
    ]
    assert runner._PREFETCHED == {}
    sequential = {t: runner.offline_throughput.__wrapped__(*t[1:]) for t in tasks}
    try:
        runner.prefetch(2, tasks)
        assert sequential == runner._PREFETCHED
    finally:
        runner._PREFETCHED.clear()


def test_one_process_prefetches_nothing() -> None:
    runner.prefetch(1, [("offline", "a10g", "gpu-only", 500, 50, None)])
    assert runner._PREFETCHED == {}


def test_every_simulation_the_checks_read_is_a_prefetch_task() -> None:
    tasks = runner._tasks()
    assert len(tasks) == len(set(tasks))
    assert sum(1 for t in tasks if t[0] == "fig6") == 10
    # Fig. 9's grid (Neo and its baseline), Fig. 10a's other hosts, Fig. 8b's FastDecode+
    grid = sum(len(outs) for s in runner.SETTINGS for _, outs in runner.synth_grid(s))
    others = (len(runner.FIG10_CPUS) - 1) * len(runner.SYNTH_OUTPUTS) + len(runner.SYNTH_OUTPUTS)
    assert sum(1 for t in tasks if t[0] == "offline") == 2 * grid + others
