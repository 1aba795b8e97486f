"""Several papers' reproductions at once: the small ones in a forked process beside the
paper with a prefetcher, the documents those of one-by-one runs."""

from __future__ import annotations

from typing import Any

import pytest

from simulations.core.reproduce import base


@pytest.fixture
def small_prefetching_paper(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """GLITCHES registered as if it had a prefetcher (which records its calls), so the
    test runs two small papers instead of Neo."""
    calls: list[str] = []
    monkeypatch.setitem(base._PREFETCHERS, "glitches", [lambda jobs: calls.append("glitches")])
    return calls


def test_papers_run_beside_a_prefetching_one_give_the_one_by_one_documents(
    small_prefetching_paper: list[str],
) -> None:
    papers = ["heterollm", "glitches"]
    alone: list[dict[str, Any]] = [base.reproduce(p) for p in papers]
    assert small_prefetching_paper == []  # one process: no prefetch
    together = base.reproduce_many(papers, jobs=2)
    assert small_prefetching_paper == ["glitches"]
    assert together == alone
    assert [d["paper"] for d in together] == papers


def test_one_process_runs_the_papers_in_order_without_forking(
    small_prefetching_paper: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_fork(*_: Any, **__: Any) -> None:
        raise AssertionError("forked with one process")

    monkeypatch.setattr(base.concurrent.futures, "ProcessPoolExecutor", no_fork)
    docs = base.reproduce_many(["glitches", "heterollm"], jobs=1)
    assert [d["paper"] for d in docs] == ["glitches", "heterollm"]
    assert small_prefetching_paper == []


def test_it_rejects_an_unknown_paper() -> None:
    with pytest.raises(ValueError, match="unknown paper"):
        base.reproduce_many(["glitches", "nope"], jobs=2)
