"""Tensor parallelism across the GPUs of one node (Neo §4 "Multi-GPU inference").

Neo shards the model like vLLM (Megatron-style); the sharding, the collectives and the
group's cost model are the core's (:mod:`simulations.core.devices.parallel`), shared with
the ``homogeneous`` policy's ``tensor_parallel`` option. §4: "each Ray actor also has its
partition of CPU KV cache, each responsible for a portion of KV heads".

Neo's GPUs communicate over the system's ``link`` option (a catalog interconnect), else
their device record's ``peer_link`` (only the TPUs carry one); without either
the all-reduces cost nothing — the deviation Neo's policies state where TP is used.
"""

from __future__ import annotations

from simulations.core.devices.base import DeviceModel
from simulations.core.devices.parallel import (
    ALLREDUCES_PER_LAYER,
    ParallelGroup,
    allreduce_bytes,
    ring_allreduce_s,
    shard_model,
)
from simulations.core.spec import DeviceSpec, LinkSpec, ModelSpec

__all__ = ["TensorParallelGpu", "allreduce_layer_s", "shard_model"]


def allreduce_layer_s(
    device: DeviceSpec, model: ModelSpec, tp: int, tokens: int, link: LinkSpec | None = None
) -> float:
    """Seconds of one layer's two ring all-reduces of ``tokens`` activations across ``tp``
    GPUs over ``link`` (the system's ``link`` option), else the device's ``peer_link`` (0
    without either)."""
    link = link if link is not None else device.peer_link
    if tp <= 1 or link is None or tokens <= 0:
        return 0.0
    nbytes = allreduce_bytes(model, tokens)
    return ALLREDUCES_PER_LAYER * ring_allreduce_s(link, tp, nbytes)


class TensorParallelGpu(ParallelGroup):
    """A group of ``tp`` identical GPUs serving one model shard each, seen as one device
    (the core's :class:`~simulations.core.devices.parallel.ParallelGroup` without a
    pipeline, over ``link``, else the device's ``peer_link``)."""

    def __init__(self, inner: DeviceModel, tp: int, link: LinkSpec | None = None) -> None:
        link = link if link is not None else inner.device.peer_link
        super().__init__(inner, tp, link=link, free_without_link=True)
