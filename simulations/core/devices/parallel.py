"""Tensor and pipeline parallelism: a group of identical devices serving one model replica.

*Tensor parallelism* (Megatron-style, as vLLM shards a model): attention heads and KV heads
are split across the ``tp`` devices (column-parallel QKV, row-parallel output projection),
the FFN's intermediate width likewise (column-parallel gate/up, row-parallel down), the
embedding and the LM head along the vocabulary; norms are replicated. Each device holds
``1/tp`` of the GEMM weights and of every token's KV cache, and each layer ends its
attention block and its FFN with an all-reduce of the layer's activations (two per layer).

*Pipeline parallelism*: the layers are split into ``pp`` stages of ``n_layers / pp`` layers
(each stage a TP group of ``tp`` devices); a pass is cut into micro-batches that flow through
the stages (GPipe). With ``m`` equal micro-batches of stage time ``t`` a pass takes
``(m + pp − 1) × t``: the bubble fraction is ``(pp − 1) / (m + pp − 1)``. Between stages a
micro-batch's activations cross the link once.

*Expert parallelism* (a mixture of experts' ``ep`` degree, :class:`~simulations.core.spec.
MoeSpec`): each of ``ep`` devices holds ``n_experts / ep`` whole experts instead of a
``1/tp`` slice of every expert. Two layouts: ``ep == tp`` — attention tensor-parallel over
the group, experts spread over the same devices; every device holds all the tokens after
the attention all-reduce, computes its experts' share and the all-reduce that ends the
layer combines them (vLLM's ``--enable-expert-parallel`` on a TP group: the collectives of
plain TP) — and ``tp == 1 < ep`` — attention data-parallel (each device serves
``⌈batch / ep⌉`` of the sequences), experts spread; each MoE layer dispatches every token
to the devices of its routed experts and combines the results back, two all-to-alls
(:func:`all_to_all_bytes`, DeepEP/pplx-style: one copy per destination device). Under
skewed routing the busiest device (:func:`~simulations.core.graph.expert_load`) sets the
step, its experts receiving the copies of the whole group's tokens.

*Collectives* run over a :class:`~simulations.core.spec.LinkSpec` (bandwidth per direction,
latency per step). The algorithm is a setting of the serving stack (the runtime profile's
``allreduce_algorithm`` parameter, :data:`ALLREDUCE_ALGORITHMS`):

* ring (0, NCCL's default for large messages): ``2(n−1)`` steps, each paying the link's
  latency, moving ``2(n−1)/n`` of the tensor over each device's link —
  ``t = 2(n−1) × latency + 2(n−1)/n × bytes / bandwidth``;
* one-shot (1, vLLM's custom all-reduce for small messages over a switched fabric): every
  device sends its whole tensor to the others at once and reduces locally —
  ``t = latency + (n−1) × bytes / bandwidth`` (:func:`one_shot_allreduce_s`).

:func:`shard_model` gives one device's shapes as a :class:`ModelSpec`, so the operator graph
and every device model cost one device's share without knowing about parallelism;
:class:`ParallelGroup` wraps a device's cost model into the cost model of the whole group
(the engine sees one unit per replica).

Deviations: a stage is costed as the model cut to ``n_layers / pp`` layers *with* the
embedding, the LM head and the stack's per-pass host costs, an upper bound for every stage
(only the first holds the embedding, only the last the LM head); micro-batches of a decode
step are equal (the largest, ``⌈batch / m⌉`` sequences and ``⌈kv / m⌉`` cached tokens);
all-reduces and stage-to-stage sends do not overlap compute; a ring runs over one link per
device at the link's full bandwidth per direction.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from simulations.core.errors import SpecError
from simulations.core.spec import LinkSpec, ModelSpec

from .base import DeviceModel, PhaseCost, StreamFloor

#: Bytes per activation element the all-reduces move: the row-parallel GEMMs' outputs are
#: reduced in 16-bit (FP16/BF16) whatever the weights' precision (vLLM keeps activations
#: between layers in the model dtype, also under FP8 and INT4 weights).
ALLREDUCE_BYTES_PER_ELEMENT = 2
#: The all-reduce algorithms a runtime profile may name in ``params.allreduce_algorithm``.
ALLREDUCE_RING = 0
ALLREDUCE_ONE_SHOT = 1
ALLREDUCE_ALGORITHMS = {ALLREDUCE_RING: "ring", ALLREDUCE_ONE_SHOT: "one-shot"}
#: All-reduces per transformer layer under tensor parallelism (after attention, after FFN).
ALLREDUCES_PER_LAYER = 2


def ring_allreduce_s(link: LinkSpec, n: int, nbytes: float) -> float:
    """Seconds of a ring all-reduce of ``nbytes`` over ``n`` devices:
    ``2(n−1) × latency + 2(n−1)/n × bytes / bandwidth`` (0 for one device or no bytes)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    steps = 2 * (n - 1)
    return steps * link.latency_us * 1e-6 + steps / n * nbytes / (link.bw_gbps * 1e9)


