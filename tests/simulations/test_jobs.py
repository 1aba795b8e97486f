"""Helpers shared by the job tasks (simulations.jobs): the collector pause around a task."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from simulations.jobs import collector_paused_then_settled, thaw_heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _restore_collector() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_it_pauses_the_collector_inside_the_task_and_restores_it_after() -> None:
    gc.enable()
    with collector_paused_then_settled():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_keeps_a_disabled_collector_disabled() -> None:
    gc.disable()
    with collector_paused_then_settled():
        pass
    assert not gc.isenabled()


def test_reference_cycles_left_by_the_task_are_reclaimed_at_its_end() -> None:
    gc.enable()
    with collector_paused_then_settled():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
        for _ in range(100_000):  # enough allocations to trigger collections, were it on
            _Node()
        assert ref() is not None
    assert ref() is None


def test_survivors_are_frozen_until_thawed() -> None:
    gc.enable()
    gc.unfreeze()
    keep = [_Node() for _ in range(10)]
    with collector_paused_then_settled():
        pass
    assert gc.get_freeze_count() >= len(keep)
    thaw_heap()
    assert gc.get_freeze_count() == 0


def test_the_collector_is_restored_when_the_task_raises() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused_then_settled():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_frozen_cycle_dropped_after_its_task_is_reclaimed_by_the_next_task() -> None:
    gc.enable()
    holder: list[_Node] = []
    with collector_paused_then_settled():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        holder.append(a)
        del a, b
    ref = weakref.ref(holder[0])
    holder.clear()  # the cycle is garbage now, but frozen
    assert ref() is not None
    with collector_paused_then_settled():
        pass
    assert ref() is None
