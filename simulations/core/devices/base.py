"""The interface every device cost model implements.

A device model turns a phase of work on one device (a prefill of some prompts, one decode
iteration of a batch) into seconds and joules, from the operator graph (:mod:`..graph`),
the device's datasheet spec and the runtime profile of the stack that runs on it. One
class per device kind (a *device family*, see ``docs/architecture.md``): it declares the
kind-specific parameters its devices carry (:attr:`DeviceModel.params`), the settings a
policy may choose per run (:attr:`DeviceModel.settings`), and answers the capacity
planner's questions about the device (:meth:`DeviceModel.compute_rate_bound`,
:meth:`DeviceModel.floor_power_w`, :meth:`DeviceModel.decode_stream_floor`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from simulations.core.errors import CapacityError, SpecError
from simulations.core.options import OptionSpec, resolve
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile

#: Bytes of one sampled token index sent from the host to a device (int32).
TOKEN_BYTES = 4
#: Bytes per logit a device sends to the host for sampling (FP16 logits).
LOGIT_BYTES = 2


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


@dataclass(frozen=True, slots=True)
class StreamFloor:
    """What every batched decode step must stream from memory at least: the weights the
    batch shares (bytes, once per step), each cached token's KV (bytes per token read),
    both at ``bw_bytes_per_s``."""

    shared_weight_bytes: float
    kv_bytes_per_token: float
    bw_bytes_per_s: float


class DeviceModel(ABC):
    """Cost model of one device running one software stack (one instance per pair).

    Subclasses cite the paper section they implement. Implementations cache what depends
    only on shapes, so the engine can call them on every scheduling event.

    ``params`` declares the kind-specific facts a device record of this family carries in
    its ``params`` mapping (units, bounds, whether required); the catalog checks records
    against it and the API and pages render it. The resolved values (defaults filled in)
    are :attr:`device_params`. ``settings`` declares what a policy may choose per run
    (:meth:`with_settings`), e.g. an FPGA's data-prefetch ratio.

    The capacity planner's screen asks every device model three questions. They are
    abstract so that a new family answers them deliberately: answering ``None`` (no
    compute floor, no streaming floor) or ``0.0`` (no power floor) is always safe — the
    screen stays optimistic — but rules fewer configurations out, so a family that can
    bound its work should say so.
    """

    params: ClassVar[tuple[OptionSpec, ...]] = ()
    settings: ClassVar[tuple[OptionSpec, ...]] = ()
    #: Whether :meth:`decode_step`'s seconds are convex in ``kv_tokens`` for every batch (a
    #: constant plus maxima of affine terms), which lets the engine verify its decode
    #: curve's pieces at their ends only. A family that is not sure keeps False; a wrapper
    #: (a parallel group) sets it per instance from what it wraps.
    decode_convex_in_kv: bool = False
    #: Whether one device's roofline (:mod:`simulations.core.roofline`: its dense peak at
    #: the stack's precisions against its memory bandwidth) describes the family's devices.
    #: A family whose compute sits in several chips beside separate memories keeps False.
    single_device_roofline: ClassVar[bool] = True
    #: The most sequences one pass of the family's design can hold (``None``: as many as
    #: memory allows). A design that decodes one request at a time says 1, and a scheduler
    #: that batches caps its batches there instead of asking the device's kind.
    max_sequences_per_pass: ClassVar[int | None] = None
    #: Whether a group of the family's devices can serve one model replica together by
    #: tensor, pipeline or expert parallelism (:class:`~.parallel.ParallelGroup`): the cost
    #: the family gives a shard of the model (:func:`~.parallel.shard_model`,
    #: :func:`~.parallel.stage_model`) is one device's share of the work, and its devices
    #: exchange activations over a link. A family whose sharding nobody has modelled (a
    #: design built around one whole model, a host CPU) keeps False, and policies refuse
    #: parallel degrees above 1 on its devices.
    model_parallel: ClassVar[bool] = False
    #: Whether the family costs its passes with the kernel-class model
    #: (:mod:`.gpu_kernels`) whose stack parameters the calibration
    #: (``simulations.core.calibration.fit``) fits to measured kernel and end-to-end times:
    #: the calibration takes devices and stacks of such families only.
    kernel_calibration: ClassVar[bool] = False

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        self.device = device
        self.runtime = runtime
        self.device_params: dict[str, Any] = resolve_params(type(self), device)

    @abstractmethod
    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """Cost of prefilling the prompts ``seq_lens`` together (one forward pass)."""

    @abstractmethod
    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """Cost of one decode iteration: ``batch`` sequences, ``kv_tokens`` cached tokens in
        total across the batch (before this step's token is appended)."""

    def decode_steps(
        self, model: ModelSpec, batch: int, kv_tokens: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Seconds and joules of :meth:`decode_step` at each of ``kv_tokens`` (an int64
        array), as float64 arrays equal to the scalar calls element by element.

        The engine asks for many steps of one batch size at once while it learns a decode
        curve; this default calls :meth:`decode_step` per element. A family whose step is
        plain arithmetic over the cached tokens overrides it with array arithmetic in the
        same order of operations (so every value stays bit-identical).
        """
        costs = [self.decode_step(model, batch, int(k)) for k in kv_tokens]
        return (
            np.array([c.seconds for c in costs], dtype=np.float64),
            np.array([c.joules for c in costs], dtype=np.float64),
        )

    def with_shared_kv(self) -> DeviceModel:
        """This model for a scheduler whose sequences share KV blocks (prefix caching): a
        family whose capacity checks count each step's cached tokens returns a twin that
        leaves the KV cache to the scheduler's pool. The default is the model itself."""
        return self

    def chunked_step(
        self,
        model: ModelSpec,
        batch: int,
        kv_tokens: int,
        chunks: Sequence[tuple[int, int]],
    ) -> PhaseCost:
        """Cost of one chunked-prefill iteration (Sarathi-Serve, vLLM's default scheduler):
        ``batch`` sequences decode one token each over ``kv_tokens`` cached tokens in total
        while the prompt chunks ``(tokens, cached before)`` are prefilled in the same pass.

        A family that cannot cost such a mixed pass keeps this default, which refuses it:
        a system with ``chunked_prefill`` on such devices is rejected naming the option.
        """
        raise SpecError(
            "options.chunked_prefill",
            f"{self.device.kind} devices ({self.device.slug}) cannot run chunked prefill: "
            "their cost model has no mixed decode-and-prefill iteration",
        )

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

    @property
    def group_size(self) -> int:
        """Devices this model stands for: 1, or a parallel group's ``tp × pp``
        (:class:`~.parallel.ParallelGroup`)."""
        return 1

    def parallel_info(self) -> dict[str, Any] | None:
        """What a result shows of a parallel group's layout (None for one device)."""
        return None

    def collective_prefill_s(self, model: ModelSpec, seq_lens: Sequence[int]) -> float:
        """Seconds each device spends in collectives during the prefill of ``seq_lens`` (0:
        a single device communicates nothing)."""
        return 0.0

    def collective_decode_s(self, model: ModelSpec, batch: int) -> float:
        """Seconds each device spends in collectives during one decode step of ``batch``
        sequences (0: a single device communicates nothing)."""
        return 0.0

    def peak_ops_per_s(self) -> float:
        """The roof the stack's compute is charted against (OP/s): the device's dense peak
        at the stack's precisions. A family whose stack runs a design below the chip's peak
        (an FPGA's accelerator design) returns that design's peak."""
        return self.device.peak_ops_per_s(
            self.runtime.act_bits, self.runtime.weight_bits, fp8=self.runtime.fp8
        )

    def host_sampling_s(self, model: ModelSpec) -> float:
        """Seconds each decode step spends outside the device for sampling: 0 for a device
        that samples its own tokens (the default); a device that sends its logits to the
        host and gets the sampled token back (GLITCHES §III: the FPGA) returns that round
        trip (:func:`host_round_trip_s`)."""
        return 0.0

    def with_settings(self, values: Mapping[str, Any]) -> DeviceModel:
        """This device and stack with the run-time ``values`` applied (e.g. an FPGA's
        ``prefetch_ratio``). Only the settings this family declares are read: a policy
        option that concerns other kinds (a prefetch ratio on a GPU) leaves the model as
        it is. Families with settings override :meth:`_with_settings`."""
        mine = {s.name: values[s.name] for s in self.settings if s.name in values}
        if not mine:
            return self
        return self._with_settings(
            resolve(self.settings, mine, "options", f"{self.device.kind} devices")
        )

    def _with_settings(self, values: dict[str, Any]) -> DeviceModel:
        raise SpecError("options", f"{type(self).__name__} declares settings it does not apply")

    # --- what the capacity planner asks ------------------------------------------------------

    @abstractmethod
    def compute_rate_bound(self) -> float | None:
        """An achieved compute rate (OP/s) no operator of this stack exceeds, so that its
        FLOPs over this rate bound its time from below; ``None`` when the model does not
        bound operators by compute."""

    @abstractmethod
    def floor_power_w(self) -> float:
        """The lowest power the device draws, busy or idle (W); 0.0 when not bounded."""

    @abstractmethod
    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """What every batched decode step of ``model`` streams at least (see
        :class:`StreamFloor`); ``None`` when the model does not bound decode by memory
        traffic."""


def check_params(runtime: RuntimeProfile, allowed: Iterable[str]) -> None:
    """Raise SpecError naming the first ``runtime.params`` key the model does not read."""
    known = set(allowed)
    for key in runtime.params:
        if key not in known:
            raise SpecError(
                f"{runtime.slug}.params.{key}",
                f"unknown runtime parameter (known: {', '.join(sorted(known))})",
            )


def frac_param(runtime: RuntimeProfile, key: str, default: float) -> float:
    """A runtime parameter that must be a fraction in [0, 1]."""
    v = runtime.param(key, default)
    if not 0.0 <= v <= 1.0:
        raise SpecError(f"{runtime.slug}.params.{key}", "must be a fraction in [0, 1]")
    return v


def check_capacity(device: DeviceSpec, needed_bytes: float, what: str) -> None:
    """Raise CapacityError naming the device's memory when ``needed_bytes`` do not fit."""
    cap = device.memory_capacity_bytes
    if needed_bytes > cap:
        raise CapacityError(
            f"{device.slug}.memory[0].capacity_gb",
            f"{what} needs {needed_bytes / 1e9:.2f} GB but the device holds {cap / 1e9:.2f} GB",
        )


def resolve_params(family: type[DeviceModel], device: DeviceSpec) -> dict[str, Any]:
    """``device.params`` checked against ``family``'s declaration, defaults filled in
    (SpecError at ``<slug>.params.<name>``)."""
    return resolve(family.params, device.params, f"{device.slug}.params", f"{device.kind} devices")


def host_round_trip_s(device: DeviceSpec, model: ModelSpec) -> float:
    """Per-token logits → host → sampled token → device time over ``device``'s host link.

    GLITCHES §III: "The final logits output from each decode iteration is transmitted back
    to the host CPU via PCIe, where the next token index is sampled and sent back to the
    FPGA". Host sampling itself is taken as instantaneous.
    """
    link = device.host_link
    if link is None:
        raise SpecError(
            f"{device.slug}.host_link", "a device that samples on the host needs a host link"
        )
    return link.transfer_s(model.vocab_size * LOGIT_BYTES) + link.transfer_s(TOKEN_BYTES)
