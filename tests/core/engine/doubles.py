"""Test doubles: small roofline device models and specs, independent of the real catalog.

The engine and the policies are tested against these so their tests do not depend on the
GPU/FPGA models' calibration. ``RooflineDouble`` is piecewise affine in the cached tokens
(a ``max`` of compute and memory time), ``TiledDouble`` is not (tile-quantised attention),
which exercises the fast-forward's fallback.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from simulations.core.devices.base import DeviceModel, PhaseCost, StreamFloor, host_round_trip_s
from simulations.core.options import OptionSpec
from simulations.core.spec import (
    DeviceKind,
    DevicePlacement,
    DeviceSpec,
    LinkSpec,
    MemoryTier,
    ModelSpec,
    RuntimeProfile,
    SystemSpec,
)

LLAMA7B = ModelSpec(
    slug="llama2-7b",
    name="LLaMA2-7B (test)",
    n_layers=32,
    hidden_size=4096,
    n_heads=32,
    n_kv_heads=32,
    head_dim=128,
    ffn_size=11008,
    ffn_kind="gated",
    vocab_size=32000,
    max_context=4096,
)

PARAMS_7B = 6.74e9


def gpu_spec(
    slug: str = "gpu-a", *, mem_gb: float = 80, price: float = 17000, bw: float = 1935
) -> DeviceSpec:
    """A GPU-like device (datasheet-shaped numbers, not calibrated)."""
    return DeviceSpec(
        slug=slug,
        name=slug,
        kind=DeviceKind.GPU,
        vendor="test",
        memory=(MemoryTier("hbm", mem_gb, bw),),
        tdp_w=300,
        idle_w=50,
        price_usd=price,
        fp16_tflops=312,
        host_link=LinkSpec("pcie", 25.0, 5.0),
    )


def fpga_spec(slug: str = "fpga-a", *, mem_gb: float = 8, price: float = 8000) -> DeviceSpec:
    """An FPGA-like device with HBM."""
    return DeviceSpec(
        slug=slug,
        name=slug,
        kind=DeviceKind.FPGA,
        vendor="test",
        memory=(MemoryTier("hbm", mem_gb, 460),),
        tdp_w=75,
        idle_w=20,
        price_usd=price,
        int8_tops=24.5,
        host_link=LinkSpec("pcie", 12.0, 5.0),
    )


def runtime(kind: DeviceKind, *, bits: int = 16, kv_bits: int = 16) -> RuntimeProfile:
    """A runtime profile for the doubles (the doubles read nothing but the precisions)."""
    return RuntimeProfile(
        slug=f"test-{kind.value}",
        name="test",
        device_kind=kind,
        weight_bits=bits,
        act_bits=16 if bits == 16 else 8,
        kv_bits=kv_bits,
        compute_eff=0.5,
        bw_eff=0.5,
    )


class RooflineDouble(DeviceModel):
    """Time = launch + max(FLOPs / peak, bytes / bandwidth); power constant while busy."""

    launch_s = 2e-3

    def _peak(self) -> float:
        return self.device.peak_ops_per_s(self.runtime.act_bits, self.runtime.weight_bits) * 0.4

    def _bw(self) -> float:
        return self.device.mem_bw_gbps * 1e9 * 0.5

    def _power(self) -> float:
        return self.device.tdp_w * 0.8

    def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
        n = sum(seq_lens)
        flops = 2 * PARAMS_7B * n + sum(
            4 * model.n_layers * model.hidden_size * s * s for s in seq_lens
        )
        nbytes = self.weights_bytes(model) + self.kv_bytes_per_token(model) * n
        t = self.launch_s + max(flops / self._peak(), nbytes / self._bw())
        return PhaseCost(t, t * self._power(), flops, nbytes)

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        flops = 2 * PARAMS_7B * batch + 4 * model.n_layers * model.hidden_size * kv_tokens
        nbytes = self.weights_bytes(model) + self.kv_bytes_per_token(model) * kv_tokens
        t = self.launch_s + max(flops / self._peak(), nbytes / self._bw())
        return PhaseCost(t, t * self._power(), flops, nbytes)

    def weights_bytes(self, model: ModelSpec) -> float:
        return PARAMS_7B * self.runtime.weight_bits / 8

    def host_sampling_s(self, model: ModelSpec) -> float:
        # as the FPGA family: the host samples each token
        if self.device.kind is DeviceKind.FPGA:
            return host_round_trip_s(self.device, model)
        return 0.0

    def compute_rate_bound(self) -> float | None:
        return None

    def floor_power_w(self) -> float:
        return 0.0

    def decode_stream_floor(self, model: ModelSpec) -> StreamFloor | None:
        return None


class TiledDouble(RooflineDouble):
    """Attention cost quantised to 64-token tiles per sequence: not affine in kv_tokens."""

    def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
        tiles = math.ceil(kv_tokens / 64)
        base = super().decode_step(model, batch, 0)
        t = base.seconds + tiles * 3e-6
        return PhaseCost(t, t * self._power(), base.flops, base.bytes)


def factory(cls: type[DeviceModel] = RooflineDouble):  # type: ignore[no-untyped-def]
    """A device-model factory (the engine's ``device_models`` argument) for ``cls``."""
    cache: dict[tuple[str, str], DeviceModel] = {}

    def make(device: DeviceSpec, rt: RuntimeProfile) -> DeviceModel:
        key = (device.slug, rt.slug)
        if key not in cache:
            cache[key] = cls(device, rt)
        return cache[key]

    return make


def placement(device: DeviceSpec, count: int, role: str = "", **rt: int) -> DevicePlacement:
    """``count`` devices with the double runtime of their kind."""
    return DevicePlacement(device, count, runtime(device.kind, **rt), role)


def system(name: str, policy: str, *placements: DevicePlacement, **options: object) -> SystemSpec:
    """A system spec for tests."""
    return SystemSpec(name=name, policy=policy, devices=tuple(placements), options=options)


class FpgaDouble(RooflineDouble):
    """An FPGA-like double with a prefetch ratio: bandwidth efficiency grows with M."""

    launch_s = 1e-4
    settings = (OptionSpec("prefetch_ratio", int, 1, "prefetch ratio", minimum=1, maximum=64),)

    def __init__(self, device: DeviceSpec, rt: RuntimeProfile, prefetch_ratio: int = 1) -> None:
        super().__init__(device, rt)
        self.prefetch_ratio = prefetch_ratio

    def with_prefetch(self, m: int) -> FpgaDouble:
        return FpgaDouble(self.device, self.runtime, m)

    def _with_settings(self, values: dict[str, Any]) -> FpgaDouble:
        return self.with_prefetch(int(values["prefetch_ratio"]))

    def _bw(self) -> float:
        return super()._bw() * (1.0 + 0.2 * (1 - 1 / self.prefetch_ratio))

    def _peak(self) -> float:
        return 6.91e12 * 0.6


def mixed_factory():  # type: ignore[no-untyped-def]
    """GPUs get :class:`RooflineDouble`, FPGAs :class:`FpgaDouble`."""
    gpu = factory(RooflineDouble)
    fpga = factory(FpgaDouble)

    def make(device: DeviceSpec, rt: RuntimeProfile) -> DeviceModel:
        return fpga(device, rt) if device.kind is DeviceKind.FPGA else gpu(device, rt)

    return make