def one_shot_allreduce_s(link: LinkSpec, n: int, nbytes: float) -> float:
    """Seconds of a one-shot all-reduce: each device sends its whole tensor to the ``n − 1``
    others at once through the switch and reduces locally — one latency, ``(n−1) × bytes``
    out of each device's link: ``latency + (n−1) × bytes / bandwidth``."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return link.latency_us * 1e-6 + (n - 1) * nbytes / (link.bw_gbps * 1e9)


def allreduce_s(link: LinkSpec, n: int, nbytes: float, algorithm: int = ALLREDUCE_RING) -> float:
    """Seconds of one all-reduce of ``nbytes`` across ``n`` devices with ``algorithm``."""
    if algorithm == ALLREDUCE_RING:
        return ring_allreduce_s(link, n, nbytes)
    if algorithm == ALLREDUCE_ONE_SHOT:
        return one_shot_allreduce_s(link, n, nbytes)
    raise SpecError(
        "params.allreduce_algorithm",
        f"unknown all-reduce algorithm {algorithm!r} "
        f"(known: {', '.join(f'{k} = {v}' for k, v in ALLREDUCE_ALGORITHMS.items())})",
    )


def all_to_all_destinations(n_experts: int, top_k: int, ep: int) -> float:
    """Expected other devices one token is dispatched to under uniform top-k routing over
    ``ep`` devices of ``n_experts / ep`` experts each: ``(ep − 1) × (1 − C(E − E/ep, k) /
    C(E, k))`` (a device receives the token once if any of its experts is among the k)."""
    if ep <= 1:
        return 0.0
    per = n_experts // ep
    miss = math.comb(n_experts - per, top_k) / math.comb(n_experts, top_k)
    return (ep - 1) * (1.0 - miss)


def all_to_all_bytes(model: ModelSpec, tokens: int, ep: int) -> float:
    """Bytes one device sends in one dispatch (and receives back in the combine) for its
    ``tokens`` tokens: ``tokens × destinations × hidden × 2`` (16-bit activations)."""
    moe = model.moe
    if moe is None or ep <= 1 or tokens <= 0:
        return 0.0
    dest = all_to_all_destinations(moe.n_experts, moe.experts_per_token, ep)
    return tokens * dest * model.hidden_size * ALLREDUCE_BYTES_PER_ELEMENT


def all_to_all_s(link: LinkSpec, ep: int, nbytes: float) -> float:
    """Seconds of an all-to-all in which every device sends ``nbytes`` spread over the
    ``ep − 1`` others at once through the switch: ``latency + bytes / bandwidth``."""
    if ep <= 1 or nbytes <= 0:
        return 0.0
    return link.latency_us * 1e-6 + nbytes / (link.bw_gbps * 1e9)


def allreduce_bytes(model: ModelSpec, tokens: int) -> float:
    """Bytes of the tensor one all-reduce of a layer reduces for ``tokens`` tokens: the
    layer's output activations, ``tokens × hidden_size × 2``."""
    return float(tokens * model.hidden_size * ALLREDUCE_BYTES_PER_ELEMENT)


