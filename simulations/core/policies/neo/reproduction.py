"""Reproduction of Neo §5: Figs. 6, 8, 9 and 10a (targets and notes: ``targets.toml``).

Every simulated figure comes from the ``neo``, ``fastdecode+`` and ``gpu-only`` policies
(:mod:`simulations.core.policies.neo`) on catalog hardware: the GPU runs the ``vllm-fp16``
stack (§5.5: SwiftLLM, Neo's base, performs like vLLM on one GPU), the host CPU the
``ispc-paged-attention-cpu`` stack; the policies' defaults are SwiftLLM's (block 16,
``gpu_mem_utilization`` 0.99, 512 requests and 3072 tokens per iteration; half the host
memory for the CPU KV cache). Nothing below is tuned to a figure; the paper's values are
only the targets beside the simulated ones.

Testbeds (§5.1, Table 1): 2×H100-SXM + LLaMa-3.1-70B with tensor parallelism and one NUMA
node of the Xeon 8462Y+ host; A10G + LLaMa-3.1-8B on g5.4xlarge (Fig. 10a: g5.2x/4x/8x/
16xlarge); T4 + LLaMa-2-7B on g4dn.4xlarge.

Definitions (read from §5):

- *Per-token latency* (Fig. 6 caption): a request's full latency divided by its output
  tokens, averaged over all requests.
- *Throughput at equal latency* (§5.2: "14.3 % higher throughput ... at 2 sec latency"):
  the Poisson request rate at which a system's mean per-token latency reaches the stated
  level (2 s for H100 and A10G, 1 s for T4), found by raising the rate ×1.5 until the
  latency exceeds the level and then bisecting the last interval (5 halvings, linear
  interpolation in the final bracket); the gain is the ratio of the two systems' rates.
  Arrivals use common random numbers (one unit-rate Poisson stream, scaled), so every
  system and rate sees the same requests in the same order.
- *Relative throughput* (Figs. 8b, 9, 10a): offline runs with every request present at
  t = 0, throughput in requests per second between the completions of the 10 % and the
  70 % fastest-finishing requests (the windowing of the authors' benchmark script, which
  leaves out warm-up and drain), divided by the GPU-only baseline's.

Workloads: AC = the first rows of the Azure code trace (lengths only; Poisson arrivals).
OSC (OpenAI summarize comparisons, T4) is not in the repository; its stand-in draws prompts
uniformly in 197–555 tokens and outputs uniformly in 25–74 tokens, the ranges of the
100-request OSC sample (LLaMa-2 token counts) that the authors' artifact ships for Fig. 6c
(:data:`OSC_PROMPTS`); the uniform shape is our assumption. Fig. 6c runs 2000 requests
(the artifact's own note), the AC runs 500. Synthetic workloads (§5.1): lengths uniform in
[0.9 l, 1.1 l]. The input lengths of Figs. 9/10 are not stated: we use 500, 1000 and 2000
tokens (the inputs of the authors' synthetic benchmarks; Fig. 8b states 2000) with outputs
50–800, and 2000 for Fig. 10a (the only input the paper states, Fig. 8b); on the T4, whose
artifact config serves requests of at most 832 tokens, inputs 100, 250 and 500 with the
outputs that fit. "Up to" gains are the maxima over a figure's points.

Per-token latency follows the caption (full latency over *output* tokens, averaged over all
requests). The artifact's plotting code (evaluation/illustrator.py ``get_lat_avg``, stored
fork Maphsge4/NEO) also divides by output tokens but averages only the requests after the
first quarter; its benchmark log line (benchmark.py) divides by input + output tokens. We
keep the caption's reading (a sensitivity run with the plotting code's window moved the
three Fig. 6 gains by under 2 %).

Baselines: Fig. 6 compares against vLLM *with chunked prefill* (selective batching); its
stand-in is GPU-only Neo (``neo`` with ``cpu_offload = false``: prefills and decodes in one
iteration, same memory), with the ``gpu-only`` policy (SwiftLLM-like, no mixing) in the
details. Figs. 8b–10 compare against GPU-only Neo, i.e. SwiftLLM: the ``gpu-only`` policy.
The authors' harness (github SwiftSeal03/swiftLLM, evaluation/server.py) confirms both
readings: its ``base`` server runs Neo's engine with ``--always-use-gpu``, whose scheduler
(swiftllm/server/scheduler.py, ``get_next_batch_old``) launches prefill-only batches while
requests wait and decode-only batches otherwise, with swap preemption — the ``gpu-only``
policy, not Neo's selective batching without offloading; its ``vllm`` server runs
``--enable-chunked-prefill --enforce-eager --preemption-mode swap``. All three servers get
the same ``--num-gpu-blocks-override`` from a per-testbed config (Neo's share is
``L/(L+1)`` of it, its extra staging layer: ``offload_gpu_pool``). The T4's config is
stored unmodified in three forks of the authors' NEO artifact (:data:`T4_CONFIG`: 54
blocks, 832 tokens per iteration) and every T4 system here runs it (policy option
``gpu_blocks``); without it SwiftLLM's sizing rule gives the T4 about 4,400 tokens of
GPU cache instead of 864, ten average OSC requests instead of two (this reproduction's
earlier revision used the rule and found T4 gains of 1.34× on Fig. 6c and 1.88× on
Fig. 9c, with other OSC lengths and inputs). No unmodified A10G or H100 config is
stored, so those testbeds keep SwiftLLM's rule.
Deviation: ``vllm-fp16`` is costed by kernel classes fitted to vLLM's kernels on an A100
(Vidur's profile; every testbed GPU here is predicted through its datasheet, and the result
entries say so) with the host step measured for a synchronous vLLM-style engine loop; it
charges no kernel-launch time (CUDA-graph decode), but the harness runs vLLM
``--enforce-eager`` and SwiftLLM/Neo launch their CUDA C++ kernels eagerly from Python
(§4); no per-kernel cost of either stack is published, so none is charged (10 kernels per
layer at the eager stack's fitted 12.7 µs would add about 4 ms to a 32-layer decode pass,
~9 % on the T4). Neo's own host loop (SwiftLLM) is charged vLLM's measured step.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from simulations.core.catalog import builtin_catalog
from simulations.core.engine.batching import BatchingSim
from simulations.core.engine.core import SimOutput
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError
from simulations.core.reproduce import Check, check, load_targets, prefetcher, runner
from simulations.core.spec import DevicePlacement, ModelSpec, SystemSpec
from simulations.core.traces import AZURE_CODE, load_bundled_trace

from .policy import FastDecodePlusPolicy, GpuOnlyPolicy, NeoBasePolicy, NeoPolicy, activation_bytes
from .sim import NeoSim

PAPER = "neo"

GPU_RUNTIME = "vllm-fp16"
CPU_RUNTIME = "ispc-paged-attention-cpu"

#: Requests per latency run (the authors' benchmark feeds 500 requests of a dataset).
ONLINE_REQUESTS = 500
#: Requests per offline run: four times what Neo's caches can hold at once (so the
#: measured window is past the fill), at least 1000 and at most the 2000 of the authors'
#: synthetic benchmarks. With fewer, a node that holds most requests at once prefills them
#: all first and the window sees only their decodes.
OFFLINE_MIN, OFFLINE_MAX = 1000, 2000
SYNTH_INPUTS = (500, 1000, 2000)
SYNTH_OUTPUTS = (50, 100, 200, 400, 800)
FIG10_INPUT = 2000
FIG10_CPUS = ("g5-2xlarge-cpu", "g5-4xlarge-cpu", "g5-8xlarge-cpu", "g5-16xlarge-cpu")
SEED = 2024
#: OSC stand-in ranges (uniform): those of the 100-request OSC sample the authors' artifact
#: ships for Fig. 6c (evaluation/data/osc-Llama-2-7b-hf.json in the stored fork
#: Maphsge4/NEO: LLaMa-2 prompt tokens 197–555, max_tokens 25–74).
OSC_PROMPTS = (197, 555)
OSC_OUTPUTS = (25, 74)


@dataclass(frozen=True, slots=True)
class Setting:
    """One testbed of §5.1."""

    gpu: str
    gpus: int
    cpu: str
    model: str
    latency_s: float  # the per-token latency at which Fig. 6 reads throughput
    #: Policy options of every system on this testbed (the authors' per-testbed config).
    options: tuple[tuple[str, Any], ...] = ()
    #: Synthetic input lengths (Figs. 9/10) and the longest request served (0: no limit).
    inputs: tuple[int, ...] = SYNTH_INPUTS
    max_len: int = 0
    #: Requests per Fig. 6 latency run.
    online_requests: int = ONLINE_REQUESTS


#: The T4 testbed's configuration in the authors' artifact (NEO repository,
#: evaluation/configs/config-t4-7b.json, identical in the stored forks 5symx/NEO,
#: Maphsge4/NEO and cilinmengye/NEO): num_gpu_blocks_override 54 (blocks of 16 tokens, given
#: to vLLM, SwiftLLM and — less its staging layer — Neo), max_num_batched_tokens 832 and
#: max_model_len 832. Its reproduce-fig6c.py sweeps vLLM at 0.2–0.6 req/s and Neo at
#: 0.5–3.9 req/s on OSC. No A10G or H100 config is stored unmodified, so those testbeds keep
#: SwiftLLM's sizing rule. The config's swap_space (Neo's CPU cache, 20 GiB) is not applied:
#: the CPU cache stays half the host memory as on every testbed (checked: 20 GiB moves the
#: T4 Fig. 9 ratios by under 3 %, the host's bandwidth, not its cache, binds).
T4_CONFIG: tuple[tuple[str, Any], ...] = (("gpu_blocks", 54), ("max_batched_tokens", 832))
T4_MAX_LEN = 832
#: T4 synthetic inputs: the paper does not state Fig. 9c's; the config's 832-token
#: max_model_len excludes the 1000/2000 of the other testbeds, so shorter ones (OSC-like).
T4_INPUTS = (100, 250, 500)
#: Fig. 6c's runs: "the original data (2000 requests) used in the paper" (the docstring of
#: the artifact's evaluation/reproduce-fig6c.py, identical in the stored forks 5symx/NEO and
#: cilinmengye/NEO); the AC runs feed 500 (benchmark.py ``prepare_real_test``).
T4_ONLINE_REQUESTS = 2000

SETTINGS: dict[str, Setting] = {
    "h100": Setting("h100-sxm", 2, "xeon-8462y-plus-numa-node", "llama3.1-70b", 2.0),
    "a10g": Setting("a10g", 1, "g5-4xlarge-cpu", "llama3.1-8b", 2.0),
    "t4": Setting(
        "t4",
        1,
        "g4dn-4xlarge-cpu",
        "llama2-7b",
        1.0,
        T4_CONFIG,
        T4_INPUTS,
        T4_MAX_LEN,
        T4_ONLINE_REQUESTS,
    ),
}


def synth_grid(setting: str) -> list[tuple[int, tuple[int, ...]]]:
    """The synthetic (input, outputs) sweeps of a testbed: its inputs, each with the outputs
    of :data:`SYNTH_OUTPUTS` whose longest request (input and output both 10 % over) the
    testbed serves."""
    s = SETTINGS[setting]
    grid = []
    for l_in in s.inputs:
        outs = tuple(
            o
            for o in SYNTH_OUTPUTS
            if not s.max_len or math.floor(1.1 * l_in) + math.floor(1.1 * o) <= s.max_len
        )
        grid.append((l_in, outs))
    return grid


#: Policy variants: (registered policy class, options).
VARIANTS: dict[str, tuple[type[NeoBasePolicy] | type[GpuOnlyPolicy], dict[str, Any]]] = {
    "neo": (NeoPolicy, {}),
    "neo-gpu": (NeoPolicy, {"cpu_offload": False}),
    "gpu-only": (GpuOnlyPolicy, {}),
    "fastdecode+": (FastDecodePlusPolicy, {}),
}


# --- workloads -------------------------------------------------------------------------------


@cache
def _code_trace() -> tuple[np.ndarray, np.ndarray]:
    tr = load_bundled_trace(AZURE_CODE)
    return np.asarray(tr.input_tokens), np.asarray(tr.output_tokens)


@cache
def _lengths(kind: str, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Prompt and output lengths of the first ``n`` requests of a dataset."""
    if kind == "ac":
        inp, out = _code_trace()
        return tuple(int(x) for x in inp[:n]), tuple(int(x) for x in out[:n])
    if kind == "osc":
        rng = np.random.default_rng([SEED, 1])
        inp = rng.integers(OSC_PROMPTS[0], OSC_PROMPTS[1] + 1, n)
        out = rng.integers(OSC_OUTPUTS[0], OSC_OUTPUTS[1] + 1, n)
        return tuple(int(x) for x in inp), tuple(int(x) for x in out)
    raise ValueError(kind)


