"""The 2026 catalog additions: current accelerators and host CPUs, each number sourced
(checked for every record by test_catalog_data), FP8 peaks where the datasheet has one,
and no price without a public source."""

from __future__ import annotations

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.spec import DeviceKind

CAT = builtin_catalog()
NEW_GPUS = ("h200-sxm", "b200", "gb200-gpu", "l40s", "l4", "mi300x", "mi325x", "gaudi3")


@pytest.mark.parametrize("slug", NEW_GPUS)
def test_the_new_accelerators_exist_with_memory_compute_and_power(slug: str) -> None:
    dev = CAT.device(slug)
    assert dev.kind is DeviceKind.GPU
    assert dev.memory_capacity_bytes > 0 and dev.mem_bw_gbps > 0 and dev.tdp_w > 0
    assert dev.fp16_tflops and dev.fp8_tflops


@pytest.mark.parametrize("slug", ["h100-sxm", "h200-sxm", "b200", "mi300x", "gaudi3"])
def test_the_issues_fp8_devices_carry_an_fp8_peak_at_least_their_fp16_peak(slug: str) -> None:
    dev = CAT.device(slug)
    assert dev.fp8_tflops is not None and dev.fp16_tflops is not None
    assert dev.fp8_tflops >= dev.fp16_tflops


@pytest.mark.parametrize("slug", ["a100-80gb", "a100-40gb", "v100s", "t4", "a10g"])
def test_pre_hopper_gpus_have_no_fp8_peak(slug: str) -> None:
    assert CAT.device(slug).fp8_tflops is None


@pytest.mark.parametrize("slug", [*NEW_GPUS, "xeon-6980p", "epyc-9575f"])
def test_no_new_device_carries_a_price_without_a_public_source(slug: str) -> None:
    assert CAT.device(slug).price_usd is None


@pytest.mark.parametrize(("slug", "bw"), [("xeon-6980p", 614.4), ("epyc-9575f", 576)])
def test_current_host_cpus_carry_their_twelve_channel_ddr5_bandwidth(slug: str, bw: float) -> None:
    dev = CAT.device(slug)
    assert dev.kind is DeviceKind.CPU and dev.mem_bw_gbps == bw
