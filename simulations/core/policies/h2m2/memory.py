# ruff: noqa: N806  (N, D, H: the paper's symbols for heads and widths)
"""H2M2's memory abstraction (§3.4, §4.2): paged virtual memory over the two sides.

* 2 MB pages (§4.2.1); one flat page table per side (a TLB miss costs a single memory access,
  300 ns, Table 2) and a 2048-entry TLB in each chip's MMU;
* every tensor (a layer's qkv weights on one side, its K or V cache on one side, …) is one
  logically contiguous region whose pages may sit anywhere physically (Fig. 9);
* a growing KV cache gets a new physical page only when its last page is full (Fig. 9, 1-2);
* a mapping change migrates the pages of the moved heads/columns to the other side
  (Fig. 9, 2-2) over the interconnect;
* internal fragmentation is counted by Eq. 2.

:class:`AsymmetricMemory` is the allocator (used by the tests and the dynamic study to check
the invariants); the cost side lives in :class:`~simulations.core.devices.h2m2.accel.Side`
(TLB stalls) and :func:`migration_bytes`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulations.core.devices.h2m2.shapes import LayerShapes, Point
from simulations.core.devices.h2m2.timing import PAGE_BYTES, Footprint, Mapping
from simulations.core.errors import CapacityError, SpecError

SIDES = ("hbm", "lpddr")


@dataclass
class _Region:
    side: str
    nbytes: float
    vpages: list[int] = field(default_factory=list)


class AsymmetricMemory:
    """Physical frames of both sides, flat page tables, and per-tensor virtual regions."""

    def __init__(self, hbm_bytes: float, lpddr_bytes: float, page_bytes: float = PAGE_BYTES):
        if page_bytes <= 0:
            raise SpecError("page_bytes", "must be positive")
        self.page = float(page_bytes)
        frames = {"hbm": int(hbm_bytes // page_bytes), "lpddr": int(lpddr_bytes // page_bytes)}
        self.frames = frames
        # free frames as stacks (LIFO keeps allocation deterministic)
        self._free = {s: list(range(frames[s] - 1, -1, -1)) for s in SIDES}
        # flat page tables: virtual page -> physical frame on that side (-1: not mapped)
        self.page_table: dict[str, dict[int, int]] = {s: {} for s in SIDES}
        self._regions: dict[Any, _Region] = {}
        self._next_vpage = 0

    # --- queries ----------------------------------------------------------------------------

    def used_pages(self, side: str) -> int:
        """Frames in use on ``side``."""
        return self.frames[side] - len(self._free[side])

    def free_pages(self, side: str) -> int:
        """Frames free on ``side``."""
        return len(self._free[side])

    def region(self, tensor: Any) -> tuple[str, float, int]:
        """(side, bytes, pages) of ``tensor``."""
        r = self._regions[tensor]
        return r.side, r.nbytes, len(r.vpages)

    def tensors(self) -> Iterable[Any]:
        """Every allocated tensor id."""
        return self._regions.keys()

    # --- allocation ----------------------------------------------------------------------

    def _take(self, side: str, pages: int) -> list[int]:
        if pages > len(self._free[side]):
            raise CapacityError(side, f"needs {pages} more pages, {len(self._free[side])} free")
        return [self._free[side].pop() for _ in range(pages)]

    def allocate(self, tensor: Any, side: str, nbytes: float) -> int:
        """Map a new tensor of ``nbytes`` on ``side``; returns the pages it got."""
        if tensor in self._regions:
            raise SpecError("tensor", f"{tensor!r} is already allocated")
        if side not in SIDES:
            raise SpecError("side", f"unknown side {side!r}")
        region = _Region(side, 0.0)
        self._regions[tensor] = region
        return self.grow(tensor, nbytes)

    def grow(self, tensor: Any, nbytes: float) -> int:
        """Grow ``tensor`` to ``nbytes`` (a KV cache gaining tokens); a new page is mapped only
        when the last one is full. Returns the pages added."""
        r = self._regions[tensor]
        if nbytes < r.nbytes:
            raise SpecError("nbytes", "a region only grows; free it instead")
        need = int(np.ceil(nbytes / self.page)) - len(r.vpages)
        frames = self._take(r.side, need)
        for f in frames:
            v = self._next_vpage
            self._next_vpage += 1
            r.vpages.append(v)
            self.page_table[r.side][v] = f
        r.nbytes = float(nbytes)
        return need

    def free(self, tensor: Any) -> None:
        """Unmap ``tensor`` and return its frames."""
        r = self._regions.pop(tensor)
        for v in r.vpages:
            self._free[r.side].append(self.page_table[r.side].pop(v))

    def migrate(self, tensor: Any, side: str) -> float:
        """Move ``tensor`` to ``side`` keeping its virtual pages (the kernel's logical view is
        unchanged); returns the bytes copied over the interconnect."""
        r = self._regions[tensor]
        if r.side == side:
            return 0.0
        frames = self._take(side, len(r.vpages))
        for v, f in zip(r.vpages, frames, strict=True):
            self._free[r.side].append(self.page_table[r.side].pop(v))
            self.page_table[side][v] = f
        r.side = side
        return r.nbytes

    def internal_fragmentation(self) -> float:
        """Bytes allocated but unused in the tensors' last pages."""
        return float(sum(len(r.vpages) * self.page - r.nbytes for r in self._regions.values()))