@cache
def _unit_gaps(n: int) -> np.ndarray:
    """Inter-arrival gaps of a unit-rate Poisson process (common to every rate)."""
    return np.random.default_rng([SEED, 2]).exponential(1.0, n)


def _poisson(kind: str, rate: float, n: int = ONLINE_REQUESTS) -> RequestSet:
    inp, out = _lengths(kind, n)
    return RequestSet.from_lists(np.cumsum(_unit_gaps(n)) / rate, list(inp), list(out))


def _synthetic(l_in: int, l_out: int, n: int) -> RequestSet:
    rng = np.random.default_rng([SEED, 3, l_in, l_out])
    inp = rng.integers(math.ceil(0.9 * l_in), math.floor(1.1 * l_in) + 1, n)
    out = rng.integers(math.ceil(0.9 * l_out), math.floor(1.1 * l_out) + 1, n)
    return RequestSet.from_lists(np.zeros(n), inp, out)


# --- runs ------------------------------------------------------------------------------------

#: (setting, variant, dataset) -> the (rate, mean per-token latency) points evaluated.
_SEEN: dict[tuple[str, str, str], list[tuple[float, float]]] = {}


def _system(
    setting: str, variant: str, cpu: str | None = None
) -> tuple[SystemSpec, type[NeoBasePolicy] | type[GpuOnlyPolicy]]:
    cat = builtin_catalog()
    s = SETTINGS[setting]
    cls, opts = VARIANTS[variant]
    devices = (
        DevicePlacement(cat.device(s.gpu), s.gpus, cat.runtime(GPU_RUNTIME), "gpu"),
        DevicePlacement(cat.device(cpu or s.cpu), 1, cat.runtime(CPU_RUNTIME), "cpu"),
    )
    return SystemSpec(f"{setting}/{variant}", cls.name, devices, {**dict(s.options), **opts}), cls


