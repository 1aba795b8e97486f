"""Neo (Jiang et al.): GPU + host-CPU attention offloading for online LLM serving.

- :mod:`.tp` — tensor-parallel shards of a model across the GPUs of one node (§4);
- :mod:`.costs` — exact stage times of an iteration from the core's device models, and the
  interpolated profile table the scheduler estimates them from (§3.2);
- :mod:`.scheduler` — the six-step load-aware scheduler (§3.2);
- :mod:`.sim` — the iteration-level engine with the GPU and CPU KV caches and asymmetric
  pipelining (§3.1, Fig. 5);
- :mod:`.policy` — the registered policies ``neo``, ``gpu-only`` and ``fastdecode+``;
- :mod:`.screen` — the capacity planner's bounds on their nodes;
- :mod:`.reproduction` — Figs. 6, 8, 9 and 10a against ``targets.toml``;
- :mod:`.calibration` — checks of the CPU attention stack and the host CPUs (nothing fitted).
"""

from simulations.core.policies.base import register_paper

from .policy import FastDecodePlusPolicy, GpuOnlyPolicy, NeoPolicy
from .scheduler import Schedule
from .sim import NeoSim

PAPER = register_paper("neo", "Neo — GPU with host-CPU attention offload", __name__)

__all__ = ["FastDecodePlusPolicy", "GpuOnlyPolicy", "NeoPolicy", "NeoSim", "Schedule"]
