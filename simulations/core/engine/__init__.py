"""Request-level serving engine: requests, units, fast-forwarded decode runs, schedulers.

- :mod:`.requests` draws a workload's requests (identical for every system of a scenario);
- :mod:`.curve` fast-forwards runs of identical decode iterations;
- :mod:`.core` holds the event loop, device units, links and timelines;
- :mod:`.batching` is continuous batching with a paged KV cache (and batch-1 FCFS).

Policies (``simulations.core.policies``) build units from a system and run a scheduler.
"""

from .batching import BatchingSim
from .core import (
    DECODE,
    IDLE,
    PREFILL,
    TRANSFER,
    SimOutput,
    Simulator,
    Timeline,
    Unit,
    UnitReport,
    build_units,
)
from .curve import DecodeCurve
from .requests import RequestSet, generate_requests

__all__ = [
    "DECODE",
    "IDLE",
    "PREFILL",
    "TRANSFER",
    "BatchingSim",
    "DecodeCurve",
    "RequestSet",
    "SimOutput",
    "Simulator",
    "Timeline",
    "Unit",
    "UnitReport",
    "build_units",
    "generate_requests",
]
