"""Neo (papers/neo.md): GPU + host-CPU attention offloading for online LLM serving.

- :mod:`.tp` — tensor-parallel shards of a model across the GPUs of one node (§4);
- :mod:`.costs` — exact stage times of an iteration from the core's device models, and the
  interpolated profile table the scheduler estimates them from (§3.2);
- :mod:`.scheduler` — the six-step load-aware scheduler (§3.2);
- :mod:`.sim` — the iteration-level engine with the GPU and CPU KV caches and asymmetric
  pipelining (§3.1, Fig. 5);
- :mod:`.policy` — the registered policies ``neo``, ``gpu-only`` and ``fastdecode+``.
"""

from .policy import FastDecodePlusPolicy, GpuOnlyPolicy, NeoPolicy
from .scheduler import Schedule
from .sim import NeoSim

__all__ = ["FastDecodePlusPolicy", "GpuOnlyPolicy", "NeoPolicy", "NeoSim", "Schedule"]
