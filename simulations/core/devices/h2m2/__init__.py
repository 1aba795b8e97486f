"""The H2M2 board family (Hwang et al., H2M2): an asymmetric HBM + LPDDR memory with one
accelerator chip beside each memory, for devices of kind ``memory-accel``.

Modules: :mod:`.accel` (the chip, Table 2, and one memory side), :mod:`.board` (the two
sides and their link, Tables 1 and 4), :mod:`.shapes` (the decoder-layer shapes a mapping
splits, and the iteration it is evaluated at), :mod:`.timing` (time, traffic and footprint
of every head-aware mapping, §3.1) and :mod:`.greedy` (the board's own mapping,
Algorithm 1). The ``h2m2`` policy (``simulations.core.policies.h2m2``) serves requests on
these boards and compares the paper's other mappings and baselines.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulations.core.devices import register_device_model
from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor
from simulations.core.errors import SpecError
from simulations.core.options import OptionSpec
from simulations.core.spec import DeviceKind, DeviceSpec, ModelSpec, RuntimeProfile, check_count

from .accel import Side, accelerator_of
from .board import H2M2Hardware
from .greedy import head_aware_iteration
from .shapes import LayerShapes, Point

#: The array shape a record may give (H2M2 Table 2's MM unit when it gives none).
ARRAY_PARAMS = (
    OptionSpec(
        "array_rows",
        int,
        None,
        "rows of each core's weight-stationary matrix unit (default: Table 2's 128)",
        minimum=1,
        maximum=10**6,
    ),
    OptionSpec(
        "array_cols",
        int,
        None,
        "columns of each core's weight-stationary matrix unit (default: Table 2's 128)",
        minimum=1,
        maximum=10**6,
    ),
)


def sides_of_device(device: DeviceSpec) -> list[Side]:
    """One :class:`Side` (one chip) per memory tier of an H2M2-like device, in tier order."""
    cfg = accelerator_of(device)
    return [Side(t.kind, t.capacity_gb, t.bw_gbps, 1, cfg) for t in device.memory]


@register_device_model(DeviceKind.MEMORY_ACCEL)
class H2M2AccelModel(DeviceModel):
    """Cost model of an H2M2 board: one accelerator chip beside each memory tier (H2M2 §4.1,
    Tables 1–2), decode iterations mapped by the board's greedy head-aware mapping
    (Algorithm 1, :mod:`.greedy`).

    Prefill is not modelled by the paper (§5.1: generation phase only); here it is the same
    kernels with M = prompt tokens (GEMMs) and a causal attention over the prompt, split over
    both chips in proportion to their memories' bandwidth. Deviation: the paper reports only
    the generation phase, so the prefill figures are this model's own.
    """

    params = ARRAY_PARAMS
    # One accelerator chip per memory tier, each with its own bandwidth: no single roof.
    single_device_roofline = False

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        super().__init__(device, runtime)
        self.sides = sides_of_device(device)

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One generation iteration under the greedy head-aware mapping (Algorithm 1)."""
        check_count("batch", batch)
        seq = max(1, round(kv_tokens / batch) + 1)
        point = Point(batch=batch, seq_len=seq)
        shapes = LayerShapes.of(model, self.runtime)
        res = head_aware_iteration(shapes, H2M2Hardware.from_device(self.device), point)
        return PhaseCost(
            seconds=res.seconds,
            joules=res.seconds * self.device.board_power_w,
            flops=res.ops,
            bytes=res.bytes_hbm + res.bytes_lpddr,
        )

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """Prompt phase as GEMMs with M = prompt tokens over both chips (see class note)."""
        if not seq_lens:
            raise SpecError("seq_lens", "must not be empty")
        tokens = int(sum(seq_lens))
        wbytes = self.weights_bytes(model)
        ops = 2.0 * wbytes / (self.runtime.weight_bits / 8) * tokens
        # causal q·Kᵀ and ·V over the prompt: 2 products × 2 ops × heads × head_dim × s²/2
        per_layer = sum(2.0 * model.n_heads * model.head_dim * s * s for s in seq_lens)
        ops += per_layer * model.n_layers
        total_bw = sum(s.bw_bytes_per_s for s in self.sides)
        peak = sum(s.accel.mm_peak_ops * s.chips for s in self.sides)
        seconds = max(ops / peak, wbytes / total_bw)
        return PhaseCost(seconds, seconds * self.device.board_power_w, ops, wbytes)

    def weights_bytes(self, model: ModelSpec) -> float:
        """Decoder weights at this stack's weight precision (embeddings excluded, §5.1)."""
        shapes = LayerShapes.of(model, self.runtime)
        return shapes.weight_bytes_per_layer * model.n_layers

    @property
    def memory_capacity_bytes(self) -> float:
        """Every tier's capacity together (the asymmetric memory is one logical space)."""
        return float(sum(t.capacity_bytes for t in self.device.memory))

    # --- what the capacity planner asks ------------------------------------------------------

    def compute_rate_bound(self) -> float | None:
        """None: the planner screens H2M2 boards through the ``h2m2`` policy's own bounds
        (weight streaming), not per-operator compute."""
        return None

    def floor_power_w(self) -> float:
        """0.0: chip power is not published (the board's ``tdp_w`` is a stand-in)."""
        return 0.0

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        """None: see :meth:`compute_rate_bound`."""
        return None
