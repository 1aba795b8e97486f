"""Tensor parallelism across the GPUs of one node (Neo §4 "Multi-GPU inference").

Neo shards the model like vLLM (Megatron-style): attention heads and KV heads are split
across the ``tp`` GPUs (column-parallel QKV, row-parallel output projection), the FFN's
intermediate width likewise (column-parallel gate/up, row-parallel down), the embedding and
the LM head along the vocabulary; norms are replicated. Each GPU therefore holds ``1/tp`` of
the GEMM weights and of every token's KV cache (its KV heads), and each layer ends its
attention block and its FFN with an all-reduce of the layer's activations. §4: "each Ray
actor also has its partition of CPU KV cache, each responsible for a portion of KV heads".

:func:`shard_model` gives the per-GPU shapes as a :class:`ModelSpec`, so the operator graph
and every device model cost one GPU's share without knowing about parallelism;
:class:`TensorParallelGpu` wraps a GPU cost model into the cost model of the whole group
(used by the ``gpu-only`` baseline, whose engine sees one unit per group).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor
from simulations.core.devices.gpu import GpuModel
from simulations.core.errors import SpecError
from simulations.core.spec import DeviceSpec, ModelSpec


@lru_cache(maxsize=64)
def shard_model(model: ModelSpec, tp: int) -> ModelSpec:
    """The shapes one of ``tp`` tensor-parallel GPUs computes (``model`` itself for 1).

    Heads, KV heads and the FFN width must divide evenly (SpecError naming the field
    otherwise); the vocabulary is padded up to a multiple of ``tp`` as vLLM pads it.
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise SpecError("devices.count", "the tensor-parallel degree must be an integer >= 1")
    if tp == 1:
        return model
    for name in ("n_heads", "n_kv_heads", "ffn_size"):
        if getattr(model, name) % tp:
            raise SpecError(
                f"{model.slug}.{name}",
                f"{getattr(model, name)} is not divisible by the tensor-parallel degree {tp}",
            )
    return replace(
        model,
        slug=f"{model.slug}/tp{tp}",
        name=f"{model.name} (1/{tp} shard)",
        n_heads=model.n_heads // tp,
        n_kv_heads=model.n_kv_heads // tp,
        ffn_size=model.ffn_size // tp,
        vocab_size=-(-model.vocab_size // tp),
    )


def allreduce_layer_s(device: DeviceSpec, model: ModelSpec, tp: int, tokens: int) -> float:
    """Seconds of one layer's two all-reduces of ``tokens`` activations across ``tp`` GPUs.

    Ring all-reduce moves ``2 (tp − 1) / tp`` of the tensor over each GPU's peer link. A
    device record without a ``peer_link`` (the catalog has no NVLink figure for the H100
    yet) costs nothing: the deviation is stated where TP is used.
    """
    if tp <= 1 or device.peer_link is None or tokens <= 0:
        return 0.0
    nbytes = tokens * model.hidden_size * 2.0  # FP16 activations
    per_reduce = device.peer_link.transfer_s(2.0 * (tp - 1) / tp * nbytes)
    return 2.0 * per_reduce


class TensorParallelGpu(DeviceModel):
    """A group of ``tp`` identical GPUs serving one model shard each, seen as one device.

    Memory and weights are the group's totals (``tp`` × one GPU's capacity, all shards'
    weights), the KV cache per token is the whole token's (every shard's heads), so a
    scheduler's KV pool ``(capacity × utilisation − weights) / KV per token`` is the same as
    one GPU's pool of its shard. A pass costs what one GPU's shard costs (the GPUs run in
    lockstep) plus the per-layer all-reduces. Energy counts every GPU of the group.
    """

    params = GpuModel.params  # the group's devices are GPUs

    def __init__(self, inner: DeviceModel, tp: int) -> None:
        super().__init__(inner.device, inner.runtime)
        self.inner = inner
        self.tp = tp

    def _shard(self, model: ModelSpec) -> ModelSpec:
        return shard_model(model, self.tp)

    def _comm(self, model: ModelSpec, tokens: int) -> float:
        return model.n_layers * allreduce_layer_s(self.device, model, self.tp, tokens)

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """One shard's prefill plus the all-reduces of the packed tokens."""
        c = self.inner.prefill(self._shard(model), seq_lens)
        extra = self._comm(model, sum(seq_lens))
        return _scaled(c, self.tp, extra, self.inner.idle_power_w)

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One shard's decode step plus the all-reduces of the batch's tokens."""
        c = self.inner.decode_step(self._shard(model), batch, kv_tokens)
        extra = self._comm(model, batch)
        return _scaled(c, self.tp, extra, self.inner.idle_power_w)

    def weights_bytes(self, model: ModelSpec) -> float:
        """All shards' weights (``tp`` × one GPU's share)."""
        return self.tp * self.inner.weights_bytes(self._shard(model))

    def kv_bytes_per_token(self, model: ModelSpec) -> float:
        """A whole token's KV cache (spread over the shards)."""
        return self.tp * self.inner.kv_bytes_per_token(self._shard(model))

    @property
    def memory_capacity_bytes(self) -> float:
        """The group's memory."""
        return self.tp * self.inner.memory_capacity_bytes

    @property
    def idle_power_w(self) -> float:
        """The group's idle power."""
        return self.tp * self.inner.idle_power_w

    def compute_rate_bound(self) -> float | None:
        """The group's rate: its GPUs compute their shards in lockstep."""
        inner = self.inner.compute_rate_bound()
        return None if inner is None else inner * self.tp

    def floor_power_w(self) -> float:
        """One GPU's floor: a valid floor for the group, though ``tp`` times it would be
        tighter (every GPU of the group draws at least its own floor)."""
        return self.inner.floor_power_w()

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """Each GPU streams its shard's weights and KV in lockstep: one GPU's floor for its
        shard."""
        return self.inner.decode_stream_floor(self._shard(model))


def _scaled(c: PhaseCost, tp: int, extra_s: float, wait_w: float) -> PhaseCost:
    joules = tp * (c.joules + extra_s * wait_w)
    return PhaseCost(c.seconds + extra_s, joules, tp * c.flops, tp * c.bytes)
