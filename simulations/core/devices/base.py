"""The interface every device cost model implements.

A device model turns a phase of work on one device (a prefill of some prompts, one decode
iteration of a batch) into seconds and joules, from the operator graph (:mod:`..graph`),
the device's datasheet spec and the runtime profile of the stack that runs on it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from simulations.core.errors import CapacityError
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile


@dataclass(frozen=True, slots=True)
class PhaseCost:
    """Cost of one phase on one device.

    ``flops`` and ``bytes`` are the work done (for rooflines and utilisation);
    ``joules`` is the device's energy over ``seconds``.
    """

    seconds: float
    joules: float
    flops: float
    bytes: float

    @property
    def avg_power_w(self) -> float:
        """Average power over the phase."""
        return self.joules / self.seconds if self.seconds > 0 else 0.0


class DeviceModel(ABC):
    """Cost model of one device running one software stack (one instance per pair).

    Subclasses cite the paper section they implement. Implementations cache what depends
    only on shapes, so the engine can call them on every scheduling event.
    """

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        self.device = device
        self.runtime = runtime

    @abstractmethod
    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """Cost of prefilling the prompts ``seq_lens`` together (one forward pass)."""

    @abstractmethod
    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """Cost of one decode iteration: ``batch`` sequences, ``kv_tokens`` cached tokens in
        total across the batch (before this step's token is appended)."""

    @abstractmethod
    def weights_bytes(self, model: ModelSpec) -> float:
        """Bytes of weights this stack keeps in device memory for ``model``."""

    def kv_bytes_per_token(self, model: ModelSpec) -> float:
        """Bytes of KV cache per token at this stack's KV precision."""
        return model.kv_bytes_per_token(self.runtime.kv_bits)

    @property
    def memory_capacity_bytes(self) -> float:
        """Usable device memory in bytes."""
        return self.device.memory_capacity_bytes

    def check_fits(
        self, model: ModelSpec, kv_tokens: int = 0, *, workspace_bytes: float = 0.0
    ) -> None:
        """Raise CapacityError when weights plus ``kv_tokens`` of KV cache (plus a pass's
        ``workspace_bytes``) exceed memory."""
        need = (
            self.weights_bytes(model) + kv_tokens * self.kv_bytes_per_token(model) + workspace_bytes
        )
        cap = self.memory_capacity_bytes
        if need > cap:
            parts = "weights + KV cache" + (" + workspace" if workspace_bytes else "")
            raise CapacityError(
                f"{self.device.slug}.memory[0].capacity_gb",
                f"{model.slug} needs {need / 1e9:.2f} GB ({parts}) but the "
                f"memory holds {cap / 1e9:.2f} GB",
            )

    @property
    def idle_power_w(self) -> float:
        """Power drawn while the device waits."""
        return self.device.idle_w
