"""A toy device family (the "add a device family" recipe): kind ``toy-accel``, an
accelerator whose every operator runs at the roofline of its MAC lanes and its memory.

Importing this module registers nothing: the tests register :class:`ToyAccelModel` for a
while (:func:`registered`), so the real registry never lists the kind.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from simulations.core import devices
from simulations.core.catalog import Catalog, builtin_catalog, catalog_from_records
from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor
from simulations.core.graph import OpKind, PhaseGraph, Precision, decode_graph, prefill_graph
from simulations.core.graph import weight_bytes as graph_weight_bytes
from simulations.core.options import OptionSpec
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile, check_count

KIND = "toy-accel"
#: The family's data: one device record and the runtime profile of its kind.
DATA = Path(__file__).resolve().parent / "devices.json"


class ToyAccelModel(DeviceModel):
    """Every operator takes ``max(FLOPs / (2 × lanes × clock × compute_eff), bytes /
    (bandwidth × bw_eff))``; the board draws its TDP while it works, its idle power
    otherwise."""

    params = (
        OptionSpec("lanes", int, None, "MAC lanes", minimum=1, maximum=10**9, required=True),
        OptionSpec(
            "clock_ghz",
            float,
            None,
            "clock of the lanes",
            minimum=0.0,
            exclusive_minimum=True,
            maximum=100.0,
            required=True,
            unit="GHz",
        ),
    )

    def __init__(self, device: DeviceSpec, runtime: RuntimeProfile) -> None:
        super().__init__(device, runtime)
        p = self.device_params
        self.precision = Precision.of(runtime)
        self.ops_rate = 2.0 * p["lanes"] * p["clock_ghz"] * 1e9 * runtime.compute_eff
        self.bw = device.mem_bw_gbps * 1e9 * runtime.bw_eff

    def _cost(self, g: PhaseGraph) -> PhaseCost:
        seconds = sum(max(op.flops / self.ops_rate, op.bytes / self.bw) * op.repeat for op in g.ops)
        return PhaseCost(seconds, seconds * self.device.tdp_w, g.flops, g.bytes)

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        """The packed prompts' operators at the roofline."""
        g = prefill_graph(model, seq_lens, self.precision)
        self.check_fits(model, g.tokens)
        return self._cost(g)

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        """One decode iteration's operators at the roofline."""
        check_count("batch", batch)
        self.check_fits(model, kv_tokens + batch)
        return self._cost(decode_graph(model, batch, kv_tokens, self.precision))

    def weights_bytes(self, model: ModelSpec) -> float:
        """Weights at the stack's precision."""
        return graph_weight_bytes(model, self.precision)

    def compute_rate_bound(self) -> float:
        """The lanes' achieved rate: no operator computes faster."""
        return self.ops_rate

    def floor_power_w(self) -> float:
        """Idle power: the board never draws less."""
        return min(self.idle_power_w, self.device.tdp_w)

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor:
        """Every step streams the non-embedding weights once and each cached token's KV."""
        g = decode_graph(model, 1, 1, self.precision)
        shared = sum(op.weight_bytes * op.repeat for op in g.ops if op.kind is not OpKind.EMBEDDING)
        return StreamFloor(shared, model.kv_bytes_per_token(self.runtime.kv_bits), self.bw)


class ShardedToyAccelModel(ToyAccelModel):
    """The toy family declaring that its devices serve a replica together (tensor, pipeline
    or expert parallelism): each device's share is costed as a shard of the model."""

    model_parallel = True


@contextlib.contextmanager
def registered(family: type[ToyAccelModel] = ToyAccelModel) -> Iterator[None]:
    """The toy family (``family``) registered for ``toy-accel`` inside the block only."""
    devices.device_kinds()  # the real families are loaded before the registry is saved
    saved = dict(devices._MODELS)
    devices.register_device_model(KIND)(family)
    try:
        yield
    finally:
        devices._MODELS.clear()
        devices._MODELS.update(saved)


def records() -> dict[str, list[dict[str, Any]]]:
    """The family's data file: ``{"devices": [...], "runtimes": [...]}``."""
    data: dict[str, list[dict[str, Any]]] = json.loads(DATA.read_text())
    return data


def catalog() -> Catalog:
    """The built-in catalog plus the toy's device and runtime profile (the default of its
    kind), loaded and checked as the catalog loads its own files."""
    recs = records()
    return catalog_from_records(recs["devices"], recs["runtimes"], base=builtin_catalog())
