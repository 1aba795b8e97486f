"""A small catalog in the data-file format, for tests that must not depend on the built-in one.

The records exercise every field the catalog supports (memory tiers, host and peer links,
a SoC with components, FPGA/NPU/CPU fields, runtime ``params``, GQA models). Where a figure
appears in ``shared/reference/datasheets.json`` it is used; other values are marked
"test fixture" in ``sources`` — this is test data, not the product catalog.
"""

from __future__ import annotations

import copy
from typing import Any

from simulations.core.catalog import Catalog, catalog_from_records

_FIXTURE = "test fixture"

DEVICES: list[dict[str, Any]] = [
    {
        "slug": "t-a100-80gb",
        "name": "Test A100 80 GB SXM",
        "kind": "gpu",
        "vendor": "NVIDIA",
        "memory": [{"kind": "hbm", "capacity_gb": 80.0, "bw_gbps": 2039.0}],
        "fp16_tflops": 312.0,
        "bf16_tflops": 312.0,
        "int8_tops": 624.0,
        "tdp_w": 400.0,
        "idle_w": 50.0,
        "price_usd": 15000.0,
        "host_link": {
            "kind": "pcie",
            "bw_gbps": 32.0,
            "latency_us": 5.0,
            "pcie_gen": 4,
            "lanes": 16,
        },
        "peer_link": {"kind": "nvlink", "bw_gbps": 300.0, "latency_us": 2.0},
        "sources": {
            "fp16_tflops": "NVIDIA A100 datasheet r4 (via datasheets.json)",
            "bf16_tflops": "NVIDIA A100 datasheet r4 (via datasheets.json)",
            "int8_tops": "NVIDIA A100 datasheet r4 (via datasheets.json)",
            "memory[0].capacity_gb": "NVIDIA A100 datasheet r4 (via datasheets.json)",
            "memory[0].bw_gbps": "NVIDIA A100 datasheet r4 (via datasheets.json)",
            "tdp_w": "NVIDIA A100 datasheet r4 (via datasheets.json)",
            "idle_w": _FIXTURE,
            "price_usd": _FIXTURE,
            "host_link": _FIXTURE,
            "peer_link": _FIXTURE,
        },
        "notes": "Test record.",
    },
    {
        "slug": "t-u280",
        "name": "Test Alveo U280",
        "kind": "fpga",
        "vendor": "AMD Xilinx",
        "memory": [
            {"kind": "hbm", "capacity_gb": 8.0, "bw_gbps": 460.0},
            {"kind": "ddr", "capacity_gb": 32.0, "bw_gbps": 38.0},
        ],
        "int8_tops": 24.5,
        "tdp_w": 225.0,
        "idle_w": 30.0,
        "typical_w": 100.0,
        "params": {"clock_mhz": 225.0, "hbm_channels": 32, "issue_cycles": 2.0},
        "sources": {
            "memory[0].capacity_gb": "AMD UG1393 (via datasheets.json)",
            "memory[0].bw_gbps": "AMD UG1393 (via datasheets.json)",
            "memory[1]": _FIXTURE,
            "int8_tops": _FIXTURE,
            "tdp_w": _FIXTURE,
            "idle_w": _FIXTURE,
            "typical_w": _FIXTURE,
            "params.clock_mhz": _FIXTURE,
            "params.hbm_channels": _FIXTURE,
            "params.issue_cycles": _FIXTURE,
        },
    },
    # Components come before their SoC on purpose: seeding must not depend on file order.
    {
        "slug": "t-soc-gpu",
        "name": "Test SoC GPU",
        "kind": "gpu",
        "vendor": "Qualcomm",
        "parent": "t-soc",
        "memory": [{"kind": "lpddr", "capacity_gb": 16.0, "bw_gbps": 76.8}],
        "fp16_tflops": 4.0,
        "tdp_w": 5.0,
        "idle_w": 0.0,
        "host_link": {"kind": "unified", "bw_gbps": 76.8},
        "sources": {
            "memory[0].bw_gbps": "datasheets.json (Snapdragon 8 Gen 3)",
            "fp16_tflops": _FIXTURE,
        },
    },
    {
        "slug": "t-soc-npu",
        "name": "Test SoC NPU",
        "kind": "npu",
        "vendor": "Qualcomm",
        "parent": "t-soc",
        "memory": [{"kind": "lpddr", "capacity_gb": 16.0, "bw_gbps": 76.8}],
        "int8_tops": 45.0,
        "tdp_w": 5.0,
        "idle_w": 0.1,
        "params": {"array_rows": 32, "array_cols": 32, "static_shapes": [32, 64, 128, 256]},
        "sources": {
            "int8_tops": "datasheets.json (Snapdragon 8 Gen 3)",
            "params.array_rows": _FIXTURE,
        },
    },
    {
        "slug": "t-soc",
        "name": "Test phone SoC",
        "kind": "soc",
        "vendor": "Qualcomm",
        "memory": [],
        "tdp_w": 12.0,
        "idle_w": 0.5,
        "sources": {"tdp_w": _FIXTURE, "idle_w": _FIXTURE},
    },
    {
        "slug": "t-xeon",
        "name": "Test Xeon host",
        "kind": "cpu",
        "vendor": "Intel",
        "memory": [{"kind": "ddr", "capacity_gb": 512.0, "bw_gbps": 307.2}],
        "fp32_tflops": 4.0,
        "tdp_w": 300.0,
        "idle_w": 80.0,
        "params": {"cores": 32, "simd_width_bits": 512, "clock_ghz": 2.8},
        "sources": {"params.cores": _FIXTURE, "memory[0]": _FIXTURE, "tdp_w": _FIXTURE},
    },
]

