"""Shared helpers for the planner tests: plan documents and exhaustive engine searches."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from simulations.core.catalog import builtin_catalog
from simulations.core.planner import Evaluation, PlanSpec, Search, evaluate_config, parse_plan
from simulations.core.planner.screen import GroupScreen
from simulations.core.planner.space import Config

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "plan-llama2-7b-conv.json"


def small_doc(**over: Any) -> dict[str, Any]:
    """A small valid plan document (uniform lengths, Poisson arrivals), fast to search."""
    doc: dict[str, Any] = {
        "name": "small",
        "model": "llama2-7b",
        "workload": {
            "requests": 60,
            "input_tokens": {"dist": "uniform", "low": 64, "high": 1024},
            "output_tokens": {"dist": "uniform", "low": 8, "high": 200},
            "arrival": {"kind": "poisson", "rate_per_s": 1.5},
            "seed": 3,
        },
        "targets": {"ttft_p90_ms": 1000, "tpot_p90_ms": 50},
        "space": {
            "devices": [
                {"device": "a100-80gb", "max_count": 3},
                {"device": "v100s", "max_count": 3},
                {"device": "u280", "max_count": 4},
            ],
            "policies": [
                {"policy": "homogeneous", "options": {"max_batch": [1]}},
                {"policy": "glitches", "options": {"prefetch_ratio": [4]}},
            ],
        },
        "search": {"sensitivity": False, "round_size": 4},
    }
    for key, value in over.items():
        doc[key] = value
    return copy.deepcopy(doc)


def parse(doc: dict[str, Any], **kwargs: Any) -> PlanSpec:
    """Parse against the built-in catalog."""
    return parse_plan(doc, builtin_catalog(), **kwargs)


def example_plan() -> PlanSpec:
    """The fixed example plan, as shipped in examples/."""
    return parse(json.loads(EXAMPLE.read_text()), trace_dir=EXAMPLE.parent)


def every_config(search: Search) -> list[tuple[Config, GroupScreen, int]]:
    """Every admitted configuration with its group's screen verdict and row."""
    out = []
    for group, verdict in zip(search.groups, search.verdicts, strict=True):
        for i in range(len(group)):
            out.append((group.config(i, search.plan), verdict, i))
    return out


def exhaustive(search: Search) -> dict[str, tuple[Config, Evaluation]]:
    """The engine's verdict on every admitted configuration (no screen, no pruning)."""
    return {cfg.key: (cfg, evaluate_config(search.plan, cfg)) for cfg, _, _ in every_config(search)}


def best_feasible(results: dict[str, tuple[Config, Evaluation]]) -> list[tuple[Config, Evaluation]]:
    """Feasible configurations in the planner's order (capex, energy per token, key)."""
    feas = [(c, ev) for c, ev in results.values() if ev.feasible]
    feas.sort(key=lambda x: (x[0].capex_usd, x[1].energy_j_per_token, x[0].key))
    return feas


@cache
def example_search() -> tuple[Search, dict[str, Any]]:
    """The fixed example searched once per test session (with its sensitivity analysis)."""
    search = Search(example_plan())
    return search, search.run()


@cache
def example_exhaustive() -> dict[str, tuple[Config, Evaluation]]:
    """Every admitted configuration of the fixed example through the engine."""
    return exhaustive(example_search()[0])


def neo_doc(**over: Any) -> dict[str, Any]:
    """A small Neo-style plan: A10G (quoted price) or H100 GPUs with two host CPU choices
    (quoted prices) under neo, gpu-only and fastdecode+."""
    doc: dict[str, Any] = {
        "name": "neo small",
        "model": "llama3.1-8b",
        "workload": {
            "requests": 40,
            "input_tokens": {"dist": "uniform", "low": 200, "high": 1500},
            "output_tokens": {"dist": "uniform", "low": 20, "high": 200},
            "arrival": {"kind": "poisson", "rate_per_s": 2.0},
            "seed": 1,
        },
        "targets": {"ttft_p90_ms": 2000, "tpot_p90_ms": 80},
        "space": {
            "devices": [
                {"device": "a10g", "max_count": 3, "runtime": "vllm-fp16", "price_usd": 3500},
                {"device": "h100-sxm", "max_count": 2, "runtime": "vllm-fp16"},
                {"device": "g5-4xlarge-cpu", "max_count": 1, "price_usd": 1500},
                {"device": "g5-16xlarge-cpu", "max_count": 1, "price_usd": 6000},
            ],
            "policies": [
                {"policy": "neo"},
                {"policy": "gpu-only"},
                {"policy": "fastdecode+"},
            ],
        },
        "search": {"sensitivity": False, "round_size": 4},
    }
    for key, value in over.items():
        doc[key] = value
    return copy.deepcopy(doc)
