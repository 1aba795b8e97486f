"""Random small plan documents for checking the screen against exhaustive engine runs."""

from __future__ import annotations

from typing import Any

import numpy as np

GPUS = ("a100-80gb", "a100-40gb", "v100s", "h100-sxm")
FPGAS = ("u280",)


def random_plan(seed: int) -> dict[str, Any]:
    """A plan document with a few devices, both policies and random targets and loads."""
    rng = np.random.default_rng(seed)
    gpus = list(rng.choice(GPUS, size=int(rng.integers(1, 3)), replace=False))
    devices = [{"device": str(g), "max_count": int(rng.integers(1, 4))} for g in gpus]
    use_fpga = bool(rng.random() < 0.7)
    if use_fpga:
        devices.append({"device": "u280", "max_count": int(rng.integers(1, 5))})
    policies: list[dict[str, Any]] = []
    if rng.random() < 0.8 or not use_fpga:
        mb = sorted({int(x) for x in rng.choice([1, 1, 4, 16], size=2)})
        policies.append({"policy": "homogeneous", "options": {"max_batch": mb}})
    if (use_fpga and rng.random() < 0.8) or not policies:
        policies.append(
            {
                "policy": "glitches",
                "options": {
                    "prefetch_ratio": [int(rng.choice([1, 4]))],
                    "gpu_decode": [bool(rng.random() < 0.7)],
                },
            }
        )
    n = int(rng.integers(30, 90))
    kind = rng.choice(["poisson", "poisson", "closed"])
    arrival: dict[str, Any] = {"kind": str(kind)}
    if kind == "poisson":
        arrival["rate_per_s"] = float(np.round(rng.uniform(0.3, 6.0), 3))
    if rng.random() < 0.5:
        inp: Any = {"dist": "uniform", "low": 16, "high": int(rng.integers(64, 2048))}
        out: Any = {"dist": "uniform", "low": 1, "high": int(rng.integers(8, 400))}
    else:
        inp = {
            "dist": "lognormal",
            "median": float(rng.integers(64, 1024)),
            "sigma": 0.8,
            "high": 3000,
        }
        out = {
            "dist": "lognormal",
            "median": float(rng.integers(16, 200)),
            "sigma": 0.9,
            "high": 1000,
        }
    targets: dict[str, Any] = {}
    if rng.random() < 0.85:
        targets["ttft_p90_ms"] = float(np.round(rng.uniform(80, 4000), 1))
    if rng.random() < 0.85:
        targets["tpot_p90_ms"] = float(np.round(rng.uniform(18, 90), 2))
    if rng.random() < 0.25:
        targets["ttft_p99_ms"] = float(np.round(rng.uniform(150, 8000), 1))
    if rng.random() < 0.25:
        targets["tpot_p99_ms"] = float(np.round(rng.uniform(20, 150), 2))
    if rng.random() < 0.25 or not targets:
        targets["min_throughput_tok_s"] = float(np.round(rng.uniform(20, 600), 1))
    doc: dict[str, Any] = {
        "name": f"random plan {seed}",
        "model": "llama2-7b",
        "workload": {
            "requests": n,
            "input_tokens": inp,
            "output_tokens": out,
            "arrival": arrival,
            "seed": int(seed),
        },
        "targets": targets,
        "space": {"devices": devices, "policies": policies},
        "search": {"round_size": int(rng.integers(1, 6)), "sensitivity": False},
    }
    if rng.random() < 0.3:
        doc["constraints"] = {"max_devices_per_node": int(rng.integers(2, 6)), "max_nodes": 1}
    return doc


NEO_GPUS = (("a10g", 3000.0), ("t4", 2000.0), ("a100-80gb", None), ("h100-sxm", None))
HOST_CPUS = (
    ("g5-2xlarge-cpu", 900.0),
    ("g5-4xlarge-cpu", 1500.0),
    ("g5-16xlarge-cpu", 6000.0),
    ("g4dn-4xlarge-cpu", 1400.0),
    ("xeon-8462y-plus-numa-node", 4000.0),
    ("xeon-8462y-plus-2s", 9000.0),
)


