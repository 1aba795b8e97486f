"""GLITCHES (Yang et al.): GPU–FPGA collaborative LLM inference — GPUs prefill, FPGAs
decode, the KV cache streamed over PCIe.

Modules: :mod:`.policy` (the ``glitches`` policy: the disaggregated family's scheduler
configured with GLITCHES' rules), :mod:`.screen` (the capacity planner's bounds on its
systems), :mod:`.reproduction` (Tables I–II, Figs. 7–9 against ``targets.toml``),
:mod:`.calibration` (the GPU and FPGA runtime profiles fitted to Table I and Fig. 9).
"""

from simulations.core.policies.base import register_paper

from .policy import GlitchesPolicy, kv_transfer_seconds

PAPER = register_paper("glitches", "GLITCHES — GPU prefill, FPGA decode", __name__)

__all__ = ["GlitchesPolicy", "kv_transfer_seconds"]
