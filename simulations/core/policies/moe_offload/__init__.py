"""Expert offloading for mixture-of-experts models: the GPU keeps attention, the shared
experts and the hottest routed experts; the rest live in host memory and are computed by
the host CPU or streamed to the GPU over PCIe, chosen per layer. Not a paper of its own
(the placement question of Fiddler, kTransformers and MoE-Lightning, costed with Neo's host
CPU model).

Modules: :mod:`.offload` (the cost of one offloading GPU), :mod:`.policy` (the
``moe-offload`` policy).
"""

from .policy import MoeOffloadPolicy

__all__ = ["MoeOffloadPolicy"]