def _priced(slug: str, price: float | None, **entry: Any) -> dict[str, Any]:
    # Quoted prices stand in for a user's quotes where the catalog has none.
    out = {"device": slug, **entry}
    if price is not None:
        out["price_usd"] = price
    return out


def random_neo_plan(seed: int) -> dict[str, Any]:
    """A plan document over Neo-style nodes: GPUs (tensor-parallel counts) with host CPU
    choices under ``neo``, ``gpu-only`` and ``fastdecode+``, with random options, lengths,
    loads and targets."""
    rng = np.random.default_rng(10_000 + seed)
    gi = rng.choice(len(NEO_GPUS), size=int(rng.integers(1, 3)), replace=False)
    devices = [
        _priced(
            NEO_GPUS[i][0],
            NEO_GPUS[i][1],
            max_count=int(rng.integers(1, 5)),
            runtime="vllm-fp16",
        )
        for i in gi
    ]
    ci = rng.choice(len(HOST_CPUS), size=int(rng.integers(1, 3)), replace=False)
    devices += [_priced(HOST_CPUS[i][0], HOST_CPUS[i][1], max_count=1) for i in ci]
    batches = sorted({int(x) for x in rng.choice([4, 16, 64, 512], size=2)})
    policies: list[dict[str, Any]] = [
        {
            "policy": "neo",
            "options": {
                "max_batch": batches,
                "cpu_offload": [bool(rng.random() < 0.8)],
                "cpu_memory_fraction": [float(rng.choice([0.05, 0.5]))],
            },
        }
    ]
    if rng.random() < 0.7:
        policies.append(
            {"policy": "gpu-only", "options": {"max_batch": [int(rng.choice(batches))]}}
        )
    if rng.random() < 0.6:
        policies.append({"policy": "fastdecode+", "options": {"max_batch": [batches[-1]]}})
    n = int(rng.integers(30, 80))
    arrival: dict[str, Any] = {
        "kind": "poisson",
        "rate_per_s": float(np.round(np.exp(rng.uniform(np.log(0.5), np.log(40.0))), 3)),
    }
    inp = {"dist": "uniform", "low": 16, "high": int(rng.integers(128, 3000))}
    out = {"dist": "uniform", "low": 1, "high": int(rng.integers(16, 400))}
    targets: dict[str, Any] = {}
    if rng.random() < 0.85:
        targets["ttft_p90_ms"] = float(np.round(rng.uniform(30, 3000), 1))
    if rng.random() < 0.85:
        targets["tpot_p90_ms"] = float(np.round(rng.uniform(4, 120), 2))
    if rng.random() < 0.25:
        targets["tpot_p99_ms"] = float(np.round(rng.uniform(5, 200), 2))
    if rng.random() < 0.25 or not targets:
        targets["min_throughput_tok_s"] = float(np.round(rng.uniform(20, 1500), 1))
    doc: dict[str, Any] = {
        "name": f"random Neo plan {seed}",
        "model": str(rng.choice(["llama3.1-8b", "llama2-7b"])),
        "workload": {
            "requests": n,
            "input_tokens": inp,
            "output_tokens": out,
            "arrival": arrival,
            "seed": int(seed),
        },
        "targets": targets,
        "space": {"devices": devices, "policies": policies},
        "search": {"round_size": int(rng.integers(1, 6)), "sensitivity": False},
    }
    if rng.random() < 0.3:
        doc["constraints"] = {"max_devices_per_node": int(rng.integers(1, 4)), "max_nodes": 1}
    if rng.random() < 0.4:
        # The harness's --num-gpu-blocks-override: a small GPU cache forces swaps.
        blocks = [int(rng.choice([60, 400]))]
        for pol in policies:
            pol.setdefault("options", {})["gpu_blocks"] = blocks
    return doc


