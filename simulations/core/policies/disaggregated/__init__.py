"""Disaggregated serving: a prefill pool and a decode pool of any devices, the KV cache
moved between them over a link (GLITCHES §III generalised as Splitwise and DistServe do).

Modules: :mod:`.policy` (the ``disaggregated`` policy and its system layout, nodes
included), :mod:`.sim` (the event-level scheduler), :mod:`.transfer` (the layer-wise KV
transfer over a path of link hops).
"""

from .policy import DisaggregatedPolicy
from .sim import DisaggSim
from .transfer import flow_finish

__all__ = ["DisaggSim", "DisaggregatedPolicy", "flow_finish"]
