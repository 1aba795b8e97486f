"""Stage times of a Neo iteration (§3.2) from the core's device models, and the profile
table the scheduler estimates them from.

A Neo iteration runs, per transformer layer, four kinds of stage (Fig. 5): the *linear*
stage on the GPU (pre-projection: norm, QKV, RoPE; post-projection: output projection,
residual, norm, FFN) — ``T_l(S)`` for ``S`` tokens in a sub-batch; *GPU attention* —
prefill attention of the sub-batch's prompts plus decode attention of its GPU-resident
requests (``T_ga``); and *CPU attention* of its CPU-resident requests (``T_ca``), plus the
pre-layer (embedding) and post-layer (final norm, LM head) once per sub-batch.

:class:`StageCosts` computes these *exactly* from the core's models: the GPU's operator
roofline (:class:`~simulations.core.devices.gpu.GpuModel` via its ``op_times``, on one
tensor-parallel shard, plus the all-reduces) and the host CPU's bandwidth-bound attention
(:meth:`~simulations.core.devices.cpu.CpuModel.attention_decode_layer`). Every operator's
FLOPs and bytes are affine in the token / sequence / attended-position counts (see
:mod:`simulations.core.graph`), so each is reduced once to affine coefficients of its
compute and memory time and evaluated without building graphs.

:class:`ProfileTable` is Neo's offline profile (§3.2: "Neo does offline profiling for typical
input/output lengths and uses linear interpolation to approximate the values for other
lengths"): ``T_l`` over the batch width, prefill attention per prompt length, GPU decode
attention over the attended tokens (profiled on one sequence) and CPU attention over
(batch, attended tokens) with bilinear interpolation — sampled from :class:`StageCosts` at
grid points, as Neo samples its engine. The scheduler decides on these estimates; the
simulated iteration lasts what :class:`StageCosts` says, so interpolation error shows up as
it would on the real system.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulations.core.devices.cpu import CpuModel
from simulations.core.devices.gpu import GpuModel
from simulations.core.errors import SpecError
from simulations.core.graph import OpKind, PhaseGraph, decode_graph, prefill_graph
from simulations.core.spec import LinkSpec, ModelSpec

from .tp import allreduce_layer_s, shard_model

_ATTN_KINDS = (OpKind.ATTN_SCORE, OpKind.SOFTMAX, OpKind.ATTN_VALUE, OpKind.ATTENTION)


@dataclass(frozen=True, slots=True)
class _Op:
    """Compute and memory seconds of one operator as ``c0 + c1·u + c2·v`` each."""

    c: tuple[float, float, float]
    m: tuple[float, float, float]

    def seconds(self, u: float, v: float, floor: float) -> float:
        c0, c1, c2 = self.c
        m0, m1, m2 = self.m
        t = max(c0 + c1 * u + c2 * v, m0 + m1 * u + m2 * v)
        return t if t > floor else floor


def _times(dm: GpuModel, graph: PhaseGraph) -> list[tuple[float, float]]:
    """(compute, memory) seconds of each operator instance of ``graph`` on ``dm``."""
    return [(t.compute_s, t.memory_s) for t in dm.op_times(graph)]


class StageCosts:
    """Exact per-layer stage seconds of one tensor-parallel GPU group and its host CPU.

    ``gpu`` is the cost model of one GPU, ``cpu`` the host CPU's; ``model`` the whole model
    and ``tp`` the number of GPUs it is sharded over (§4). GPU stages cost one shard (the
    GPUs run in lockstep) plus the all-reduces; CPU attention covers every KV head of the
    CPU-resident requests (each shard's partition of the CPU cache lives in the same host
    memory and shares its bandwidth).
    """

    def __init__(
        self,
        gpu: GpuModel,
        cpu: CpuModel | None,
        model: ModelSpec,
        tp: int = 1,
        peer: LinkSpec | None = None,
    ) -> None:
        if not isinstance(gpu, GpuModel):
            raise SpecError("devices", "Neo's GPU stages need the GPU roofline model")
        self.gpu = gpu
        self.cpu = cpu
        self.model = model
        self.tp = tp
        #: The link the GPUs all-reduce over (the system's, else the GPU's peer link).
        self.peer = peer if peer is not None else gpu.device.peer_link
        self.shard = shard_model(model, tp)
        self.n_layers = model.n_layers
        self.fused = bool(getattr(gpu, "fused_attention", False))
        launch = float(getattr(gpu, "launch_s", 0.0))
        kpl = gpu.runtime.kernels_per_layer
        self.link: LinkSpec | None = gpu.device.host_link
        shard = self.shard

        g1 = decode_graph(shard, 1, 0, gpu.precision, fused_attention=self.fused)
        g2 = decode_graph(shard, 2, 0, gpu.precision, fused_attention=self.fused)
        g11 = decode_graph(shard, 1, 1, gpu.precision, fused_attention=self.fused)
        n_ops = len(g1.layer_ops)
        if kpl == 0 or launch == 0.0:
            self.per_op = 0.0
        elif kpl >= n_ops:
            self.per_op = launch
        else:
            self.per_op = launch * kpl / n_ops
        # A stack costed by kernel classes has a shortest kernel, a floor like a launch.
        self.per_op = max(self.per_op, gpu.kernel_floor_s)
        self.glue_layer_s = max(0, kpl - n_ops) * launch
        self.pass_host_s = float(getattr(gpu, "kernels_per_pass", 0)) * launch

        t1, t2, t11 = (_times(gpu, g) for g in (g1, g2, g11))
        ops = g1.ops
        lin: list[_Op] = []
        gemm_c = gemm_m = (0.0, 0.0)
        dec_attn: list[_Op] = []
        for i, op in enumerate(ops[1:-2], start=1):
            (c1, m1), (c2, m2), (c11, m11) = t1[i], t2[i], t11[i]
            if op.kind in _ATTN_KINDS:
                # value(batch, attended) = k0 + kb·batch + ka·attended; (1,1) (2,2) (1,2)
                ka_c, ka_m = c11 - c1, m11 - m1
                kb_c, kb_m = c2 - c11, m2 - m11
                dec_attn.append(_Op((c1 - kb_c - ka_c, kb_c, ka_c), (m1 - kb_m - ka_m, kb_m, ka_m)))
            else:
                lin.append(_Op((2 * c1 - c2, c2 - c1, 0.0), (2 * m1 - m2, m2 - m1, 0.0)))
                if op.kind is OpKind.GEMM:
                    gemm_c = (gemm_c[0] + 2 * c1 - c2, gemm_c[1] + c2 - c1)
                    gemm_m = (gemm_m[0] + 2 * m1 - m2, gemm_m[1] + m2 - m1)
        self._lin = lin
        self._lin_memo: dict[int, float] = {}
        # pre_post_s by (tokens, sequences, step): a pure function of them, asked for once
        # per iteration with few distinct arguments (a profile of ``reproduce neo``: ~7 % of it).
        self._prepost_memo: dict[tuple[int, int, bool], float] = {}
        # The linear stage's ridge: the width at which its GEMMs stop being bound by
        # streaming their weights (below it, more tokens cost almost nothing).
        if gemm_c[1] > gemm_m[1]:
            self.saturation_tokens = max(
                1, math.ceil((gemm_m[0] - gemm_c[0]) / (gemm_c[1] - gemm_m[1]))
            )
        else:
            self.saturation_tokens = 1
        self._dec_attn = dec_attn
        emb = (t1[0], t2[0])
        self._pre = _Op(
            (2 * emb[0][0] - emb[1][0], emb[1][0] - emb[0][0], 0.0),
            (2 * emb[0][1] - emb[1][1], emb[1][1] - emb[0][1], 0.0),
        )
        self._post = [
            _Op(
                (2 * t1[j][0] - t2[j][0], t2[j][0] - t1[j][0], 0.0),
                (2 * t1[j][1] - t2[j][1], t2[j][1] - t1[j][1], 0.0),
            )
            for j in (len(ops) - 2, len(ops) - 1)
        ]
        # Prefill attention: value(tokens, attended); prompts [1], [1, 1], [2].
        p1 = prefill_graph(shard, [1], gpu.precision, fused_attention=self.fused)
        p11 = prefill_graph(shard, [1, 1], gpu.precision, fused_attention=self.fused)
        p2 = prefill_graph(shard, [2], gpu.precision, fused_attention=self.fused)
        a1, a11, a2 = p1.attended, p11.attended, p2.attended
        pt1, pt11, pt2 = (_times(gpu, g) for g in (p1, p11, p2))
        pre_attn: list[_Op] = []
        for i, op in enumerate(p1.ops):
            if op.kind not in _ATTN_KINDS:
                continue
            coeffs = []
            for k in (0, 1):
                v1, v11, v2 = pt1[i][k], pt11[i][k], pt2[i][k]
                ka = (v2 - v11) / (a2 - a11)
                kt = v11 - v1 - ka * (a11 - a1)
                coeffs.append((v1 - kt - ka * a1, kt, ka))
            pre_attn.append(_Op(coeffs[0], coeffs[1]))
        self._pre_attn = pre_attn
        if model.mla is not None:
            # Neo ships Q, K and V of GQA attention to the host; MLA's latent is not modelled
            raise SpecError("model", f"{model.slug}: MLA attention is not modelled under Neo")
        self.kv_token_bytes = model.kv_bytes_per_token(gpu.runtime.kv_bits)
        a = gpu.precision.a
        q_dim = model.n_heads * model.head_dim
        kv_dim = model.n_kv_heads * model.head_dim
        # Per CPU-decoded token and layer: Q, K, V to the host, the attention output back.
        self.qkv_bytes = (q_dim + 2 * kv_dim) * a
        self.o_bytes = q_dim * a

    # --- GPU -------------------------------------------------------------------------

    def linear_layer_s(self, tokens: int) -> float:
        """One layer's linear stage for ``tokens`` tokens (0 tokens: no stage), with the
        tensor-parallel all-reduces."""
        if tokens <= 0:
            return 0.0
        hit = self._lin_memo.get(tokens)
        if hit is not None:
            return hit
        t = self._linear_layer_s(tokens)
        if len(self._lin_memo) < 65536:
            self._lin_memo[tokens] = t
        return t

    def _linear_layer_s(self, tokens: int) -> float:
        f = self.per_op
        t = sum(op.seconds(tokens, 0.0, f) for op in self._lin) + self.glue_layer_s
        t += self.gpu.layer_extra_s(self.shard, tokens)
        if self.tp > 1:
            t += allreduce_layer_s(self.gpu.device, self.model, self.tp, tokens, self.peer)
        return t

    def gpu_decode_attn_layer_s(self, batch: int, cached: int) -> float:
        """One layer's decode attention of ``batch`` GPU-resident requests holding
        ``cached`` tokens in total (each attends to its cache and its new token)."""
        if batch <= 0:
            return 0.0
        f = self.per_op
        return sum(op.seconds(batch, cached + batch, f) for op in self._dec_attn)

    @staticmethod
    def _attended(fused: bool, lens: Sequence[int]) -> int:
        return sum(s * (s + 1) // 2 for s in lens) if fused else sum(s * s for s in lens)

    def prefill_attn_layer_s(self, lens: Sequence[int]) -> float:
        """One layer's prefill attention of the prompts ``lens`` (one packed kernel)."""
        if not lens:
            return 0.0
        tokens = sum(lens)
        att = self._attended(self.fused, lens)
        f = self.per_op
        return sum(op.seconds(tokens, att, f) for op in self._pre_attn)

    def prompt_compute_layer_s(self, prompt: int) -> float:
        """One layer's compute-only seconds (FLOPs at the achieved rate, no memory time, no
        launch floor, no all-reduce) of one ``prompt``-token prompt's linear stage and
        prefill attention, as a share that stays a lower bound when prompts are packed with
        others: an operator's compute time is ``c0 + c1·tokens + c2·attended``, so a share
        drops a positive intercept (paid once per pass) and keeps a negative one (only
        lowers the share). Never negative."""
        total = 0.0
        for op in self._lin:
            c0, c1, _ = op.c
            total += min(c0, 0.0) + c1 * prompt
        attended = self._attended(self.fused, [prompt])
        for op in self._pre_attn:
            c0, c1, c2 = op.c
            total += min(c0, 0.0) + c1 * prompt + c2 * attended
        return max(total, 0.0)

    def pre_post_s(self, tokens: int, sequences: int, *, step: bool = True) -> float:
        """Embedding of ``tokens`` tokens and final norm + LM head of ``sequences``
        sequences (once per sub-batch), with the stack's per-pass host work and, for a
        stack costed by kernel classes, its sampler and host step (whose fixed share an
        iteration pays once: ``step`` False for its second sub-batch)."""
        if sequences <= 0:
            return 0.0
        key = (tokens, sequences, step)
        hit = self._prepost_memo.get(key)
        if hit is not None:
            return hit
        f = self.per_op
        t = self._pre.seconds(tokens, 0.0, f) + sum(
            op.seconds(sequences, 0.0, f) for op in self._post
        )
        t = t + self.pass_host_s + self.gpu.pass_extra_s(self.shard, sequences, step=step)
        if len(self._prepost_memo) < 65536:
            self._prepost_memo[key] = t
        return t

    # --- CPU -------------------------------------------------------------------------

    def cpu_attn_layer_s(self, batch: int, cached: int) -> float:
        """One layer's decode attention of ``batch`` CPU-resident requests holding
        ``cached`` tokens in total, on the host CPU (Neo §4, PACPU)."""
        if batch <= 0:
            return 0.0
        if self.cpu is None:
            raise SpecError("devices", "CPU attention needs a device with role 'cpu'")
        return self.cpu.attention_decode_layer(self.model, batch, cached)

    # --- PCIe ------------------------------------------------------------------------

    def link_s(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` of KV or activations between host and GPUs: each GPU
        moves its shard over its own host link, in parallel."""
        if nbytes <= 0:
            return 0.0
        if self.link is None:
            raise SpecError(
                f"{self.gpu.device.slug}.host_link", "Neo moves KV over PCIe: the GPU needs one"
            )
        return self.link.transfer_s(nbytes / self.tp)


# --- profile table -----------------------------------------------------------------------


def _grid(lo: int, hi: int) -> list[int]:
    """``lo`` … ``hi`` on Neo's profiling grid: 3·2^(k−2) and 2^k points (plus both ends)."""
    pts = {lo, hi}
    k = 0
    while 2**k <= hi:
        for v in (2**k, 3 * 2**k // 2):
            if lo <= v <= hi:
                pts.add(v)
        k += 1
    return sorted(pts)


def interp(xs: list[int], ys: list[float], x: float) -> float:
    """Linear interpolation (linear extrapolation beyond the last two points)."""
    i = bisect.bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return ys[i]
    if i == 0:
        i = 1
    elif i >= len(xs):
        i = len(xs) - 1
    x0, x1 = xs[i - 1], xs[i]
    y0, y1 = ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


class ProfileTable:
    """Neo's offline profile of the stage times, with linear interpolation (§3.2).

    Sampled from :class:`StageCosts`: ``T_l`` at every width up to 64 tokens and on the
    3·2^k / 2^k grid above (to ``max_tokens``); prefill attention per prompt length (to
    ``max_prompt``); GPU decode attention of one sequence attending ``N`` tokens (to
    ``max_gpu_tokens``), summed over a batch's tokens as Neo's profiler does; CPU attention
    on a (batch, cached tokens) grid, interpolated bilinearly. Values past a grid's end are
    extrapolated from its last two points.
    """

    def __init__(
        self,
        costs: StageCosts,
        *,
        max_tokens: int,
        max_prompt: int,
        max_gpu_tokens: int,
        max_cpu_tokens: int,
        max_batch: int,
    ) -> None:
        self.costs = costs
        lin_x = sorted(set(range(1, 65)) | set(_grid(64, max(64, max_tokens, max_prompt))))
        self.lin_x = lin_x
        self.lin_y = [costs.linear_layer_s(s) for s in lin_x]
        # The interpolated T_l at every width a scheduler asks about most, precomputed.
        self._lin_at = [0.0] + [
            interp(lin_x, self.lin_y, s) for s in range(1, max_tokens + max_batch + 2)
        ]
        pref_x = _grid(1, max(2, max_prompt))
        self.pref_x = pref_x
        self.pref_y = [costs.prefill_attn_layer_s([s]) for s in pref_x]
        gdec_x = _grid(1, max(2, max_gpu_tokens))
        self.gdec_x = gdec_x
        self.gdec_y = [costs.gpu_decode_attn_layer_s(1, n - 1) for n in gdec_x]
        self.cdec_b = _grid(1, max(2, max_batch))
        self.cdec_c = [0, *_grid(1, max(2, max_cpu_tokens))]
        if costs.cpu is not None:
            self.cdec_y = [[costs.cpu_attn_layer_s(b, c) for c in self.cdec_c] for b in self.cdec_b]
        else:
            self.cdec_y = []
        self._cdec_rows: dict[int, tuple[float, float, list[float] | None]] = {}

    def linear(self, tokens: int) -> float:
        """Estimated ``T_l`` of one layer for ``tokens`` tokens (0 for none)."""
        if tokens <= 0:
            return 0.0
        if tokens < len(self._lin_at):
            return self._lin_at[tokens]
        return interp(self.lin_x, self.lin_y, tokens)

    def prefill_attn(self, prompt: int) -> float:
        """Estimated prefill attention of one prompt in one layer."""
        return interp(self.pref_x, self.pref_y, prompt)

    def gpu_decode_attn(self, attended: int) -> float:
        """Estimated decode attention of GPU requests attending ``attended`` tokens in all."""
        if attended <= 0:
            return 0.0
        return interp(self.gdec_x, self.gdec_y, attended)

    def cdec_line(self, batch: int) -> tuple[float, float, list[float] | None]:
        """The table's row for ``batch`` requests over the cached tokens: interpolated
        between the profiled batch sizes at every profiled token count (bilinear
        interpolation, row first). Returned as ``(a, b, None)`` when the row's points lie on
        one line ``a + b·cached`` (bandwidth-bound attention: then interpolating the row is
        evaluating the line), else ``(0, 0, row)``."""
        hit = self._cdec_rows.get(batch)
        if hit is not None:
            return hit
        bs = self.cdec_b
        i = bisect.bisect_left(bs, batch)
        if i < len(bs) and bs[i] == batch:
            row = self.cdec_y[i]
        else:
            if i == 0:
                i = 1
            elif i >= len(bs):
                i = len(bs) - 1
            w = (batch - bs[i - 1]) / (bs[i] - bs[i - 1])
            lo, hi = self.cdec_y[i - 1], self.cdec_y[i]
            row = [a + (b - a) * w for a, b in zip(lo, hi, strict=True)]
        xs = self.cdec_c
        a0 = row[0]
        slope = (row[-1] - a0) / (xs[-1] - xs[0])
        line = all(
            abs(a0 + slope * x - y) <= 1e-12 * max(abs(y), 1e-30)
            for x, y in zip(xs, row, strict=True)
        )
        out = (a0, slope, None) if line else (0.0, 0.0, row)
        self._cdec_rows[batch] = out
        return out

    def cpu_attn(self, batch: int, attended: int) -> float:
        """Estimated CPU attention of ``batch`` requests attending ``attended`` tokens."""
        if batch <= 0:
            return 0.0
        a, b, row = self.cdec_line(batch)
        cached = attended - batch
        return a + b * cached if row is None else interp(self.cdec_c, row, cached)