def random_h2m2_plan(seed: int) -> dict[str, Any]:
    """A plan document over H2M2 boards: chip counts, HBM and LPDDR capacities priced per
    GB, mappings and batch sizes, with random lengths, arrivals (closed, or Poisson from
    light to overloading) and targets."""
    rng = np.random.default_rng(20_000 + seed)
    hbm = sorted({float(x) for x in rng.choice([2, 4, 16, 48, 96], size=2)})
    lpddr = sorted({float(x) for x in rng.choice([2, 16, 512], size=2)})
    mappings = sorted(
        {str(x) for x in rng.choice(["h2m2", "lpddr-only", "hierarchical", "sublayer"], size=2)}
    )
    n = int(rng.integers(16, 48))
    if rng.random() < 0.5:
        inp: Any = {"dist": "uniform", "low": 16, "high": int(rng.integers(64, 2048))}
        out: Any = {"dist": "uniform", "low": 1, "high": int(rng.integers(8, 300))}
    else:
        inp = {"dist": "lognormal", "median": float(rng.integers(64, 1024)), "sigma": 0.8}
        out = {"dist": "lognormal", "median": float(rng.integers(16, 200)), "sigma": 0.9}
    targets: dict[str, Any] = {}
    if rng.random() < 0.8:
        targets["ttft_p90_ms"] = float(np.round(np.exp(rng.uniform(np.log(5), np.log(2e4))), 1))
    if rng.random() < 0.8:
        targets["tpot_p90_ms"] = float(np.round(rng.uniform(0.3, 30), 2))
    if rng.random() < 0.3 or not targets:
        targets["min_throughput_tok_s"] = float(np.round(rng.uniform(20, 3000), 1))
    doc: dict[str, Any] = {
        "name": f"random H2M2 plan {seed}",
        "model": str(rng.choice(["llama2-7b", "llama3.1-8b"])),
        "workload": {
            "requests": n,
            "input_tokens": inp,
            "output_tokens": out,
            "arrival": {"kind": "poisson", "rate_per_s": 1.0},
            "seed": int(seed),
        },
        "targets": targets,
        "space": {
            "devices": [
                {
                    "device": "h2m2",
                    "max_count": int(rng.integers(1, 3)),
                    "price_usd": 10000,
                    "memory_options": {
                        "hbm_gb": hbm,
                        "lpddr_gb": lpddr,
                        "hbm_usd_per_gb": 20,
                        "lpddr_usd_per_gb": 4,
                    },
                }
            ],
            "policies": [
                {
                    "policy": "h2m2",
                    "options": {
                        "mapping": mappings,
                        "max_batch": sorted({int(x) for x in rng.choice([4, 16, 64], size=2)}),
                    },
                }
            ],
        },
        "search": {"round_size": int(rng.integers(1, 6)), "sensitivity": False},
    }
    # drawn last, so the seeds keep the boards, lengths and targets they had before
    kind = rng.choice(["closed", "poisson"])
    if kind == "closed":
        doc["workload"]["arrival"] = {"kind": "closed"}
    else:
        rate = float(np.round(np.exp(rng.uniform(np.log(0.2), np.log(50.0))), 2))
        doc["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": rate}
    return doc


TP_GPUS = ("a100-80gb", "a100-40gb", "h100-sxm")
TP_LINKS = ("nvlink3", "nvlink4", "pcie4-x16")


def random_tp_plan(seed: int) -> dict[str, Any]:
    """:func:`random_plan`'s workload and targets over tensor-parallel homogeneous GPU
    systems: random TP degrees (data-parallel replicas of them up to the counts), a random
    link and batching, on Llama-2-7B or on Llama-3.1-70B (which fits only with TP)."""
    doc = random_plan(seed)
    rng = np.random.default_rng(20_000 + seed)
    big = bool(rng.random() < 0.4)
    doc["name"] = f"random tensor-parallel plan {seed}"
    doc["model"] = "llama3.1-70b" if big else "llama2-7b"
    gpus = list(rng.choice(TP_GPUS, size=int(rng.integers(1, 3)), replace=False))
    degrees = sorted({int(x) for x in rng.choice([1, 2, 4], size=2)} | ({2, 4} if big else set()))
    doc["space"] = {
        "devices": [
            {"device": str(g), "max_count": int(rng.integers(2, 5)), "runtime": "vllm-fp16"}
            for g in gpus
        ],
        "policies": [
            {
                "policy": "homogeneous",
                "options": {
                    "max_batch": [int(rng.choice([1, 16, 64]))],
                    "tensor_parallel": degrees,
                    "link": [str(rng.choice(TP_LINKS))],
                },
            }
        ],
    }
    doc.pop("constraints", None)
    return doc