def _simulate(setting: str, variant: str, requests: RequestSet, cpu: str | None) -> SimOutput:
    system, cls = _system(setting, variant, cpu)
    model = builtin_catalog().model(SETTINGS[setting].model)
    out: SimOutput = cls().simulate(system, model, requests)
    return out


@cache
def online_latency(setting: str, variant: str, kind: str, rate: float) -> float:
    """Mean per-token latency (s) of a Poisson run at ``rate`` requests/s (Fig. 6)."""
    n = SETTINGS[setting].online_requests
    out = _simulate(setting, variant, _poisson(kind, rate, n), None)
    r = out.requests
    lat = float(np.mean((out.finish_s - r.arrival_s) / r.output_tokens))
    _SEEN.setdefault((setting, variant, kind), []).append((rate, lat))
    return lat


@cache
def offline_requests(setting: str, l_in: int, l_out: int, cpu: str | None = None) -> int:
    """Requests of an offline run at this point (see :data:`OFFLINE_MIN`)."""
    system, _ = _system(setting, "neo", cpu)
    model = builtin_catalog().model(SETTINGS[setting].model)
    sim = NeoPolicy().build(system, model, _synthetic(l_in, l_out, 1))
    held = min(sim.max_batch, (sim.gpu_pool + sim.cpu_pool) * sim.block_size / (l_in + l_out))
    return int(min(OFFLINE_MAX, max(OFFLINE_MIN, 4 * held)))