# --- Eq. 2 ----------------------------------------------------------------------------------


def eq2_fragmentation(
    shapes: LayerShapes, point: Point, mapping: Mapping, page: float = PAGE_BYTES
) -> dict[str, float]:
    """Eq. 2, ``(tensor_size mod page_size) × #tensors``, summed over the tensor kinds of one
    mapping, with ``tensor_size`` the contiguous unit our layout keeps on one side (a layer's
    share of a weight matrix or of its K or V cache) and ``#tensors`` the layers. Also
    returns the physical waste (page − remainder per partly filled page)."""
    s = shapes
    N, D, H = s.units, s.hidden, s.head_dim
    n = mapping
    kv_h = int(s.kv_heads_hbm(np.asarray(n.n_attn)))
    kv_l = int(s.kv_heads_lpddr(np.asarray(n.n_attn)))
    q_h = int(s.qkv_cols(np.asarray(n.n_qkv), s.kv_heads_hbm(np.asarray(n.n_qkv))))
    q_l = int(s.qkv_cols(np.asarray(N - n.n_qkv), s.kv_heads_lpddr(np.asarray(n.n_qkv))))
    p_h = int(s.fc_cols(np.asarray(n.n_fc), D))
    u_h = int(s.fc_cols(np.asarray(n.n_fc), s.ffn))
    w = s.w_bytes
    sizes = {
        "qkv": (q_h * D * w, q_l * D * w),
        "k_cache": (
            point.kv_tokens * H * kv_h * s.kv_bytes,
            point.kv_tokens * H * kv_l * s.kv_bytes,
        ),
        "proj": (s.q_width * p_h * w, s.q_width * (D - p_h) * w),
        "ffn_up": (D * u_h * w * s.up_mult, D * (s.ffn - u_h) * w * s.up_mult),
        "ffn_down": (s.ffn * p_h * w, s.ffn * (D - p_h) * w),
    }
    counts = {"qkv": 1, "k_cache": 2, "proj": 1, "ffn_up": s.up_mult, "ffn_down": 1}
    eq2 = waste = 0.0
    for kind, pair in sizes.items():
        per = counts[kind]
        for size in pair:
            unit = size / (per if kind == "ffn_up" else 1)
            if unit <= 0:
                continue
            rem = unit % page
            tensors = s.n_layers * per
            eq2 += rem * tensors
            waste += (page - rem if rem else 0.0) * tensors
    return {"eq2_bytes": eq2, "waste_bytes": waste}


# --- costs of the abstraction ---------------------------------------------------------------


def migration_bytes(raw: Footprint, old: Mapping, new: Mapping) -> float:
    """Bytes copied over the interconnect when the mapping goes from ``old`` to ``new``: what
    each side's footprint of each sublayer gains (all layers). A side that only shrinks
    frees pages and receives nothing. With MHA one side's gain is the other's loss; with GQA
    a KV group split across the sides is held by both (:mod:`.kernels`), so moving one query
    head can copy a whole KV head to one side while the other keeps its copy."""
    total = 0.0
    for name, a, b in (
        ("qkv", old.n_qkv, new.n_qkv),
        ("attn", old.n_attn, new.n_attn),
        ("fc", old.n_fc, new.n_fc),
    ):
        for side in raw[name]:
            total += max(0.0, float(side[b]) - float(side[a]))
    return total


def lru_hit_fraction(footprint_pages: int, capacity_pages: int) -> float:
    """Steady-state hit fraction of an LRU cache of ``capacity_pages`` under a cyclic scan of
    ``footprint_pages`` distinct pages (one generation iteration after another): every page
    is evicted before its reuse once the scan exceeds the cache (§2.2.1, reuse distance)."""
    return 1.0 if footprint_pages <= capacity_pages else 0.0


def simulate_lru(trace: Iterable[int], capacity: int) -> float:
    """Hit fraction of an LRU cache of ``capacity`` entries over ``trace`` (reference model
    for :func:`lru_hit_fraction` and the TLB)."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = total = 0
    for page in trace:
        total += 1
        if page in cache:
            hits += 1
            cache.move_to_end(page)
        else:
            cache[page] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits / total if total else 0.0