def random_disaggregated_plan(seed: int) -> dict[str, Any]:
    """:func:`random_plan`'s devices, lengths, loads and targets with ``disaggregated``
    systems (random KV links, overlap and decode batch limits, tensor-parallel degrees per
    pool in half of the plans; P:D counts and the device of each pool searched), next to
    homogeneous continuous batching in some plans."""
    doc = random_plan(seed)
    rng = np.random.default_rng(10_000 + seed)
    links = sorted({str(x) for x in rng.choice(["", "nvlink3", "ethernet-100g"], size=2)})
    policies: list[dict[str, Any]] = [
        {
            "policy": "disaggregated",
            "options": {
                "kv_link": links,
                "kv_overlap": [bool(rng.random() < 0.7)],
                "decode_max_batch": sorted({int(x) for x in rng.choice([1, 16, 256], size=2)}),
            },
        }
    ]
    if rng.random() < 0.5:
        options = policies[0]["options"]
        options["prefill_tensor_parallel"] = [1, 2]
        options["decode_tensor_parallel"] = [int(rng.choice([1, 2]))]
        options["link"] = ["nvlink3"]
        for d in doc["space"]["devices"]:
            d["max_count"] = max(int(d["max_count"]), 2)
    if rng.random() < 0.4:
        policies.append({"policy": "homogeneous", "options": {"max_batch": [16]}})
    doc["space"]["policies"] = policies
    doc["name"] = f"random disaggregated plan {seed}"
    return doc


#: GPUs for expert offloading (quoted where the catalog has no price) and their host CPUs.
OFFLOAD_GPUS = (("l40s", 8000.0), ("a100-40gb", None), ("a100-80gb", None), ("v100s", None))
OFFLOAD_HOSTS = (("epyc-9575f", 4000.0), ("xeon-6980p", 5000.0), ("g5-16xlarge-cpu", 6000.0))
#: Routed experts kept per layer to try, by model (0: as many as fit).
OFFLOAD_SPLITS = {"qwen3-30b-a3b": (0, 16, 64, 100), "mixtral-8x7b": (0, 2, 5, 7)}


