"""Specs for the Neo tests: a memory-starved GPU, a roomy GPU and a host CPU, with test
runtime profiles (datasheet-shaped numbers, not the catalog's calibrated ones), so the
tests exercise the real GPU/CPU cost models without depending on the catalog."""

from __future__ import annotations

import numpy as np

from simulations.core.engine.requests import RequestSet
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
from tests.core.engine.doubles import LLAMA7B

GQA8B = ModelSpec(
    slug="gqa-8b",
    name="GQA 8B (test)",
    n_layers=32,
    hidden_size=4096,
    n_heads=32,
    n_kv_heads=8,
    head_dim=128,
    ffn_size=14336,
    ffn_kind="gated",
    vocab_size=128256,
    max_context=8192,
)

GPU_RT = RuntimeProfile(
    slug="test-gpu-fused",
    name="test GPU stack",
    device_kind=DeviceKind.GPU,
    weight_bits=16,
    act_bits=16,
    kv_bits=16,
    compute_eff=0.45,
    bw_eff=0.9,
    kernels_per_layer=10,
    params={"fused_attention": 1, "power_wait_frac": 0.3},
)
CPU_RT = RuntimeProfile(
    slug="test-cpu-attn",
    name="test CPU attention",
    device_kind=DeviceKind.CPU,
    weight_bits=16,
    act_bits=16,
    kv_bits=16,
    compute_eff=1.0,
    bw_eff=0.8,
)


def gpu(
    slug: str = "small-gpu", *, mem_gb: float = 16, bw: float = 320, tflops: float = 65
) -> DeviceSpec:
    """A GPU with a PCIe host link."""
    return DeviceSpec(
        slug=slug,
        name=slug,
        kind=DeviceKind.GPU,
        vendor="test",
        memory=(MemoryTier("gddr", mem_gb, bw),),
        tdp_w=70,
        idle_w=10,
        fp16_tflops=tflops,
        host_link=LinkSpec("pcie", 15.75),
    )


def cpu(slug: str = "host-cpu", *, mem_gb: float = 64, bw: float = 47) -> DeviceSpec:
    """A host CPU: 8 AVX-512 cores."""
    return DeviceSpec(
        slug=slug,
        name=slug,
        kind=DeviceKind.CPU,
        vendor="test",
        memory=(MemoryTier("ddr", mem_gb, bw),),
        tdp_w=55,
        idle_w=0,
        params={"cores": 8, "simd_width_bits": 512, "clock_ghz": 2.5},
    )


def node(
    policy: str,
    *,
    gpu_spec: DeviceSpec | None = None,
    gpus: int = 1,
    cpu_spec: DeviceSpec | None = None,
    **options: object,
) -> SystemSpec:
    """A one-node system for ``policy`` (GPU placement role ``gpu``, host role ``cpu``)."""
    return SystemSpec(
        name=policy,
        policy=policy,
        devices=(
            DevicePlacement(gpu_spec or gpu(), gpus, GPU_RT, "gpu"),
            DevicePlacement(cpu_spec or cpu(), 1, CPU_RT, "cpu"),
        ),
        options=options,
    )


def requests(
    n: int,
    *,
    inp: tuple[int, int] = (64, 512),
    out: tuple[int, int] = (8, 256),
    rate: float | None = None,
    seed: int = 3,
) -> RequestSet:
    """``n`` requests with uniform lengths; closed (all at t = 0) or Poisson at ``rate``."""
    rng = np.random.default_rng(seed)
    arrival = np.zeros(n) if rate is None else np.cumsum(rng.exponential(1.0 / rate, n))
    return RequestSet.from_lists(
        arrival, rng.integers(inp[0], inp[1] + 1, n), rng.integers(out[0], out[1] + 1, n)
    )


__all__ = ["GQA8B", "LLAMA7B", "cpu", "gpu", "node", "requests"]
