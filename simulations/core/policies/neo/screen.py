"""The capacity planner's screen of Neo-style nodes: ``neo``, ``fastdecode+`` and their
``gpu-only`` baseline.

A node is one server (count column 0 is 1) whose tensor-parallel degree is its GPU count,
so the planner bounds each configuration on its own (``tp``). The memory fit (the
policies' ``screen_fit``) builds the policy's own simulator (Neo) or the engine's batching
on the tensor-parallel unit (``gpu-only``); the bounds follow (every one optimistic for feasibility,
``simulations.core.screening``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulations.core.devices import build_device_model
from simulations.core.devices.base import DeviceModel
from simulations.core.devices.gpu import GpuModel
from simulations.core.engine.core import Unit
from simulations.core.errors import SpecError
from simulations.core.screening import (
    SLACK,
    BoundContext,
    Bounds,
    FitContext,
    LateCheck,
    SignatureLike,
    allowed_late,
)

from .costs import StageCosts
from .tp import TensorParallelGpu, shard_model


def tp_unit(ctx: FitContext, entry: int, tp: int) -> Unit:
    """The ``gpu-only`` policy's engine unit: the tensor-parallel group of ``tp`` GPUs of
    ``entry`` (CapacityError when the weights do not fit; SpecError when the heads do not
    divide)."""
    device, runtime = ctx.device(entry)
    inner = build_device_model(device, runtime)
    if not isinstance(inner, GpuModel):
        raise SpecError("devices", "a tensor-parallel group needs the GPU model")
    shard_model(ctx.model, tp)  # SpecError when the heads do not divide
    dm: DeviceModel = inner if tp == 1 else TensorParallelGpu(inner, tp)
    return Unit(0, 0, device, runtime, "gpu", dm, ctx.model, timeline_cap=0)


def gpu_only_bounds(
    ctx: BoundContext, sig: SignatureLike, opts: dict[str, Any], tp: int
) -> Bounds | None:
    """``gpu-only``: the engine's continuous batching on one unit, the tensor-parallel
    group of ``tp`` GPUs (one server: capacity column 0 is 1)."""
    entry = sig.role_entry("gpu")
    assert entry is not None
    t = ctx.table_of(("tp", entry, tp), lambda: tp_unit(ctx, entry, tp))
    return ctx.whole_requests(t, int(opts["max_batch"]), ("tp", entry, sig.options, tp), 1)


def neo_bounds(
    ctx: BoundContext,
    sig: SignatureLike,
    costs: StageCosts,
    max_batch: int,
    tp: int,
    *,
    gpu_decode_attention: bool,
) -> Bounds:
    """``neo`` and ``fastdecode+``: one node whose iterations run back to back (one
    server: capacity column 0 is 1), each lasting at least its GPU linear stage.

    From :class:`~simulations.core.policies.neo.sim.NeoSim`: an iteration lasts at least
    ``L × (T_l0 + T_ga0)`` plus its pre/post-layer (two-batch: ``max{T_l0, T_ca1} +
    max{T_l1 + T_ga0, T_ca0}`` per layer is at least that, and at least ``T_l + T_ca``
    of the sub-batch holding a CPU decode). Stage times are monotone in tokens,
    sequences and attended positions, so:

    * a request's TTFT is at least the iteration holding its prompt alone,
      ``L × (T_l(p) + T_pa(p)) + pre_post(p, 1)``;
    * each of its decode tokens comes from a later iteration of at least
      ``L × (T_l(1) + min(decode attention on GPU or CPU, a re-prefill's attention at
      the prompt's length)) + pre_post(1, 1)`` (without ``gpu_decode_attention`` — FastDecode+
      keeps no KV cache on the GPU — the GPU's decode attention is not among them);
    * work per iteration: its prompts' compute (the linear and prefill-attention
      FLOPs at the GPU's achieved rate, additive over packed prompts) fits in it, and so
      does a share ``1 / max_batch`` of the weight-streaming floor ``L × T_l(1) +
      pre_post(1, 1)`` per decode token (at most ``max_batch`` requests are resident).
      The two are separate bounds (each alone fits the iteration).
    """
    r = ctx.req
    n_layers = costs.n_layers
    lens, inverse = np.unique(r.p, return_inverse=True)
    pre = np.empty(len(lens))
    step = np.empty(len(lens))
    comp = np.empty(len(lens))
    floor1 = n_layers * costs.linear_layer_s(1) + costs.pre_post_s(1, 1)
    for k, x in enumerate(lens):
        p = int(x)
        pa = costs.prefill_attn_layer_s([p])
        pre[k] = n_layers * (costs.linear_layer_s(p) + pa) + costs.pre_post_s(p, 1)
        attn = min(pa, costs.gpu_decode_attn_layer_s(1, p)) if gpu_decode_attention else pa
        if costs.cpu is not None:
            attn = min(attn, costs.cpu_attn_layer_s(1, p))
        step[k] = floor1 + n_layers * attn
        comp[k] = n_layers * costs.prompt_compute_layer_s(p)
    prefill_s = pre[inverse]
    per_step = np.where(r.multi, step[inverse], 0.0)
    decode_s = per_step * r.steps
    b = Bounds(
        ttft_req=prefill_s,
        tpot_req=per_step[r.multi],
        finish_req=prefill_s + decode_s,
    )
    compute_s = comp[inverse]
    key = ("neo", sig.policy, sig.options, sig.roles, tp)
    for q, ttft_ms in ctx.targets.ttft():
        ttft_s = ttft_ms / 1e3
        late = ctx.late(
            (*key, ttft_s),
            np.full(r.n, ttft_s),
            lambda idx, end: compute_s[idx],
            prefill_s <= ttft_s * (1 + SLACK),
            1,
        )
        b.checks.append(LateCheck("ttft_queue", allowed_late(r.n, q), late, (0,)))
    share_s = r.steps * (floor1 / max_batch)
    ctx.both_checks(b, key, prefill_s, per_step, share_s, (0,), 1)
    b.work.append((float(compute_s.sum()), (0,)))
    b.work.append((float(share_s.sum()), (0,)))
    b.power_w = (tp * costs.gpu.floor_power_w(),)
    return b