def random_moe_offload_plan(seed: int) -> dict[str, Any]:
    """A plan document over expert offloading (``moe-offload``): GPUs with one host CPU each
    (GPU and host entries, counts and the offload split — routed experts kept on the GPU —
    searched, the per-layer rule or a forced host CPU / stream, routing skew), in some plans
    the same split on H2M2 boards (``cold_tier`` lpddr, in its own entry or beside the host
    tier in one) and homogeneous GPUs holding every expert, for Qwen3-30B-A3B or Mixtral-8x7B
    with random lengths, loads and targets."""
    rng = np.random.default_rng(40_000 + seed)
    model = str(rng.choice(sorted(OFFLOAD_SPLITS)))
    gi = rng.choice(len(OFFLOAD_GPUS), size=int(rng.integers(1, 3)), replace=False)
    devices = [
        _priced(
            OFFLOAD_GPUS[i][0],
            OFFLOAD_GPUS[i][1],
            max_count=int(rng.integers(1, 4)),
            runtime="vllm-fp16",
        )
        for i in gi
    ]
    ci = rng.choice(len(OFFLOAD_HOSTS), size=int(rng.integers(1, 3)), replace=False)
    devices += [
        _priced(OFFLOAD_HOSTS[i][0], OFFLOAD_HOSTS[i][1], max_count=int(rng.integers(1, 4)))
        for i in ci
    ]
    gpu_slugs = [OFFLOAD_GPUS[i][0] for i in gi]
    host_slugs = [OFFLOAD_HOSTS[i][0] for i in ci]
    splits = sorted({int(x) for x in rng.choice(OFFLOAD_SPLITS[model], size=2)})
    options: dict[str, Any] = {
        "max_batch": [int(rng.choice([1, 16, 64]))],
        "gpu_experts": splits,
        "offload_mode": sorted({str(x) for x in rng.choice(["auto", "cpu", "stream"], size=2)}),
    }
    if rng.random() < 0.3:
        options["moe_routing_zipf"] = [0.0, 1.0]
    policies: list[dict[str, Any]] = [
        {"policy": "moe-offload", "options": options, "devices": gpu_slugs + host_slugs}
    ]
    if rng.random() < 0.3:
        devices.append(
            {
                "device": "h2m2",
                "max_count": int(rng.integers(1, 3)),
                "runtime": "h2m2-int8",
                "price_usd": 10000,
                "memory_options": {
                    "hbm_gb": sorted({float(x) for x in rng.choice([16, 24, 48], size=2)}),
                    "lpddr_gb": [128.0],
                    "hbm_usd_per_gb": 20,
                    "lpddr_usd_per_gb": 4,
                },
            }
        )
        if rng.random() < 0.4:
            # one entry over both tiers: GPUs with hosts and boards alone
            options["cold_tier"] = ["host", "lpddr"]
            policies[0]["devices"].append("h2m2")
        policies.append(
            {
                "policy": "moe-offload",
                "options": {
                    "cold_tier": ["lpddr"],
                    "gpu_experts": splits,
                    "offload_mode": sorted(
                        {str(x) for x in rng.choice(["auto", "lpddr", "stream"], size=2)}
                    ),
                    "expert_overlap": [bool(rng.random() < 0.5)],
                    "max_batch": [int(rng.choice([1, 16, 64]))],
                },
                "devices": ["h2m2"],
            }
        )
    if rng.random() < 0.5:
        policies.append(
            {
                "policy": "homogeneous",
                "options": {
                    "max_batch": [int(rng.choice([16, 64]))],
                    "tensor_parallel": [1, 2],
                    "link": ["pcie4-x16"],
                },
                "devices": gpu_slugs,
            }
        )
    n = int(rng.integers(30, 70))
    arrival: dict[str, Any] = {
        "kind": "poisson",
        "rate_per_s": float(np.round(np.exp(rng.uniform(np.log(0.2), np.log(8.0))), 3)),
    }
    inp = {"dist": "uniform", "low": 16, "high": int(rng.integers(128, 2048))}
    out = {"dist": "uniform", "low": 1, "high": int(rng.integers(16, 300))}
    targets: dict[str, Any] = {}
    if rng.random() < 0.85:
        targets["ttft_p90_ms"] = float(np.round(np.exp(rng.uniform(np.log(200), np.log(2e4))), 1))
    if rng.random() < 0.85:
        targets["tpot_p90_ms"] = float(np.round(np.exp(rng.uniform(np.log(15), np.log(600))), 2))
    if rng.random() < 0.25 or not targets:
        targets["min_throughput_tok_s"] = float(np.round(rng.uniform(5, 150), 1))
    doc: dict[str, Any] = {
        "name": f"random expert-offloading plan {seed}",
        "model": model,
        "workload": {
            "requests": n,
            "input_tokens": inp,
            "output_tokens": out,
            "arrival": arrival,
            "seed": int(seed),
        },
        "targets": targets,
        "space": {"devices": devices, "policies": policies},
        "search": {"round_size": int(rng.integers(1, 6)), "sensitivity": False},
    }
    if rng.random() < 0.3:
        doc["constraints"] = {"max_devices_per_node": int(rng.integers(1, 4)), "max_nodes": 1}
    return doc