def check_expert_parallel(model: ModelSpec, tp: int, ep: int) -> None:
    """SpecError naming ``options.expert_parallel`` for a layout this module does not model
    (see the module notes): ``ep`` is 1, ``tp``, or more with ``tp`` 1, and divides the
    experts."""
    if ep == 1:
        return
    if model.moe is None:
        raise SpecError("options.expert_parallel", f"{model.slug} is not a mixture of experts")
    if ep != tp and tp != 1:
        raise SpecError(
            "options.expert_parallel",
            f"must equal tensor_parallel ({tp}) or run with tensor_parallel 1 "
            "(data-parallel attention)",
        )
    if model.moe.n_experts % ep:
        raise SpecError(
            "options.expert_parallel",
            f"{ep} does not divide {model.slug}'s {model.moe.n_experts} experts",
        )


@lru_cache(maxsize=64)
def shard_model(model: ModelSpec, tp: int, ep: int = 1) -> ModelSpec:
    """The shapes one of ``tp`` tensor-parallel devices computes (``model`` itself for 1).

    Heads, KV heads and the FFN width must divide evenly (SpecError naming the model's
    field otherwise); the vocabulary is padded up to a multiple of ``tp`` as vLLM pads it.
    A mixture of experts splits its experts' widths ``tp`` ways, or with ``ep`` > 1 keeps
    them whole and holds ``n_experts / ep`` of them (shared experts stay tensor-parallel).
    MLA's latent KV cache is not split: every tensor-parallel device keeps the whole latent
    (as vLLM's MLA backend does).
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise SpecError("devices.count", "the tensor-parallel degree must be an integer >= 1")
    check_expert_parallel(model, tp, ep)
    if tp == 1 and ep == 1:
        return model
    moe = model.moe
    if moe is not None:
        widths = ["shared_ffn_size"] + (["expert_ffn_size"] if ep == 1 else [])
        for name in widths:
            if getattr(moe, name) % tp:
                raise SpecError(
                    f"{model.slug}.moe.{name}",
                    f"{getattr(moe, name)} is not divisible by the tensor-parallel degree {tp}",
                )
        moe = replace(
            moe,
            expert_ffn_size=moe.expert_ffn_size // tp if ep == 1 else moe.expert_ffn_size,
            shared_ffn_size=moe.shared_ffn_size // tp,
            expert_parallel=ep,
            token_groups=ep // tp if ep > 1 else 1,
        )
    names = (
        ("n_heads", "n_kv_heads", "ffn_size")
        if moe is None or model.dense_ffn_layers
        else (
            "n_heads",
            "n_kv_heads",
        )
    )
    for name in names:
        if getattr(model, name) % tp:
            raise SpecError(
                f"{model.slug}.{name}",
                f"{getattr(model, name)} is not divisible by the tensor-parallel degree {tp}",
            )
    return replace(
        model,
        slug=f"{model.slug}/tp{tp}" + (f"ep{ep}" if ep > 1 else ""),
        name=f"{model.name} (1/{tp} shard" + (f", 1/{ep} of the experts)" if ep > 1 else ")"),
        n_heads=model.n_heads // tp,
        n_kv_heads=model.n_kv_heads // tp,
        ffn_size=model.ffn_size // tp if model.ffn_size % tp == 0 else model.ffn_size,
        vocab_size=-(-model.vocab_size // tp),
        moe=moe,
    )


@lru_cache(maxsize=64)
def stage_model(model: ModelSpec, tp: int, pp: int) -> ModelSpec:
    """The shapes one device of a pipeline stage computes: ``model`` sharded ``tp`` ways,
    cut to ``n_layers / pp`` layers (SpecError naming ``n_layers`` when ``pp`` does not
    divide it)."""
    shard = shard_model(model, tp)
    if pp == 1:
        return shard
    if model.n_layers % pp:
        raise SpecError(
            f"{model.slug}.n_layers",
            f"{model.n_layers} layers do not split into {pp} equal pipeline stages",
        )
    return replace(
        shard,
        slug=f"{shard.slug}/pp{pp}",
        name=f"{shard.name} (1/{pp} of the layers)",
        n_layers=model.n_layers // pp,
    )


class ParallelGroup(DeviceModel):
    """``tp × pp`` identical devices serving one model replica, seen as one device.

    Memory and weights are the group's totals (every device's capacity, all shards' weights
    once), the KV cache per token is the whole token's (every shard's heads of every
    layer), so a scheduler's KV pool ``(capacity × utilisation − weights) / KV per token``
    is the group's. A pass costs what one stage device's share costs (the devices of a
    stage run in lockstep) plus the collectives, through the pipeline's micro-batches when
    ``pp > 1``. Energy counts every device: busy ones at their cost model's draw, bubbles
    and collectives at its idle (waiting) power.

    ``link`` carries the collectives and the stage-to-stage sends; ``None`` is allowed only
    for a group that communicates nothing (``tp = pp = 1``) — or, for Neo's baselines,
    whose catalog GPUs carry no peer link, a group whose communication is not modelled
    (``free_without_link``).
    """

    def __init__(
        self,
        inner: DeviceModel,
        tp: int,
        pp: int = 1,
        *,
        micro_batches: int = 1,
        link: LinkSpec | None = None,
        algorithm: int | None = None,
        free_without_link: bool = False,
        ep: int = 1,
    ) -> None:
        # The group's devices are the inner model's: its family checked their parameters.
        self.device = inner.device
        self.runtime = inner.runtime
        self.device_params = inner.device_params
        if tp < 1 or pp < 1 or micro_batches < 1:
            raise SpecError("options", "parallel degrees and micro-batches must be at least 1")
        if ep < 1 or (ep > 1 and pp > 1):
            raise SpecError(
                "options.expert_parallel", "expert parallelism is modelled without pipeline stages"
            )
        if link is None and (tp > 1 or pp > 1 or ep > 1) and not free_without_link:
            raise SpecError("options.link", "a parallel group needs a link to communicate over")
        self.inner = inner
        self.tp = tp
        self.pp = pp
        self.ep = ep
        #: Devices of one pipeline stage: the tensor-parallel group, or the expert-parallel
        #: one when it is wider (data-parallel attention groups of ``tp`` devices).
        self.width = max(tp, ep)
        #: Attention groups of a stage (each serving its share of the sequences).
        self.attn_groups = self.width // tp
        # A tensor-parallel step is the shard's step plus collectives that depend on the
        # batch only, and its energy a positive multiple of the two, so the shard's
        # convexity in the cached tokens carries over. Data-parallel attention's
        # ceil(tokens / groups) and a pipeline's micro-batch schedule do not keep it.
        self.decode_convex_in_kv = inner.decode_convex_in_kv and pp == 1 and self.attn_groups == 1
        self.micro_batches = micro_batches
        self.link = link
        if algorithm is None:
            algorithm = int(inner.runtime.param("allreduce_algorithm", ALLREDUCE_RING))
        if algorithm not in ALLREDUCE_ALGORITHMS:
            raise SpecError(
                f"{inner.runtime.slug}.params.allreduce_algorithm",
                "must be one of "
                + ", ".join(f"{k} ({v})" for k, v in ALLREDUCE_ALGORITHMS.items()),
            )
        self.algorithm = algorithm
        self._comm_cache: dict[tuple[ModelSpec, int], float] = {}
        self._prefill_cache: dict[tuple[ModelSpec, tuple[int, ...]], tuple[PhaseCost, float]] = {}

    # --- shapes ----------------------------------------------------------------------------

    @property
    def group_size(self) -> int:
        """Devices in the group."""
        return self.width * self.pp

    def parallel_info(self) -> dict[str, Any] | None:
        """The layout a result shows: degrees, micro-batches, the link, the all-reduce
        algorithm and the pipeline's bubble fraction ``(pp − 1) / (m + pp − 1)``."""
        if self.group_size == 1:
            return None
        return {
            "tensor_parallel": self.tp,
            "pipeline_parallel": self.pp,
            "micro_batches": self.micro_batches,
            "link": None if self.link is None else (self.link.slug or str(self.link.kind)),
            "allreduce_algorithm": ALLREDUCE_ALGORITHMS[self.algorithm],
            "bubble_fraction": self.bubble_fraction(),
            **({"expert_parallel": self.ep} if self.ep > 1 else {}),
        }

    def _shard(self, model: ModelSpec) -> ModelSpec:
        return shard_model(model, self.tp, self.ep)

    def _stage(self, model: ModelSpec) -> ModelSpec:
        return stage_model(model, self.tp, self.pp)

    # --- communication ---------------------------------------------------------------------

    def stage_comm_s(self, model: ModelSpec, tokens: int) -> float:
        """Seconds one stage device spends communicating for ``tokens`` tokens of one
        micro-batch: its layers' two all-reduces each, plus the send to the next stage."""
        if tokens <= 0 or self.link is None:
            return 0.0
        key = (model, tokens)
        hit = self._comm_cache.get(key)
        if hit is not None:
            return hit
        nbytes = allreduce_bytes(model, tokens)
        layers = model.n_layers // self.pp
        if self.attn_groups == 1:
            ar = allreduce_s(self.link, self.tp, nbytes, self.algorithm)
            t = layers * ALLREDUCES_PER_LAYER * ar
        else:
            # data-parallel attention (tp 1): each MoE layer dispatches and combines its
            # tokens over the expert-parallel group; dense layers communicate nothing
            a2a = all_to_all_s(self.link, self.ep, all_to_all_bytes(model, tokens, self.ep))
            t = model.moe_layers * 2 * a2a
        if self.pp > 1:
            t += self.link.transfer_s(nbytes)
        if len(self._comm_cache) >= 65536:
            self._comm_cache.clear()
        self._comm_cache[key] = t
        return t

    def _micro(self, n: int) -> int:
        """Micro-batches a pass of ``n`` sequences is cut into (at most one per sequence)."""
        return max(1, min(self.micro_batches, n)) if self.pp > 1 else 1

    def bubble_fraction(self, micro_batches: int | None = None) -> float:
        """``(pp − 1) / (m + pp − 1)``: the share of a pass the pipeline's devices wait."""
        m = self.micro_batches if micro_batches is None else micro_batches
        return (self.pp - 1) / (m + self.pp - 1)

    # --- costs -----------------------------------------------------------------------------

    def _pipeline(self, stages: Sequence[tuple[PhaseCost, float]]) -> PhaseCost:
        """The pass of micro-batches ``stages`` (each: one stage device's cost and its
        communication seconds) through the pipeline, for the whole group."""
        times = [c.seconds + comm for c, comm in stages]
        longest = max(times)
        seconds = sum(times) + (self.pp - 1) * longest
        wait_w = self.inner.idle_power_w
        n = self.group_size
        busy_j = sum(c.joules + comm * wait_w for c, comm in stages)
        bubble_j = (seconds - sum(times)) * wait_w
        flops = sum(c.flops for c, _ in stages)
        nbytes = sum(c.bytes for c, _ in stages)
        return PhaseCost(seconds, n * (busy_j + bubble_j), n * flops, n * nbytes)

    def _prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> tuple[PhaseCost, float]:
        key = (model, tuple(seq_lens))
        hit = self._prefill_cache.get(key)
        if hit is not None:
            return hit
        stage = self._stage(model)
        m = self._micro(len(seq_lens))
        # Contiguous micro-batches of (nearly) equal numbers of prompts.
        bounds = [round(i * len(seq_lens) / m) for i in range(m + 1)]
        parts = [list(seq_lens[bounds[i] : bounds[i + 1]]) for i in range(m)]
        stages = [
            (self.inner.prefill(stage, part), self.stage_comm_s(model, sum(part))) for part in parts
        ]
        out = (self._pipeline(stages), sum(comm for _, comm in stages))
        if len(self._prefill_cache) >= 65536:
            self._prefill_cache.clear()
        self._prefill_cache[key] = out
        return out

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """The prompts through the group: one stage device's share of each micro-batch plus
        its collectives, through the pipeline."""
        if self.attn_groups > 1:
            # the prompts split over the attention groups; the one with most tokens sets it
            g = min(self.attn_groups, len(seq_lens))
            bounds = [round(i * len(seq_lens) / g) for i in range(g + 1)]
            parts = [list(seq_lens[bounds[i] : bounds[i + 1]]) for i in range(g)]
            part = max(parts, key=sum)
            c = self.inner.prefill(self._shard(model), part)
            return _scaled(c, self.width, self.stage_comm_s(model, sum(part)), self.inner)
        if self.pp == 1:
            # Kept as the tensor-parallel-only arithmetic (Neo's baselines are recorded so).
            c = self.inner.prefill(self._shard(model), seq_lens)
            return _scaled(c, self.tp, self.stage_comm_s(model, sum(seq_lens)), self.inner)
        return self._prefill(model, seq_lens)[0]

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One decode iteration through the group (equal micro-batches of ``⌈batch / m⌉``
        sequences over ``⌈kv_tokens / m⌉`` cached tokens each; with data-parallel attention
        each attention group the same share)."""
        if self.attn_groups > 1:
            g = self.attn_groups
            mb = -(-batch // g)
            c = self.inner.decode_step(self._shard(model), mb, -(-kv_tokens // g))
            return _scaled(c, self.width, self.stage_comm_s(model, mb), self.inner)
        if self.pp == 1:
            c = self.inner.decode_step(self._shard(model), batch, kv_tokens)
            return _scaled(c, self.tp, self.stage_comm_s(model, batch), self.inner)
        m = self._micro(batch)
        mb = -(-batch // m)
        c = self.inner.decode_step(self._stage(model), mb, -(-kv_tokens // m))
        comm = self.stage_comm_s(model, mb)
        return self._pipeline([(c, comm)] * m)

    def decode_steps(
        self, model: ModelSpec, batch: int, kv_tokens: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`decode_step` at every element of ``kv_tokens``. A tensor-parallel group
        hands the whole array to its shard's model (a family with array arithmetic answers
        it at once) and adds the collectives, which depend on the batch only, with the same
        float operations as :func:`_scaled`, so every value equals the scalar call's. A
        pipeline group steps element by element (the default)."""
        if self.pp != 1:
            return super().decode_steps(model, batch, kv_tokens)
        if self.attn_groups > 1:
            # data-parallel attention: each group's share, as decode_step takes it
            g = self.attn_groups
            mb = -(-batch // g)
            kv = -(-np.asarray(kv_tokens, dtype=np.int64) // g)
            seconds, joules = self.inner.decode_steps(self._shard(model), mb, kv)
            extra_s = self.stage_comm_s(model, mb)
            return seconds + extra_s, self.width * (joules + extra_s * self.inner.idle_power_w)
        seconds, joules = self.inner.decode_steps(self._shard(model), batch, kv_tokens)
        extra_s = self.stage_comm_s(model, batch)
        return seconds + extra_s, self.tp * (joules + extra_s * self.inner.idle_power_w)

    def chunked_step(
        self,
        model: ModelSpec,
        batch: int,
        kv_tokens: int,
        chunks: Sequence[tuple[int, int]],
    ) -> PhaseCost:
        """A chunked-prefill iteration through a tensor-parallel group: one shard's mixed
        pass plus the all-reduces of all its tokens (as :meth:`prefill`). Pipeline groups
        refuse it: how vLLM schedules chunks across micro-batches is not modelled."""
        if self.pp != 1:
            raise SpecError(
                "options.chunked_prefill",
                "chunked prefill is modelled for tensor parallelism, not pipeline_parallel > 1",
            )
        if self.attn_groups > 1:
            raise SpecError(
                "options.chunked_prefill",
                "chunked prefill is not modelled with data-parallel attention "
                "(expert_parallel > tensor_parallel)",
            )
        c = self.inner.chunked_step(self._shard(model), batch, kv_tokens, chunks)
        tokens = batch + sum(n for n, _ in chunks)
        return _scaled(c, self.tp, self.stage_comm_s(model, tokens), self.inner)

    def with_shared_kv(self) -> DeviceModel:
        """This group over its device model's :meth:`~DeviceModel.with_shared_kv` twin."""
        twin = copy.copy(self)
        twin.inner = self.inner.with_shared_kv()
        return twin

    def collective_prefill_s(self, model: ModelSpec, seq_lens: Sequence[int]) -> float:
        """Seconds each device of the group communicates during the prefill ``seq_lens``."""
        if self.pp == 1:
            return self.stage_comm_s(model, sum(seq_lens))
        return self._prefill(model, seq_lens)[1]

    def collective_decode_s(self, model: ModelSpec, batch: int) -> float:
        """Seconds each device of the group communicates during one decode step of
        ``batch`` sequences (the same at every context length)."""
        if self.attn_groups > 1:
            return self.stage_comm_s(model, -(-batch // self.attn_groups))
        m = self._micro(batch)
        return m * self.stage_comm_s(model, -(-batch // m))

    def weights_bytes(self, model: ModelSpec) -> float:
        """All shards' weights (``tp`` × one device's share of every layer): the model's
        weights once, whatever the pipeline split."""
        return self.width * self.inner.weights_bytes(self._shard(model))

    def device_weights_bytes(self, model: ModelSpec) -> float:
        """The weights the most loaded device holds: its shard of a stage's layers plus the
        embedding and the LM head (an upper bound for every stage)."""
        return self.inner.weights_bytes(self._stage(model) if self.ep == 1 else self._shard(model))

    def kv_bytes_per_token(self, model: ModelSpec) -> float:
        """A whole token's KV cache (spread over the shards and stages; with data-parallel
        attention a token lives in one attention group)."""
        return self.tp * self.inner.kv_bytes_per_token(self._shard(model))

    @property
    def memory_capacity_bytes(self) -> float:
        """The group's memory."""
        return self.group_size * self.inner.memory_capacity_bytes

    @property
    def idle_power_w(self) -> float:
        """The group's idle power."""
        return self.group_size * self.inner.idle_power_w

    def peak_ops_per_s(self) -> float:
        """The group's peak (every device's)."""
        return self.group_size * self.inner.peak_ops_per_s()

    def compute_rate_bound(self) -> float | None:
        """The group's rate: its devices compute their shares in lockstep."""
        inner = self.inner.compute_rate_bound()
        return None if inner is None else inner * self.group_size

    def floor_power_w(self) -> float:
        """One device's floor: a valid floor for the group, though ``tp × pp`` times it
        would be tighter (every device draws at least its own floor)."""
        return self.inner.floor_power_w()

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """Each device streams its shard's weights and KV in lockstep: one device's floor
        for its tensor-parallel shard (a pipeline only adds stages after it)."""
        return self.inner.decode_stream_floor(self._shard(model))


def _scaled(c: PhaseCost, tp: int, extra_s: float, inner: DeviceModel) -> PhaseCost:
    """One shard's cost ``c`` plus ``extra_s`` of collectives, for the ``tp`` devices."""
    joules = tp * (c.joules + extra_s * inner.idle_power_w)
    return PhaseCost(c.seconds + extra_s, joules, tp * c.flops, tp * c.bytes)
