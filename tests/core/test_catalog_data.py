"""Every catalog data file (all of ``simulations/core/data``): each number has a source, the
records build valid specs, and the slugs scenarios rely on exist."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simulations.core.catalog import DATA_DIR, builtin_catalog
from simulations.core.spec import DeviceKind

FILES = sorted(DATA_DIR.glob("*/*.json"))
RECORDS = [
    pytest.param(path, i, rec, id=f"{path.parent.name}/{path.name}:{rec.get('slug', i)}")
    for path in FILES
    for i, rec in enumerate(json.loads(path.read_text()))
]


def numeric_leaves(value: Any, path: str) -> Iterator[str]:
    """Paths (``memory[0].bw_gbps``, ``params.key``) of every number below ``value``."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from numeric_leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from numeric_leaves(v, f"{path}[{i}]")


def source_for(sources: dict[str, Any], path: str) -> str:
    """The source text covering ``path``: exact, without list indices, or its top field."""
    for key in (path, re.sub(r"\[\d+\]", "", path), re.split(r"[.\[]", path, maxsplit=1)[0]):
        text = sources.get(key)
        if isinstance(text, str) and text.strip():
            return text
    return ""


def test_there_are_catalog_files_of_every_kind() -> None:
    assert {p.parent.name for p in FILES} == {"devices", "runtimes", "models", "links", "prices"}


@pytest.mark.parametrize(("path", "index", "record"), RECORDS)
def test_every_number_has_a_non_empty_source(path: Path, index: int, record: dict) -> None:
    sources = record.get("sources", {})
    if path.parent.name == "prices":
        # a cloud offer quotes one source, with its date, for its low and high price
        assert record["source"].strip() and record["as_of"].strip()
        sources = {k: record["source"] for k in record if k.startswith("usd_")}
    body = {k: v for k, v in record.items() if k not in ("sources", "notes")}
    missing = [leaf for leaf in numeric_leaves(body, "") if not source_for(sources, leaf)]
    assert missing == [], f"{path.name} record {index} has unsourced numbers: {missing}"
    assert all(isinstance(v, str) and v.strip() for v in sources.values())


def test_an_unpublished_power_says_where_it_was_looked_for() -> None:
    """A device record without ``tdp_w`` (null: the vendor publishes none) must say so in
    its sources: the refusal of a scenario without a quote sends the user there."""
    unsourced = [
        rec["slug"]
        for path in FILES
        if path.parent.name == "devices"
        for rec in json.loads(path.read_text())
        if rec.get("tdp_w", 0) is None and not str(rec.get("sources", {}).get("tdp_w", "")).strip()
    ]
    assert unsourced == []


def test_every_record_builds_a_valid_spec_and_slugs_are_unique() -> None:
    seen: dict[str, set[str]] = {}
    for path in FILES:
        for rec in json.loads(path.read_text()):
            kind = path.parent.name
            assert rec["slug"] not in seen.setdefault(kind, set()), rec["slug"]
            seen[kind].add(rec["slug"])
    cat = builtin_catalog()
    assert len(cat.devices) == len(seen["devices"])
    assert len(cat.runtimes) == len(seen["runtimes"])
    assert len(cat.models) == len(seen["models"])
    assert len(cat.links) == len(seen["links"])
    assert len(cat.cloud_offers) == len(seen["prices"])


@pytest.mark.parametrize(
    "slug",
    ["a100-80gb", "a100-40gb", "v100s", "h100-sxm", "h100-pcie", "t4", "a10g", "u280", "vhk158"],
)
def test_design_device_slugs_exist(slug: str) -> None:
    builtin_catalog().device(slug)


@pytest.mark.parametrize(
    "slug",
    [
        "llama2-7b",
        "llama2-70b",
        "llama3.1-8b",
        "llama3.1-70b",
        "llama3.2-3b",
        "internlm-1.8b",
        "gpt3-175b",
        "chinchilla-70b",
    ],
)
def test_design_model_slugs_exist(slug: str) -> None:
    builtin_catalog().model(slug)


def test_default_runtimes_are_the_glitches_stacks() -> None:
    cat = builtin_catalog()
    assert cat.default_runtimes[DeviceKind.GPU] == "hf-eager-fp16"
    assert cat.default_runtimes[DeviceKind.FPGA] == "flightllm-w4a8"


def test_glitches_devices_carry_the_paper_table2_figures() -> None:
    cat = builtin_catalog()
    for slug, bw, price in (
        ("a100-80gb", 1935, 17000),
        ("v100s", 1134, 12000),
        ("u280", 460, 8000),
    ):
        dev = cat.device(slug)
        assert (dev.mem_bw_gbps, dev.price_usd) == (bw, price)
