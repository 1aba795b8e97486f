"""GLITCHES (Yang et al.): GPU–FPGA collaborative LLM inference — GPUs prefill, FPGAs
decode, the KV cache streamed over PCIe.

Modules: :mod:`.policy` (the ``glitches`` policy and its event-level scheduler),
:mod:`.screen` (the capacity planner's bounds on its systems).
"""

from .policy import GlitchesPolicy, GlitchesSim, kv_transfer_seconds

__all__ = ["GlitchesPolicy", "GlitchesSim", "kv_transfer_seconds"]
