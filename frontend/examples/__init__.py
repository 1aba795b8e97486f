"""Example scenarios the dashboard offers ready to run — at least one per paper.

Most are the repository's ``examples/*.json`` (the same files ``manage.py simulate`` runs);
this folder adds what the dashboard needs beyond them (an H2M2 comparison). A document that
names a trace file (``traces/….csv`` relative to the example) is rewritten to a trace stored
in the database: the web never reads files a document names, so the example's trace is
imported once (:func:`ensure_traces`) under the slug of :data:`TRACE_FILES`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings

from simulations.builtin_traces import BUILTIN_TRACES, builtin_traces_seed

HERE = Path(__file__).resolve().parent
REPO_EXAMPLES = Path(settings.BASE_DIR) / "examples"

#: Trace files examples name → (slug of the stored trace, display name, source text): the
#: repository's shipped traces (:mod:`simulations.builtin_traces`).
TRACE_FILES: dict[str, tuple[str, str, str]] = {
    name: (t.slug, t.name, t.source) for t in BUILTIN_TRACES for name in t.document_names
}


@dataclass(frozen=True)
class Example:
    """An example scenario: where it comes from and which paper it illustrates."""

    key: str
    title: str
    paper: str
    path: Path
    blurb: str = ""

    @property
    def raw(self) -> dict[str, Any]:
        """The document as stored in the file."""
        return _load(self.path)

    @property
    def document(self) -> dict[str, Any]:
        """The document with trace file names replaced by stored-trace slugs."""
        return rewrite_traces(self.raw)

    @property
    def description(self) -> str:
        """What the example shows: its blurb, the document's description, or its name."""
        return self.blurb or str(self.raw.get("description") or self.raw.get("name") or "")

    @property
    def systems(self) -> list[str]:
        """Names of the systems, baseline first."""
        return [str(s.get("name", "")) for s in self.raw.get("systems", ())]

    @property
    def trace_files(self) -> list[str]:
        """Trace files the document names."""
        return sorted(_trace_refs(self.raw))


EXAMPLES: tuple[Example, ...] = (
    Example(
        "glitches-vs-8xa100",
        "1×A100 + 7×U280 vs 8×A100",
        "GLITCHES",
        REPO_EXAMPLES / "glitches-vs-8xa100.json",
        "The headline comparison (GLITCHES §V): one A100 prefills in FP16 and "
        "seven Alveo U280s decode (FlightLLM W4A8, prefetch ratio 4), the KV cache moving over "
        "PCIe layer by layer, against eight A100s serving one request at a time; LLaMA2-7B at "
        "Table I's [1536, 512] point, 200 requests.",
    ),
    Example(
        "glitches-vs-8xv100s",
        "1×V100S + 7×U280 vs 8×V100S and 8×U280",
        "GLITCHES",
        REPO_EXAMPLES / "glitches-vs-8xv100s.json",
    ),
    Example(
        "glitches-azure-conv-poisson",
        "GLITCHES vs 8×A100 on Azure conversation lengths, Poisson arrivals",
        "GLITCHES",
        REPO_EXAMPLES / "glitches-azure-conv-poisson.json",
    ),
    Example(
        "neo-a10g-llama3.1-8b",
        "Neo: A10G + host CPU vs GPU-only vs FastDecode+",
        "Neo",
        REPO_EXAMPLES / "neo-a10g-llama3.1-8b.json",
    ),
    Example(
        "heterollm-modes-snapdragon",
        "HeteroLLM modes on a Snapdragon 8 Gen 3 (GPU + NPU)",
        "HeteroLLM",
        REPO_EXAMPLES / "heterollm-modes-snapdragon.json",
        "LLaMA-3.1-8B on a Snapdragon 8 Gen 3 phone: GPU only (PPL-OpenCL), NPU Matmuls with "
        "pipelined static graphs, HeteroLLM's layer-level and tensor-level GPU+NPU partitions, "
        "and tensor-level without the fast synchronisation (HeteroLLM §4, §5).",
    ),
    Example(
        "h2m2-gpt3-175b",
        "H2M2 vs LPDDR-only and hierarchical memory (GPT3-175B)",
        "H2M2",
        HERE / "h2m2-gpt3-175b.json",
    ),
    Example(
        "glitches-vs-8xa100-disaggregated",
        "GLITCHES vs 8×A100, the 8×A100 also disaggregated",
        "GLITCHES",
        REPO_EXAMPLES / "glitches-vs-8xa100-disaggregated.json",
    ),
    Example(
        "splitwise-h100-a100-azure-conv",
        "H100 prefill + A100 decode vs 8×H100 co-located (Azure conversation trace)",
        "Disaggregated",
        REPO_EXAMPLES / "splitwise-h100-a100-azure-conv.json",
    ),
    Example(
        "disaggregated-two-nodes-ethernet-100g",
        "Disaggregated serving over two nodes joined by 100G Ethernet",
        "Disaggregated",
        REPO_EXAMPLES / "disaggregated-two-nodes-ethernet-100g.json",
    ),
    Example(
        "azure-conv-continuous-batching",
        "Continuous batching vs batch-1 on 2×A100 (Azure conversation trace)",
        "Baselines",
        REPO_EXAMPLES / "azure-conv-continuous-batching.json",
    ),
)


@cache
def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def available() -> list[Example]:
    """The examples whose file exists (a checkout may lack some)."""
    return [e for e in EXAMPLES if e.path.is_file()]


def get(key: str) -> Example | None:
    """The example ``key`` if it exists."""
    return next((e for e in available() if e.key == key), None)


def _trace_refs(doc: Mapping[str, Any]) -> set[str]:
    from simulations.core.scenario import trace_names

    return trace_names(doc)


def rewrite_traces(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` with every known trace file name replaced by its stored slug."""
    out = copy.deepcopy(dict(doc))
    workload = out.get("workload")
    if not isinstance(workload, dict):
        return out
    for key in ("arrival", "input_tokens", "output_tokens"):
        obj = workload.get(key)
        if isinstance(obj, dict) and obj.get("trace") in TRACE_FILES:
            obj["trace"] = TRACE_FILES[obj["trace"]][0]
    return out


def ensure_traces(example: Example) -> list[str]:
    """Store the built-in traces ``example`` names (once; later calls find them) and return
    their slugs. Raises ValidationError if a trace file does not parse."""
    slugs = sorted({TRACE_FILES[n][0] for n in example.trace_files if n in TRACE_FILES})
    if slugs:
        builtin_traces_seed(only=tuple(slugs))
    return slugs