@cache
def offline_throughput(
    setting: str, variant: str, l_in: int, l_out: int, cpu: str | None = None
) -> float:
    """Requests/s between the 10 % and 70 % completions of an offline run (Figs. 8b–10)."""
    if cpu is not None and cpu == SETTINGS[setting].cpu:
        # The testbed's own host (Fig. 10a's g5.4xlarge on the A10G): the same run as
        # Fig. 9's, memoised under cpu=None; run it once.
        return offline_throughput(setting, variant, l_in, l_out)
    hit = _PREFETCHED.get(("offline", setting, variant, l_in, l_out, cpu))
    if hit is not None:
        return float(hit)
    n = offline_requests(setting, l_in, l_out, cpu)
    last = n - (n // 10) * 3 + 1  # the window is the [n // 10, last) fastest finishes
    f = _first_finishes(setting, variant, _synthetic(l_in, l_out, n), cpu, last)
    window = f[n // 10 : last]
    return float((len(window) - 1) / (window[-1] - window[0]))


class _WindowReachedError(Exception):
    """The offline window's last completion has happened (see :func:`_first_finishes`)."""


def _first_finishes(
    setting: str, variant: str, requests: RequestSet, cpu: str | None, k: int
) -> np.ndarray:
    """The ``k`` earliest finish times of a run (Neo's engine or the GPU-only baseline's),
    sorted, stopping the run at its ``k``-th completion. The same numbers as the whole
    run's: :class:`NeoSim` and :class:`BatchingSim` record every completion at the current
    event's time, and event times never decrease, so nothing after the ``k``-th completion
    can finish earlier (completions tied with it share its time). The drain after the
    window is about a third of an offline run."""
    system, cls = _system(setting, variant, cpu)
    model = builtin_catalog().model(SETTINGS[setting].model)
    sim: NeoSim | BatchingSim = cls().build(system, model, requests)
    complete = sim.complete

    def counted(rid: int, t: float, unit: int) -> None:
        complete(rid, t, unit)
        if sim.done >= k:
            raise _WindowReachedError

    sim.complete = counted  # type: ignore[method-assign]
    with contextlib.suppress(_WindowReachedError):
        sim.run()
    return np.sort(np.asarray([t for t in sim.finish if not math.isnan(t)]))[:k]


def rate_at_latency(lat: Callable[[float], float], level: float, start: float) -> float:
    """The Poisson rate at which the mean per-token latency reaches ``level`` (see the
    module notes): grow ×1.5 from ``start`` until above, then bisect five times."""
    lo, hi = 0.0, start
    lat_lo = 0.0
    lat_hi = lat(hi)
    while lat_hi <= level:
        lo, lat_lo = hi, lat_hi
        hi *= 1.5
        lat_hi = lat(hi)
        if hi > 1e3:
            raise ValueError("latency never reaches the level")
    if lo == 0.0:
        # Already above the level at the first rate: bisect down from it.
        lo = start / 8
        lat_lo = lat(lo)
        if lat_lo > level:
            return lo
    for _ in range(5):
        mid = (lo + hi) / 2
        lat_mid = lat(mid)
        if lat_mid <= level:
            lo, lat_lo = mid, lat_mid
        else:
            hi, lat_hi = mid, lat_mid
    return lo + (hi - lo) * (level - lat_lo) / (lat_hi - lat_lo)


#: First rate of each setting's search (req/s): about half its GPU-only capacity on AC/OSC.
START_RATE = {"h100": 1.0, "a10g": 0.5, "t4": 1.0}


@cache
def fig6_rate(setting: str, variant: str) -> float:
    """Throughput (req/s) at the setting's latency level (Fig. 6)."""
    kind = "osc" if setting == "t4" else "ac"
    s = SETTINGS[setting]
    hit = _PREFETCHED.get(("fig6", setting, variant))
    if hit is not None:
        return float(hit)

    def lat(rate: float) -> float:
        return online_latency(setting, variant, kind, round(rate, 6))

    return rate_at_latency(lat, s.latency_s, START_RATE[setting])


def _ratio(setting: str, variant: str, l_in: int, l_out: int, cpu: str | None = None) -> float:
    try:
        base = offline_throughput(setting, "gpu-only", l_in, l_out)
    except CapacityError:
        return math.nan
    return offline_throughput(setting, variant, l_in, l_out, cpu) / base


def _by_output(ratios: list[float]) -> dict[str, float]:
    return {f"out{o}": round(r, 4) for o, r in zip(SYNTH_OUTPUTS, ratios, strict=True)}


def _rises_then_falls(ratios: list[float]) -> bool:
    k = int(np.argmax(ratios))
    return k > 0 and ratios[-1] < ratios[k]


# --- checks ----------------------------------------------------------------------------------


def _check(tid: str, simulated: float, details: dict[str, Any], **words: Any) -> Check:
    return check(PAPER, tid, simulated, details=details, **words)


def _fig6_checks() -> list[Check]:
    checks: list[Check] = []
    tids = {
        "h100": "neo.fig6.h100x2_llama3.1-70b_ac",
        "a10g": "neo.fig6.a10g_llama3.1-8b_ac",
        "t4": "neo.fig6.t4_llama2-7b_osc",
    }
    for setting, tid in tids.items():
        s = SETTINGS[setting]
        rates = {v: fig6_rate(setting, v) for v in ("neo", "neo-gpu", "gpu-only")}
        gain = rates["neo"] / rates["neo-gpu"]
        kind = "osc" if setting == "t4" else "ac"
        load = rates["neo"] * _mean_prefill_s(setting, kind)
        cache = _gpu_cache(setting, kind)
        ceiling = 1.0 / _mean_prefill_s(setting, kind)
        details: dict[str, Any] = {
            "rate_at_latency_req_s": {k: round(v, 4) for k, v in rates.items()},
            "neo_over_gpu_only_policy": rates["neo"] / rates["gpu-only"],
            "latency_level_s": s.latency_s,
            "prefill_load_at_neo_rate": round(load, 3),
            "prefill_only_ceiling_req_s": round(ceiling, 4),
            "gpu_kv_cache": cache,
            "curves_rate_vs_latency": {
                v: _latency_points(setting, v) for v in ("neo", "neo-gpu", "gpu-only")
            },
        }
        words: dict[str, Any] = {
            "level": s.latency_s,
            "load_pct": 100 * load,
            "requests": cache["requests"],
        }
        if setting == "t4":
            paper = load_targets(PAPER).value(tid)
            implied = implied_gpu_cache_tokens(setting, kind, paper)
            rule = _kv_tokens_at(
                setting, builtin_catalog().device(s.gpu).memory_capacity_bytes, 0.99
            )
            driver = _kv_tokens_at(setting, T4_DRIVER_TOTAL_BYTES, 0.99)
            details["paper_implied_baseline_gpu_cache_tokens"] = round(implied)
            details["gpu_kv_tokens_swiftllm_rule_0.99"] = round(rule)
            details["gpu_kv_tokens_driver_total_0.99"] = round(driver)
            words.update(
                tokens=cache["tokens"],
                runs=s.online_requests,
                ceiling=ceiling,
                paper=paper,
                implied=implied,
                rule=rule,
                driver=driver,
                rule_requests=rule / cache["tokens"] * cache["requests"],
            )
        checks.append(_check(tid, gain, details, **words))
    # Fig. 8a: FastDecode+ against Neo on 2xH100 + AC.
    fd = fig6_rate("h100", "fastdecode+")
    neo = fig6_rate("h100", "neo")
    checks.append(
        _check(
            "neo.fig8a.fastdecode_load",
            1.0 if fd < neo else 0.0,
            {"fastdecode_rate_req_s": fd, "neo_rate_req_s": neo},
        )
    )
    return checks


@cache
def _mean_prefill_s(setting: str, kind: str) -> float:
    """Mean seconds to prefill one request of the dataset alone on the setting's GPUs."""
    system, _ = _system(setting, "neo")
    model = builtin_catalog().model(SETTINGS[setting].model)
    inp, _out = _lengths(kind, SETTINGS[setting].online_requests)
    sim = NeoPolicy().build(system, model, _synthetic(100, 10, 1))
    c = sim.costs
    total = sum(
        model.n_layers * (c.linear_layer_s(p) + c.prefill_attn_layer_s([p])) + c.pre_post_s(p, 1)
        for p in inp
    )
    return total / len(inp)


@cache
def _neo_costs(setting: str, cpu: str | None = None) -> tuple[NeoSim, ModelSpec]:
    """An (unrun) offloading Neo node of the setting: its caches and stage costs."""
    system, _ = _system(setting, "neo", cpu)
    model = builtin_catalog().model(SETTINGS[setting].model)
    return NeoPolicy().build(system, model, _synthetic(100, 10, 1)), model


def _min_pass_s(sim: NeoSim, model: ModelSpec) -> float:
    """The shortest GPU pass: one token through every layer's linear stage (the weights
    streamed once) plus the pre/post-layer; every pass takes at least this long."""
    c = sim.costs
    return model.n_layers * c.linear_layer_s(1) + c.pre_post_s(1, 1)


#: Requests whose CPU attention is batched when measuring the host's best per-token rate
#: (large enough that the per-request query/output traffic is negligible).
CEILING_CPU_BATCH = 256


@cache
def decode_ceilings(
    setting: str, l_in: int, l_out: int, cpu: str | None = None
) -> tuple[float, float]:
    """Steady-state ceilings (tokens/s) on offloading Neo's decode rate at a synthetic
    point, from the model's own costs: ``(gpu, cpu)``.

    *GPU-resident*: the GPU cache's requests at their mean context ``l_in + l_out / 2``,
    each decoding once per pass, a pass lasting at least :func:`_min_pass_s`. *CPU-resident*:
    the host's attention over every layer for one token at the mean context, at its best
    per-token rate (a batch of :data:`CEILING_CPU_BATCH`). Prefills, swaps and pipeline
    bubbles only lower Neo's rate, so ``gpu + cpu`` bounds what any schedule can decode.
    """
    sim, model = _neo_costs(setting, cpu)
    ctx = l_in + l_out / 2
    resident = sim.gpu_pool * sim.block_size / ctx
    n = CEILING_CPU_BATCH
    cpu_s = model.n_layers * sim.costs.cpu_attn_layer_s(n, round(n * ctx))
    return resident / _min_pass_s(sim, model), n / cpu_s


#: The T4's memory as the CUDA driver reports it: 14.75 GiB (PyTorch's out-of-memory
#: reports on T4s read "GPU 0; 14.75 GiB total capacity", as quoted in public PyTorch
#: issue threads; the 16 GB of the datasheet less ECC and the driver's reserve).
#: SwiftLLM's 0.99 rule multiplies this total, not the datasheet's; used only to state the
#: sensitivity in the Fig. 6 T4 note (the catalog keeps the datasheet figure every other
#: model uses).
T4_DRIVER_TOTAL_BYTES = 14.75 * 2**30


def implied_gpu_cache_tokens(setting: str, kind: str, gain: float) -> float:
    """The GPU cache (tokens) of a GPU-only baseline whose decode capacity is the prefill
    ceiling over ``gain``: if Neo at most reaches the prefill ceiling ``1 / P``, a ``gain``
    over the baseline puts the baseline at ``r = 1 / (gain · P)``. At rate ``r`` a GPU-only
    system prefills for ``r · P`` of its time and decodes ``r · out`` tokens/s in the rest,
    in passes of at least :func:`_min_pass_s` holding ``resident`` requests of mean
    context ``in + out / 2``: ``resident = r · out · t_pass / (1 − r · P)``."""
    sim, model = _neo_costs(setting)
    p = _mean_prefill_s(setting, kind)
    inp, out = _lengths(kind, SETTINGS[setting].online_requests)
    mean_in, mean_out = float(np.mean(inp)), float(np.mean(out))
    r = 1.0 / (gain * p)
    resident = r * mean_out * _min_pass_s(sim, model) / (1.0 - r * p)
    return resident * (mean_in + mean_out / 2)


def t4_ceiling_ratios(paper: float) -> dict[str, Any]:
    """The T4 Fig. 9 grid's :func:`decode_ceilings` over the measured GPU-only baseline
    (decoded tokens/s), their range, and the least factor on the host's bandwidth at which
    the ceiling reaches ``paper`` at some point (the CPU ceiling scales with bandwidth:
    attention is bandwidth-bound)."""
    ratios: dict[str, dict[str, float]] = {}
    factors: list[float] = []
    for l_in, outs in synth_grid("t4"):
        row: dict[str, float] = {}
        for o in outs:
            g, c = decode_ceilings("t4", l_in, o)
            base = offline_throughput("t4", "gpu-only", l_in, o) * o
            row[f"out{o}"] = round((g + c) / base, 3)
            factors.append(max(0.0, paper * base - g) / c)
        ratios[f"in{l_in}"] = row
    flat = [v for row in ratios.values() for v in row.values()]
    return {
        "ratios": ratios,
        "lowest": min(flat),
        "highest": max(flat),
        "bandwidth_factor": min(factors),
    }


def _kv_tokens_at(setting: str, total_bytes: float, utilization: float) -> float:
    """GPU KV tokens of the baseline (SwiftLLM's rule) with another memory total and
    utilisation: ``total · utilization − weights − activations`` over the KV per token."""
    sim, _model = _neo_costs(setting)
    g = sim.costs.gpu
    shard = sim.costs.shard
    free = (
        total_bytes * utilization
        - g.weights_bytes(shard)
        - activation_bytes(g, shard, sim.max_tokens)
    )
    return max(0.0, free / g.kv_bytes_per_token(shard))


@cache
def _gpu_cache(setting: str, kind: str) -> dict[str, float]:
    """The baseline's GPU KV cache (GPU-only Neo: the full block count; offloading Neo
    gives one layer in L + 1 of it to staging, see ``offload_gpu_pool``) in tokens and in
    average requests of the dataset."""
    system, _ = _system(setting, "neo-gpu")
    model = builtin_catalog().model(SETTINGS[setting].model)
    inp, out = _lengths(kind, SETTINGS[setting].online_requests)
    sim = NeoPolicy().build(system, model, _synthetic(100, 10, 1))
    tokens = sim.gpu_pool * sim.block_size
    return {"tokens": tokens, "requests": tokens / (float(np.mean(inp)) + float(np.mean(out)))}


def _latency_points(setting: str, variant: str) -> list[list[float]]:
    """The (rate, latency) points the search evaluated, sorted by rate."""
    kind = "osc" if setting == "t4" else "ac"
    return [[round(r, 4), round(v, 4)] for r, v in sorted(_SEEN.get((setting, variant, kind), []))]


@dataclass
class _Sweeps:
    """Every synthetic output sweep (Fig. 9 per input, Fig. 10a per CPU) and the lowest
    ratio seen, for the shape checks."""

    curves: dict[str, list[float]] = field(default_factory=dict)
    worst: tuple[float, str] = (math.inf, "")

    def add(self, name: str, ratios: list[float], labels: list[str]) -> None:
        self.curves[name] = ratios
        for r, label in zip(ratios, labels, strict=True):
            if r < self.worst[0]:
                self.worst = (r, label)


def _synthetic_checks() -> list[Check]:
    sweeps = _Sweeps()
    return _fig9_checks(sweeps) + _fig10_checks(sweeps) + [_fig8b_check()] + _shape_checks(sweeps)


def _fig9_checks(sweeps: _Sweeps) -> list[Check]:
    """Fig. 9: the best Neo / GPU-only gain of each testbed over its synthetic grid."""
    checks: list[Check] = []
    fig9_tids = {"h100": "neo.fig9.h100_max", "a10g": "neo.fig9.a10g_max", "t4": "neo.fig9.t4_max"}
    for setting, tid in fig9_tids.items():
        table: dict[str, dict[str, float]] = {}
        best = (-math.inf, 0, 0)
        grid = synth_grid(setting)
        for l_in, outs in grid:
            ratios = [_ratio(setting, "neo", l_in, o) for o in outs]
            table[f"in{l_in}"] = {f"out{o}": round(r, 4) for o, r in zip(outs, ratios, strict=True)}
            sweeps.add(f"{setting}/in{l_in}", ratios, [f"{setting} in{l_in} out{o}" for o in outs])
            for o, r in zip(outs, ratios, strict=True):
                if r > best[0]:
                    best = (r, l_in, o)
        limit = SETTINGS[setting].max_len
        words = {
            "inputs": ", ".join(str(i) for i, _ in grid),
            "outputs": ", ".join(map(str, SYNTH_OUTPUTS)),
            "limit": load_targets(PAPER).fragment("fig9_limit", max_len=limit) if limit else "",
            "best_in": best[1],
            "best_out": best[2],
        }
        details: dict[str, Any] = {"relative_throughput": table}
        if setting == "t4":
            t4_cache = _gpu_cache(setting, "osc")["tokens"]
            paper = load_targets(PAPER).value(tid)
            bound = t4_ceiling_ratios(paper)
            details["ceiling_over_baseline"] = bound["ratios"]
            details["host_bandwidth_factor_for_paper_value"] = round(bound["bandwidth_factor"], 3)
            host = builtin_catalog().device(SETTINGS[setting].cpu)
            at_best = bound["ratios"][f"in{best[1]}"][f"out{best[2]}"]
            words.update(
                t4_cache=t4_cache,
                lowest=bound["lowest"],
                highest=bound["highest"],
                at_best=at_best,
                reached_pct=100 * best[0] / at_best,
                host_bw=host.mem_bw_gbps,
            )
        elif setting == "h100":
            words["peak_2000"] = max(table["in2000"].values())
        checks.append(_check(tid, best[0], details, **words))
    return checks


def _fig10_checks(sweeps: _Sweeps) -> list[Check]:
    """Fig. 10a: CPU sensitivity on A10G, and the peaks' order by host bandwidth."""
    checks: list[Check] = []
    peaks: dict[str, float] = {}
    fig10: dict[str, dict[str, float]] = {}
    for cpu in FIG10_CPUS:
        ratios = [_ratio("a10g", "neo", FIG10_INPUT, o, cpu) for o in SYNTH_OUTPUTS]
        fig10[cpu] = _by_output(ratios)
        sweeps.add(
            f"a10g/{cpu}", ratios, [f"a10g {cpu} in{FIG10_INPUT} out{o}" for o in SYNTH_OUTPUTS]
        )
        peaks[cpu] = max(ratios)
    for cpu in FIG10_CPUS:
        tid = f"neo.fig10.{cpu.removesuffix('-cpu').replace('-', '_')}"
        checks.append(
            _check(
                tid,
                peaks[cpu],
                {"relative_throughput": fig10[cpu]},
                outputs=", ".join(map(str, SYNTH_OUTPUTS)),
                input=FIG10_INPUT,
                cpu=cpu,
            )
        )
    p = [peaks[c] for c in FIG10_CPUS]
    ordered = abs(p[0] - p[1]) <= 0.02 * p[1] or p[0] < p[1]
    ordered = ordered and p[1] < p[2] < p[3]
    checks.append(
        _check(
            "neo.fig10.order",
            1.0 if ordered else 0.0,
            {"peaks": {c: round(v, 4) for c, v in peaks.items()}},
        )
    )
    return checks


def _fig8b_check() -> Check:
    """Fig. 8b: FastDecode+ on 2xH100, input 2000, at the longest output."""
    fd = [_ratio("h100", "fastdecode+", 2000, o) for o in SYNTH_OUTPUTS]
    neo = [_ratio("h100", "neo", 2000, o) for o in SYNTH_OUTPUTS]
    return check(
        PAPER,
        "neo.fig8.fastdecode_long_output",
        fd[-1],
        out=SYNTH_OUTPUTS[-1],
        details={
            "fastdecode_relative": {
                f"out{o}": round(r, 4) for o, r in zip(SYNTH_OUTPUTS, fd, strict=True)
            },
            "neo_relative": {
                f"out{o}": round(r, 4) for o, r in zip(SYNTH_OUTPUTS, neo, strict=True)
            },
        },
    )


def _shape_checks(sweeps: _Sweeps) -> list[Check]:
    """Shapes: gains rise then fall; never much below the baseline."""
    curves = sweeps.curves
    good = {k: _rises_then_falls(v) for k, v in curves.items()}
    t4_bound = t4_ceiling_ratios(load_targets(PAPER).value("neo.fig9.t4_max"))
    t4_peaks_first = sum(
        1 for row in t4_bound["ratios"].values() if max(row.values()) == next(iter(row.values()))
    )
    worst = sweeps.worst
    return [
        _check(
            "neo.fig9.rise_then_fall",
            sum(good.values()) / len(good),
            {
                "curves": {k: [round(x, 4) for x in v] for k, v in curves.items()},
                "holds": good,
                "t4_ceiling_over_baseline": t4_bound["ratios"],
            },
            failing=", ".join(k for k, v in good.items() if not v) or "none",
            t4_in500=", ".join(f"{v:.2f}×" for v in t4_bound["ratios"]["in500"].values()),
            t4_first=t4_peaks_first,
            t4_inputs=len(T4_INPUTS),
        ),
        check(PAPER, "neo.fig9.worst_ratio", worst[0], details={"at": worst[1]}, at=worst[1]),
    ]


# --- running the independent simulations side by side ----------------------------------------

#: Results computed ahead by :func:`prefetch`, read first by :func:`fig6_rate` and
#: :func:`offline_throughput` (keys: ``("fig6", setting, variant)`` and ``("offline",
#: setting, variant, l_in, l_out, cpu)``).
_PREFETCHED: dict[tuple[Any, ...], float] = {}

_Task = tuple[Any, ...]


def _tasks() -> list[_Task]:
    """Every simulation the checks below read, as :data:`_PREFETCHED` keys, the longest
    first (the Fig. 6 rate searches, then offline points by request length)."""
    fig6: list[_Task] = [
        ("fig6", setting, v) for setting in SETTINGS for v in ("neo", "neo-gpu", "gpu-only")
    ]
    fig6.append(("fig6", "h100", "fastdecode+"))
    offline: set[_Task] = set()
    for setting in SETTINGS:
        for l_in, outs in synth_grid(setting):
            for o in outs:
                for v in ("gpu-only", "neo"):
                    offline.add(("offline", setting, v, l_in, o, None))
    for cpu in FIG10_CPUS:
        own = cpu == SETTINGS["a10g"].cpu
        for o in SYNTH_OUTPUTS:
            offline.add(("offline", "a10g", "neo", FIG10_INPUT, o, None if own else cpu))
    for o in SYNTH_OUTPUTS:
        offline.add(("offline", "h100", "fastdecode+", 2000, o, None))
    # T4 first among equals: its online runs are the longest (2000 requests).
    fig6.sort(key=lambda t: t[1] != "t4")
    return fig6 + sorted(offline, key=lambda t: (-(t[3] + t[4]), repr(t)))


def _run_task(task: _Task) -> tuple[_Task, float | None, list[tuple[float, float]]]:
    """One task in a worker: its value (None when the run is refused) and, for a rate
    search, the latency points it evaluated."""
    try:
        if task[0] == "fig6":
            value = fig6_rate(task[1], task[2])
            kind = "osc" if task[1] == "t4" else "ac"
            return task, value, list(_SEEN.get((task[1], task[2], kind), []))
        return task, offline_throughput(*task[1:]), []
    except CapacityError:
        return task, None, []


@prefetcher(PAPER)
def prefetch(jobs: int, tasks: list[_Task] | None = None) -> None:
    """Run the checks' independent simulations (``tasks``, default :func:`_tasks`) in
    ``jobs`` forked processes and keep the results for the checks to read (so ``reproduce all``
    takes less wall time). Every run is deterministic and computed exactly as the
    checks would compute it, so the output does not depend on ``jobs``; with one process
    nothing is run ahead."""
    if jobs <= 1:
        return
    todo = [t for t in (_tasks() if tasks is None else tasks) if t not in _PREFETCHED]
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        for task, value, seen in pool.map(_run_task, todo):
            if value is None:
                continue
            _PREFETCHED[task] = value
            if task[0] == "fig6":
                kind = "osc" if task[1] == "t4" else "ac"
                _SEEN.setdefault((task[1], task[2], kind), []).extend(seen)


@runner(PAPER)
def neo_checks() -> list[Check]:
    """Every Neo check (Figs. 6, 8, 9, 10a)."""
    return _fig6_checks() + _synthetic_checks()
