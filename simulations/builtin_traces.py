"""The Azure LLM inference traces the repository ships (``examples/traces/``), stored as
public built-in traces: ``manage.py seed_catalog`` imports them, and a document that names
one of the files (``traces/AzureLLMInferenceTrace_conv.csv``, as the shipped examples and
``manage.py simulate`` do) is given the stored trace's slug instead — the web never reads a
file a document names."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulations.core.traces import AZURE_CODE, AZURE_CONV, BUNDLED_TRACE_DIR

_SOURCE = (
    "Azure LLM inference trace 2023 ({file}), Azure/AzurePublicDataset commit "
    "790921015d50dd6aae7f7e47f39ba0e235ad6b08, CC-BY; shipped in examples/traces/ of this "
    "repository"
)


@dataclass(frozen=True)
class BuiltinTrace:
    """A shipped trace file and the slug it is stored under."""

    file: str
    slug: str
    name: str

    @property
    def source(self) -> str:
        """Where the trace comes from (shown with it)."""
        return _SOURCE.format(file=self.file)

    @property
    def document_names(self) -> tuple[str, ...]:
        """How documents name the file (relative to ``examples/`` or the repository)."""
        return (f"traces/{self.file}", f"examples/traces/{self.file}")


BUILTIN_TRACES: tuple[BuiltinTrace, ...] = (
    BuiltinTrace(AZURE_CONV, "azure-conv-2023", "Azure LLM inference trace 2023, conversation"),
    BuiltinTrace(AZURE_CODE, "azure-code-2023", "Azure LLM inference trace 2023, code"),
)
_BY_NAME = {name: t for t in BUILTIN_TRACES for name in t.document_names}


def builtin_traces_seed(only: tuple[str, ...] | None = None) -> list[str]:
    """Store the shipped traces that are not stored yet (public, no owner); return the slugs
    created. ``only`` limits it to those slugs. A slug already taken is left alone."""
    from simulations.choices import TraceVisibility
    from simulations.scenarios import services
    from simulations.scenarios.models import Trace

    created = []
    for t in BUILTIN_TRACES:
        if only is not None and t.slug not in only:
            continue
        if Trace.objects.filter(slug=t.slug).exists():
            continue
        services.trace_import(
            slug=t.slug,
            name=t.name,
            text=(BUNDLED_TRACE_DIR / t.file).read_bytes(),
            source=t.source,
            visibility=TraceVisibility.PUBLIC,
        )
        created.append(t.slug)
    return created


def resolve_trace_files(document: Any) -> Any:
    """``document`` with every shipped trace file it names replaced by the built-in trace's
    slug (stored on first use). Anything else — not a mapping, other names — is unchanged
    and left to validation."""
    if not isinstance(document, Mapping) or not isinstance(document.get("workload"), Mapping):
        return document
    hits = {
        key: _BY_NAME[obj["trace"]]
        for key, obj in document["workload"].items()
        if isinstance(obj, Mapping)
        and isinstance(obj.get("trace"), str)
        and obj["trace"] in _BY_NAME
    }
    if not hits:
        return document
    builtin_traces_seed(only=tuple({t.slug for t in hits.values()}))
    out = copy.deepcopy(dict(document))
    for key, t in hits.items():
        out["workload"][key]["trace"] = t.slug
    return out
