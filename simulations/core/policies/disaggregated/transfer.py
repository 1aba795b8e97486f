"""The KV hand-over's transfer model: a layer-by-layer flow through a path of link hops.

A request's KV cache leaves the prefill instance one layer at a time (GLITCHES §III, Fig. 4;
Splitwise §4.2 "layer-wise KV-cache transfer"): layer *i* can leave when its prefill is done
and it moves hop by hop (e.g. GPU → host → decode device over two PCIe links, or one direct
NVLink / NIC hop), each hop a lane held for its bytes' time (:func:`move`). For identical
layers the last layer's finish time on every stage of this flow shop has a closed form
(:func:`flow_finish`). A scheduler may instead hold each link direction as a FIFO resource
from a transfer's first to its last layer (:func:`move_fifo`, GLITCHES' PCIe links), whose
two-hop host round trip has its own closed form (:func:`fifo_two_hop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulations.core.engine.core import TRANSFER, Link
from simulations.core.spec import LinkSpec


def flow_finish(
    start: float, stage_s: Sequence[float], free_at: Sequence[float], layers: int
) -> list[float]:
    """Finish time of the last of ``layers`` identical jobs on every stage of a flow shop.

    Stage 0 is the producer (the prefill's per-layer compute from ``start``, or 0 s for a
    KV cache that is already complete), stages 1… the hops, each taking ``stage_s[j]`` per
    layer and free from ``free_at[j]`` (``free_at[0]`` is ignored: the producer starts at
    ``start``). The longest path through the grid of (layer, stage) enters at some stage
    ``a`` at its free time, goes down the stages with the first layer and right along
    the slowest stage it passes: ``C(j) = max_a free_a + Σ_{a..j} p + (L − 1) max_{a..j} p``.
    Exact for FIFO stages that carry nothing else meanwhile.
    """
    n = len(stage_s)
    out: list[float] = []
    for j in range(n):
        best = -1.0
        for a in range(j + 1):
            t0 = start if a == 0 else max(start, free_at[a])
            seg = stage_s[a : j + 1]
            c = t0 + sum(seg) + (layers - 1) * max(seg)
            if c > best:
                best = c
        out.append(best)
    return out


@dataclass(frozen=True)
class Hop:
    """One hop of a KV path: the link lanes it occupies together (a direct link books the
    sender's egress and the receiver's ingress; a host PCIe hop one lane) and its model."""

    lanes: tuple[Link, ...]
    spec: LinkSpec
    parallel_links: int = 1

    def seconds(self, nbytes: float) -> float:
        """Time to move ``nbytes`` split over the hop's parallel device links (each of a
        tensor-parallel group's devices sends its own shard of the KV)."""
        return self.spec.transfer_s(nbytes / self.parallel_links)

    @property
    def free_at(self) -> float:
        """When every lane of the hop is free."""
        return max(lane.free_at for lane in self.lanes)


def plan(
    path: Sequence[Hop], start: float, compute_s: float, layer_bytes: float, layers: int
) -> tuple[float, list[float], list[float]]:
    """When ``layers`` layers of ``layer_bytes`` each, produced every ``compute_s`` from
    ``start`` (0: already complete), would have crossed ``path`` as it is booked now:
    (last arrival, each hop's first-layer entry, each hop's last-layer exit)."""
    if not path:
        return start + layers * compute_s, [], []
    stage_s = [compute_s] + [h.seconds(layer_bytes) for h in path]
    free = [start] + [h.free_at for h in path]
    fin = flow_finish(start, stage_s, free, layers)
    entries: list[float] = []
    t = start + compute_s  # the first layer is ready
    for j in range(1, len(stage_s)):
        t = max(t, free[j])
        entries.append(t)
        t += stage_s[j]
    return fin[-1], entries, fin[1:]


def move(
    path: Sequence[Hop],
    start: float,
    compute_s: float,
    layer_bytes: float,
    layers: int,
    request: int,
) -> tuple[float, float]:
    """Book ``request``'s KV (``layer_bytes`` per layer) along ``path`` from ``start``,
    each layer leaving after ``compute_s`` of production (0: already complete); return
    (when the first byte leaves, when the last layer has arrived). An empty path (an ideal,
    free transfer) arrives when the production ends.

    A hop's lanes are shown busy from the first layer's entry to the last layer's exit,
    but they are held only for the bytes' time, ``layers ×`` the hop's time per layer,
    from the first entry: a later transfer uses the gaps a stream behind a prefill leaves
    (links interleave DMA streams), so what a lane carries is conserved but the order of
    the layers of concurrent streams on it is not modelled (optimistic for the later
    stream by at most the gaps)."""
    last, entries, exits = plan(path, start, compute_s, layer_bytes, layers)
    for hop, t_in, t_out in zip(path, entries, exits, strict=True):
        busy = layers * hop.seconds(layer_bytes)
        for lane in hop.lanes:
            lane.timeline.add(t_in, t_out, TRANSFER, request, 1)
            lane.free_at = max(lane.free_at, t_in + busy)
    return (entries[0] if entries else last), last


def fifo_two_hop(
    start: float, compute: float, h1: float, h2: float, layers: int, free1: float, free2: float
) -> tuple[float, float, float]:
    """Finish times of a layer-by-layer sender → host → receiver transfer overlapped with
    compute, each hop a FIFO link.

    Layer ``i``'s KV leaves the sender when its prefill (``compute`` per layer, from
    ``start``; 0 for a finished one) is done and the first link is free; it is forwarded
    when it has reached the host and the second link is free (GLITCHES Fig. 4). For
    identical layers the finish times of this three-stage flow shop have a closed form: the
    maximum of its critical paths, reached at the first or the last layer. Returns (first
    hop start, last hop-1 finish, last hop-2 finish); ``free1``/``free2`` are when each link
    becomes free.
    """
    c1_first = start + compute
    c2_first = max(free1, c1_first) + h1
    c2_last = max(free1 + layers * h1, c1_first + layers * h1, start + layers * compute + h1)
    c3_last = max(free2 + layers * h2, c2_first + layers * h2, c2_last + h2)
    return max(free1, c1_first), c2_last, c3_last


def move_fifo(
    path: Sequence[Hop],
    start: float,
    compute_s: float,
    layer_bytes: float,
    layers: int,
    request: int,
) -> tuple[float, float]:
    """:func:`move` over a host round trip (two hops of one lane each) whose link
    directions are FIFO resources: each is held from the transfer's first layer to its last
    (a later transfer waits for the whole stream, gaps included, rather than interleaving
    with it). Returns (when the first byte leaves, when the last layer has arrived)."""
    if len(path) != 2 or any(len(h.lanes) != 1 for h in path):
        raise ValueError("a FIFO KV transfer runs over a host round trip of two single lanes")
    (out_lane,), (in_lane,) = path[0].lanes, path[1].lanes
    h1 = path[0].seconds(layer_bytes)
    h2 = path[1].seconds(layer_bytes)
    first, c2, c3 = fifo_two_hop(
        start, compute_s, h1, h2, layers, out_lane.free_at, in_lane.free_at
    )
    out_lane.book(first, c2, request)
    in_lane.book(first + h1, c3, request)
    return first, c3