RUNTIMES: list[dict[str, Any]] = [
    {
        "slug": "t-gpu-fp16",
        "name": "Test eager FP16",
        "device_kind": "gpu",
        "weight_bits": 16,
        "act_bits": 16,
        "kv_bits": 16,
        "compute_eff": 0.6,
        "bw_eff": 0.8,
        "kernel_launch_us": 8.0,
        "kernels_per_layer": 12,
        "default_for_kind": True,
        "sources": {"compute_eff": _FIXTURE, "bw_eff": _FIXTURE},
    },
    {
        "slug": "t-gpu-int8",
        "name": "Test INT8 stack",
        "device_kind": "gpu",
        "weight_bits": 8,
        "act_bits": 8,
        "kv_bits": 8,
        "compute_eff": 0.5,
        "bw_eff": 0.7,
        "sources": {"compute_eff": _FIXTURE},
    },
    {
        "slug": "t-fpga-w4a8",
        "name": "Test FPGA W4A8",
        "device_kind": "fpga",
        "weight_bits": 4,
        "act_bits": 8,
        "kv_bits": 8,
        "compute_eff": 0.9,
        "bw_eff": 0.65,
        "params": {"prefetch_depth": 4.0},
        "default_for_kind": True,
        "sources": {"compute_eff": _FIXTURE, "params.prefetch_depth": _FIXTURE},
    },
]

MODELS: list[dict[str, Any]] = [
    {
        "slug": "t-llama2-7b",
        "name": "Test LLaMA-2 7B",
        "n_layers": 32,
        "hidden_size": 4096,
        "n_heads": 32,
        "n_kv_heads": 32,
        "head_dim": 128,
        "ffn_size": 11008,
        "ffn_kind": "gated",
        "vocab_size": 32000,
        "max_context": 4096,
        "sources": {"n_layers": "meta-llama/Llama-2-7b-hf config.json"},
    },
    {
        "slug": "t-llama3.1-8b",
        "name": "Test Llama-3.1 8B",
        "n_layers": 32,
        "hidden_size": 4096,
        "n_heads": 32,
        "n_kv_heads": 8,
        "head_dim": 128,
        "ffn_size": 14336,
        "ffn_kind": "gated",
        "vocab_size": 128256,
        "max_context": 131072,
        "sources": {"n_layers": "meta-llama/Llama-3.1-8B config.json"},
    },
]


def records() -> dict[str, list[dict[str, Any]]]:
    """Fresh copies of the records by kind (callers may mutate them)."""
    return {
        "devices": copy.deepcopy(DEVICES),
        "runtimes": copy.deepcopy(RUNTIMES),
        "models": copy.deepcopy(MODELS),
    }


def make_catalog() -> Catalog:
    """The records as a core Catalog, built the way ``builtin_catalog`` builds its own."""
    recs = records()
    return catalog_from_records(recs["devices"], recs["runtimes"], recs["models"])
