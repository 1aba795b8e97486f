"""GLITCHES: GPU prefill, FPGA decode, KV cache streamed over PCIe (GLITCHES §III).

See :class:`GlitchesPolicy` for the behaviour and every assumption; :class:`GlitchesSim` is
the event-level scheduler, :func:`kv_transfer_seconds` the Fig. 8 transfer model.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from simulations.core.devices import build_device_model
from simulations.core.devices.base import LOGIT_BYTES, TOKEN_BYTES, DeviceModel
from simulations.core.devices.parallel import ParallelGroup, shard_model
from simulations.core.engine.core import (
    DECODE,
    IDLE,
    PREFILL,
    ProgressFn,
    SimOutput,
    Simulator,
    Unit,
    build_units,
)
from simulations.core.engine.requests import RequestSet
from simulations.core.errors import CapacityError, SpecError
from simulations.core.policies.base import OptionSpec, RoleSpec, register, resolve_link
from simulations.core.policies.simulated import EnginePolicy
from simulations.core.screening import BoundContext, Bounds, FitContext, SignatureLike
from simulations.core.spec import (
    DeviceKind,
    DevicePlacement,
    DeviceSpec,
    ModelSpec,
    RuntimeProfile,
    SystemSpec,
)

from . import screen

RECEIVING = "receiving"


def _pipeline_end(
    start: float, compute: float, h1: float, h2: float, layers: int, free1: float, free2: float
) -> tuple[float, float, float]:
    """Finish times of a layer-by-layer GPU → host → FPGA transfer overlapped with compute.

    Layer ``i``'s KV leaves the GPU when its prefill (``compute`` per layer, from
    ``start``) is done and the GPU link is free; it is forwarded to the FPGA when it has
    reached the host and the FPGA link is free (Fig. 4). For identical layers the finish
    times of this three-stage flow shop have a closed form: the maximum of its critical
    paths, reached at the first or the last layer. Returns (first hop start, last hop-1
    finish, last hop-2 finish); ``free1``/``free2`` are when each link becomes free.
    """
    c1_first = start + compute
    c2_first = max(free1, c1_first) + h1
    c2_last = max(free1 + layers * h1, c1_first + layers * h1, start + layers * compute + h1)
    c3_last = max(free2 + layers * h2, c2_first + layers * h2, c2_last + h2)
    return max(free1, c1_first), c2_last, c3_last


def kv_transfer_seconds(
    model: ModelSpec, seq_len: int, gpu: DeviceSpec, fpga: DeviceSpec, fpga_kv_bits: int
) -> float:
    """Whole-KV GPU → host → FPGA latency, not overlapped (what Fig. 8 plots).

    §V: "The GPU to FPGA latency is obtained by adding the latency from GPU to CPU and from
    CPU to FPGA"; the KV cache is quantised to the FPGA's KV precision before it leaves the
    GPU (§III), so both hops carry the quantised bytes.
    """
    if gpu.host_link is None:
        raise SpecError(f"{gpu.slug}.host_link", "GLITCHES needs a PCIe host link per device")
    if fpga.host_link is None:
        raise SpecError(f"{fpga.slug}.host_link", "GLITCHES needs a PCIe host link per device")
    nbytes = model.kv_bytes_per_token(fpga_kv_bits) * seq_len
    return gpu.host_link.transfer_s(nbytes) + fpga.host_link.transfer_s(nbytes)


class GlitchesSim(Simulator):
    """Event-level GLITCHES scheduler (host side, §III-C). Units: GPUs first, then FPGAs.

    At every event, in this order: (1) waiting decodes go FCFS to idle FPGAs (lowest index
    first); (2) waiting prefills go FCFS to idle GPUs with room for their KV cache; if the
    head fits a GPU that is decoding, that GPU stops at its next decode iteration boundary
    to prefill (prefill has priority over the GPU's substitute decoding); (3) an idle GPU
    resumes its own paused decode or, when every FPGA is busy (a decode still waits after
    step 1), takes the oldest waiting decode whose KV cache it holds.
    """

    def __init__(
        self,
        requests: RequestSet,
        gpus: list[Unit],
        fpgas: list[Unit],
        *,
        fpga_kv_bits: int,
        gpu_decode: bool = True,
        reference: bool = False,
        audit: bool = False,
        progress: ProgressFn | None = None,
    ) -> None:
        super().__init__(requests, gpus + fpgas, reference=reference, progress=progress)
        self.audit = audit
        #: With ``audit``: after every scheduling pass, (time, idle FPGAs, waiting decodes,
        #: waiting prefills, whether the waiting prefill's head fits an idle GPU).
        self.state_log: list[tuple[float, int, int, int, bool]] = []
        #: With ``audit``: every GPU decode start or resume, (time, GPU, request, resumed,
        #: idle FPGAs, whether the waiting prefill's head fits this GPU).
        self.gpu_decode_log: list[tuple[float, int, int, bool, int, bool]] = []
        if not gpus:
            raise SpecError("devices", "GLITCHES needs at least one GPU in the prefill role")
        if not fpgas and not gpu_decode:
            raise SpecError("options.gpu_decode", "with no FPGA the GPUs must decode")
        self.gpus = gpus
        self.fpgas = fpgas
        self.gpu_decode = gpu_decode
        self.layers = gpus[0].model.n_layers
        self.fpga_kv_per_token = gpus[0].model.kv_bytes_per_token(fpga_kv_bits)
        self.logit_bytes = gpus[0].model.vocab_size * LOGIT_BYTES
        self._check_capacity()
        nu = len(self.units)
        self.mode = [IDLE] * nu
        self.current = [-1] * nu  # request a unit is working on (FPGA: receiving/decoding)
        self.pinned = [-1] * nu  # GPU: the request whose decode it owns (running or paused)
        self.run_plan: list[tuple[float, int, int, float, float] | None] = [None] * nu
        self.check_at: list[float | None] = [None] * nu
        self.idle_fpgas = [f.index for f in fpgas]
        heapq.heapify(self.idle_fpgas)
        self.prefill_q: deque[int] = deque()
        self.decode_q: deque[int] = deque()
        n = len(self.prompt)
        self.kv_on = [-1] * n  # GPU index holding the request's KV cache
        self.kv_bytes = [0.0] * n  # bytes reserved for it there
        self.stream_to = [-1] * n  # FPGA receiving the KV while the prefill runs
        self.token_ready = [0.0] * n  # when the first sampled token can reach a decoder
        self.streamed = 0
        self.dispatched = 0
        self.gpu_decoded = 0
        self.exposed_transfer_s: list[float] = []

    # -- capacity ------------------------------------------------------------------------

    def _check_capacity(self) -> None:
        longest = int(np.max(self.requests.input_tokens + self.requests.output_tokens))
        for g in self.gpus:
            if not g.fits(longest * g.kv_per_token):
                raise CapacityError(
                    "workload",
                    f"a request of {longest} tokens does not fit {g.slug} memory next to "
                    f"the weights ({g.weights / 1e9:.1f} of {g.capacity / 1e9:.1f} GB)",
                )
        for f in self.fpgas:
            if not f.fits(longest * self.fpga_kv_per_token):
                raise CapacityError(
                    "workload",
                    f"a request of {longest} tokens does not fit the KV region of {f.slug} "
                    f"HBM next to the weights ({f.weights / 1e9:.1f} of "
                    f"{f.capacity / 1e9:.1f} GB)",
                )

    def _gpu_tokens(self, rid: int) -> int:
        """KV tokens a prefill reserves on the GPU: the prompt's if it will stream to an
        FPGA, else room for the whole request (the GPU may have to decode it)."""
        if self._will_stream(rid) or self.output[rid] == 1:
            return self.prompt[rid]
        return self.prompt[rid] + self.output[rid]

    def _will_stream(self, rid: int) -> bool:
        return self.output[rid] > 1 and bool(self.idle_fpgas)

    # -- events --------------------------------------------------------------------------

    def on_arrivals(self, ids: list[int]) -> None:
        """New requests join the prefill queue (FCFS)."""
        self.prefill_q.extend(ids)
        self._schedule()

    def _schedule(self) -> None:
        dq = self.decode_q
        while dq and self.idle_fpgas:
            self._dispatch(dq.popleft(), heapq.heappop(self.idle_fpgas))
        pq = self.prefill_q
        while pq:
            tokens = self._gpu_tokens(pq[0])
            g = next(
                (
                    u
                    for u in self.gpus
                    if self.mode[u.index] == IDLE and u.fits(tokens * u.kv_per_token)
                ),
                None,
            )
            if g is None:
                break
            self._start_prefill(g, pq.popleft())
        if pq and not self.reference:
            self._claim_boundary(pq[0])
        for g in self.gpus:
            gi = g.index
            if self.mode[gi] != IDLE:
                continue
            if self.pinned[gi] >= 0:
                self._start_gpu_decode(g, resumed=True)
            elif self.gpu_decode and dq:
                rid = next((r for r in dq if self.kv_on[r] == gi), -1)
                if rid >= 0:
                    dq.remove(rid)
                    self.pinned[gi] = rid
                    self.gpu_decoded += 1
                    self._start_gpu_decode(g, resumed=False)
        if self.audit:
            self.state_log.append(
                (self.now, len(self.idle_fpgas), len(dq), len(pq), self._head_fits(IDLE))
            )

    def _head_fits(self, mode: str, only: Unit | None = None) -> bool:
        """Whether the waiting prefill's head fits a GPU in ``mode`` (or the GPU ``only``)."""
        if not self.prefill_q:
            return False
        tokens = self._gpu_tokens(self.prefill_q[0])
        gpus = [only] if only is not None else self.gpus
        return any(self.mode[g.index] == mode and g.fits(tokens * g.kv_per_token) for g in gpus)

    # -- prefill on the GPU and the KV stream --------------------------------------------

    def _start_prefill(self, g: Unit, rid: int) -> None:
        now = self.now
        gi = g.index
        stream = self._will_stream(rid)
        need = self._gpu_tokens(rid) * g.kv_per_token
        g.alloc(need)
        self.kv_on[rid] = gi
        self.kv_bytes[rid] = need
        p = self.prompt[rid]
        cost = g.prefill_cost([p])
        end = now + cost.seconds
        g.occupy(now, end, cost.joules, PREFILL, rid, 1)
        if g.group_size > 1:
            g.comm_s += g.dm.collective_prefill_s(g.model, [p])
        g.prefill_tokens += p
        g.prefill_outputs += 1
        self.mode[gi] = PREFILL
        self.check_at[gi] = None
        g.version += 1
        if stream:
            f = self.units[heapq.heappop(self.idle_fpgas)]
            self.stream_to[rid] = f.index
            self.streamed += 1
            self._reserve_fpga(f, rid)
            nbytes = p * self.fpga_kv_per_token / self.layers
            h1 = g.link_out.seconds(nbytes)
            h2 = f.link_in.seconds(nbytes)
            first, c2, c3 = _pipeline_end(
                now,
                cost.seconds / self.layers,
                h1,
                h2,
                self.layers,
                g.link_out.free_at,
                f.link_in.free_at,
            )
            g.link_out.book(first, c2, rid)
            f.link_in.book(first + h1, c3, rid)
            self.token_ready[rid] = end + g.link_out.seconds(self.logit_bytes)
            start = max(c3, self.token_ready[rid] + f.link_in.seconds(TOKEN_BYTES))
            self.exposed_transfer_s.append(start - end)
            self.at(start, self._kv_arrived, f.index, rid)
        self.at(end, self._prefill_end, gi, rid)

    def _prefill_end(self, gi: int, rid: int) -> None:
        g = self.units[gi]
        self.generated[rid] = 1
        self.first_token(rid, self.now)
        self.mode[gi] = IDLE
        g.version += 1
        if self.output[rid] == 1:
            self._release_gpu(rid)
            self.complete(rid, self.now, gi)
        elif self.stream_to[rid] < 0:
            if self.fpgas:
                self.token_ready[rid] = self.now + g.link_out.seconds(self.logit_bytes)
            self.decode_q.append(rid)
        self._schedule()

    def _release_gpu(self, rid: int) -> None:
        gi = self.kv_on[rid]
        if gi >= 0:
            self.units[gi].release(self.kv_bytes[rid])
            self.kv_on[rid] = -1
            self.kv_bytes[rid] = 0.0

    # -- decode on the FPGAs -------------------------------------------------------------

    def _reserve_fpga(self, f: Unit, rid: int) -> None:
        fi = f.index
        self.mode[fi] = RECEIVING
        self.current[fi] = rid
        f.alloc((self.prompt[rid] + self.output[rid] - 1) * self.fpga_kv_per_token)

    def _dispatch(self, rid: int, fi: int) -> None:
        """Move a waiting decode's whole KV cache from its GPU to an idle FPGA."""
        f = self.units[fi]
        g = self.units[self.kv_on[rid]]
        self.dispatched += 1
        self._reserve_fpga(f, rid)
        nbytes = self.prompt[rid] * self.fpga_kv_per_token / self.layers
        h1 = g.link_out.seconds(nbytes)
        h2 = f.link_in.seconds(nbytes)
        first, c2, c3 = _pipeline_end(
            self.now, 0.0, h1, h2, self.layers, g.link_out.free_at, f.link_in.free_at
        )
        g.link_out.book(first, c2, rid)
        f.link_in.book(first + h1, c3, rid)
        start = max(c3, self.token_ready[rid] + f.link_in.seconds(TOKEN_BYTES))
        self.at(start, self._kv_arrived, fi, rid)

    def _kv_arrived(self, fi: int, rid: int) -> None:
        """The KV cache is in the FPGA's HBM and the token index has arrived: start."""
        self._release_gpu(rid)
        self.mode[fi] = DECODE
        self._fpga_run(fi, rid)
        self._schedule()

    def _solo_run(self, unit: Unit, rid: int) -> tuple[int, int, float, float]:
        """The rest of ``rid``'s decode alone on ``unit`` (one step in reference mode):
        (cached tokens before the first step, steps, seconds, joules)."""
        gen = self.generated[rid]
        n = 1 if self.reference else self.output[rid] - gen
        k0 = self.prompt[rid] + gen - 1
        dur, joules = unit.curve.run_cost(1, k0, n)
        return k0, n, dur, joules

    def _fpga_run(self, fi: int, rid: int) -> None:
        f = self.units[fi]
        _, n, dur, joules = self._solo_run(f, rid)
        now = self.now
        f.occupy(now, now + dur, joules, DECODE, rid, 1)
        f.decode_tokens += n
        self.at(now + dur, self._fpga_step_end, fi, rid, n)

    def _fpga_step_end(self, fi: int, rid: int, n: int) -> None:
        self.generated[rid] += n
        if self.generated[rid] < self.output[rid]:
            self._fpga_run(fi, rid)
            return
        f = self.units[fi]
        f.release((self.prompt[rid] + self.output[rid] - 1) * self.fpga_kv_per_token)
        self.complete(rid, self.now, fi)
        self.mode[fi] = IDLE
        self.current[fi] = -1
        heapq.heappush(self.idle_fpgas, fi)
        self._schedule()

    # -- decode on a GPU (substitute for a busy FPGA) ------------------------------------

    def _start_gpu_decode(self, g: Unit, *, resumed: bool) -> None:
        gi = g.index
        rid = self.pinned[gi]
        if self.audit:
            self.gpu_decode_log.append(
                (self.now, gi, rid, resumed, len(self.idle_fpgas), self._head_fits(IDLE, g))
            )
        k0, n, dur, joules = self._solo_run(g, rid)
        now = self.now
        self.run_plan[gi] = (now, k0, n, dur, joules)
        self.mode[gi] = DECODE
        self.check_at[gi] = None
        g.version += 1
        self.at(now + dur, self._gpu_run_end, gi, g.version)

    def _gpu_advance(self, gi: int, k: int) -> None:
        g = self.units[gi]
        plan = self.run_plan[gi]
        assert plan is not None
        t0, k0, n, dur, joules = plan
        if k != n:
            dur, joules = g.curve.run_cost(1, k0, k)
        rid = self.pinned[gi]
        g.occupy(t0, t0 + dur, joules, DECODE, rid, 1)
        if g.group_size > 1:
            g.comm_s += k * g.dm.collective_decode_s(g.model, 1)
        g.decode_tokens += k
        self.generated[rid] += k
        self.run_plan[gi] = None
        self.mode[gi] = IDLE
        g.version += 1

    def _gpu_run_end(self, gi: int, version: int) -> None:
        g = self.units[gi]
        if version != g.version:
            return
        plan = self.run_plan[gi]
        assert plan is not None
        self._gpu_advance(gi, plan[2])
        rid = self.pinned[gi]
        if self.generated[rid] == self.output[rid]:
            self.pinned[gi] = -1
            self._release_gpu(rid)
            self.complete(rid, self.now, gi)
        self._schedule()

    def _claim_boundary(self, head: int) -> None:
        """Stop the decoding GPU whose next iteration boundary comes first (among those with
        room for the waiting prefill) at that boundary, where the reference would prefill."""
        tokens = self._gpu_tokens(head)
        now = self.now
        best_t = math.inf
        best: tuple[int, int] | None = None
        for g in self.gpus:
            gi = g.index
            if self.mode[gi] != DECODE or not g.fits(tokens * g.kv_per_token):
                continue
            pending = self.check_at[gi]
            if pending is not None:
                if pending < best_t:
                    best_t, best = pending, None
                continue
            plan = self.run_plan[gi]
            assert plan is not None
            t0, k0, n, _, _ = plan
            k, tk = g.curve.next_boundary(1, k0, n, now - t0)
            while k < n and t0 + tk <= now:
                k += 1
                tk = g.curve.run_cost(1, k0, k)[0]
            if k < n and t0 + tk < best_t:
                best_t, best = t0 + tk, (gi, k)
        if best is not None:
            gi, k = best
            self.check_at[gi] = best_t
            self.at(best_t, self._gpu_check, gi, self.units[gi].version, k)

    def _gpu_check(self, gi: int, version: int, k: int) -> None:
        g = self.units[gi]
        if version != g.version:
            return
        self.check_at[gi] = None
        pq = self.prefill_q
        if pq and g.fits(self._gpu_tokens(pq[0]) * g.kv_per_token):
            self._gpu_advance(gi, k)
        self._schedule()

    def run(self) -> SimOutput:
        """Run, then report how decodes were placed and the exposed transfer time."""
        out = super().run()
        exposed = self.exposed_transfer_s
        out.extra.update(
            {
                "decodes_streamed_to_fpga": self.streamed,
                "decodes_dispatched_to_fpga": self.dispatched,
                "decodes_on_gpu": self.gpu_decoded,
                "mean_exposed_kv_transfer_ms": float(np.mean(exposed)) * 1e3 if exposed else 0.0,
            }
        )
        return out


@register
class GlitchesPolicy(EnginePolicy):
    """GLITCHES GPU–FPGA collaborative serving (GLITCHES §III, Figs. 3–4).

    Implemented as §III-C describes:

    - Every GPU and FPGA holds the whole model; GPUs (role ``prefill``) prefill in FP16
      with their runtime profile, FPGAs (role ``decode``) decode with theirs (FlightLLM
      W4A8 by default), one request at a time — the latency-sensitive batch-1 setting.
    - The KV cache is quantised on the GPU to the FPGA runtime's KV precision and sent
      GPU → host → FPGA HBM over each device's PCIe host link, layer by layer, overlapped
      with the prefill (Fig. 4): layer *i*'s transfer starts when its prefill is done, and
      the decode starts only when the last layer's KV (and the sampled first token) has
      arrived. The GPU frees the request's KV memory then.
    - Decode tasks go to idle FPGAs first-come-first-served. When every FPGA is busy and
      no prefill waits, a GPU decodes a waiting request itself, keeping its KV cache (no
      transfer); a waiting prefill pre-empts such a substitute decode at the next
      iteration boundary, and the GPU resumes it afterwards.
    - A prefill waits in the queue while the GPU lacks memory for its KV cache.
    - Each FPGA decode iteration adds the per-token logits → host → token round trip over
      the FPGA's PCIe link (the FPGA model's ``host_sampling_s``).
    - FPGA decode uses the §IV prefetch model with ratio ``prefetch_ratio`` (default 4).

    Assumptions where the paper is silent (deviations from nothing stated, but choices):

    - The prefill is split evenly over the layers for the pipeline (the LM head and the
      embedding are lumped in); KV quantisation time on the GPU is neglected.
    - A request whose decode cannot start on an FPGA at its prefill (every FPGA busy)
      waits with its KV on the GPU; when an FPGA frees up first, the whole KV is then sent
      (still layer-pipelined over the two hops, but no longer hidden behind a prefill).
    - A GPU reserves the FP16 KV of the prompt when the request streams to an FPGA, and of
      prompt plus output otherwise (it may have to decode it); an FPGA reserves the
      request's whole KV in its HBM region. Each PCIe link direction is a FIFO resource
      booked from its first to its last chunk; logits/token messages do not contend.
    - TTFT is the end of the GPU prefill (the first token is sampled from its logits); a
      GPU's own decode adds no host round trip (the GPU runtime profile includes sampling).
    - A paused GPU decode stays on its GPU (its KV cache is not moved to an FPGA).
    """

    name: ClassVar[str] = "glitches"
    summary: ClassVar[str] = (
        "GPU prefill, FPGA decode with layer-pipelined KV transfer over PCIe (GLITCHES §III)"
    )
    roles: ClassVar[tuple[RoleSpec, ...]] = (
        RoleSpec(
            "prefill", "GPUs that prefill (FP16) and decode when every FPGA is busy", ("gpu",)
        ),
        RoleSpec("decode", "FPGAs that decode one request at a time", ("fpga",), required=False),
    )
    single_node: ClassVar[bool] = True
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec(
            "prefetch_ratio",
            int,
            4,
            "FPGA data-prefetch ratio M (§IV): each memory instruction fetches the data of "
            "the next M compute instructions; 1 = plain FlightLLM",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "gpu_decode",
            bool,
            True,
            "let an idle GPU decode when every FPGA is busy and no prefill waits (§III-C)",
        ),
        OptionSpec(
            "tensor_parallel",
            int,
            1,
            "GPUs of the prefill role one prefill group's heads, KV heads and FFN widths are "
            "split across (two all-reduces per layer over the link); 1 = the paper's GPUs",
            minimum=1,
            maximum=64,
        ),
        OptionSpec(
            "link",
            str,
            "",
            "the catalog interconnect a prefill group's GPUs all-reduce over (nvlink4, "
            "pcie5-x16, …); required when tensor_parallel > 1",
            catalog="links",
        ),
    )

    @classmethod
    def check_system(cls, system: SystemSpec, model: ModelSpec) -> None:
        """A tensor-parallel prefill group: a degree that divides the model's heads, KV
        heads and FFN width, a link, GPU counts that are whole groups, and each GPU's
        share of the weights within its memory."""
        opts = cls.resolve_options(system.options)
        tp = int(opts["tensor_parallel"])
        if tp == 1:
            return
        for name, what in (
            ("n_heads", "attention heads"),
            ("n_kv_heads", "KV heads"),
            ("ffn_size", "FFN width"),
        ):
            size = getattr(model, name)
            if size % tp:
                raise SpecError(
                    "options.tensor_parallel",
                    f"{tp} does not divide {model.slug}'s {size} {what} ({name})",
                )
        if not opts["link"] and system.interconnect is None:
            raise SpecError("options.link", f"name the interconnect of the {tp}-GPU groups")
        for j, p in enumerate(system.devices):
            if p.device.kind is not DeviceKind.GPU:
                continue
            if p.count % tp:
                raise SpecError(
                    f"devices[{j}].count",
                    f"{p.count} GPUs do not form prefill groups of tensor_parallel = {tp}",
                )
            dm = build_device_model(p.device, p.runtime)
            need = dm.weights_bytes(shard_model(model, tp))
            if need >= dm.memory_capacity_bytes:
                raise CapacityError(
                    "options.tensor_parallel",
                    f"{model.slug} needs {need / 1e9:.1f} GB of weights per GPU at "
                    f"tensor_parallel {tp} but {p.device.slug} has "
                    f"{dm.memory_capacity_bytes / 1e9:.1f} GB; raise the degree",
                )

    @classmethod
    def unsearchable_option(cls, name: str, value: Any) -> str | None:
        """The planner's GLITCHES screen bounds one GPU per prefill unit."""
        if name == "tensor_parallel" and value != 1:
            return "the planner does not search tensor parallelism for glitches yet"
        return None

    @classmethod
    def screen_fit(
        cls, ctx: FitContext, sig: SignatureLike, options: dict[str, Any], tp: int | None
    ) -> None:
        """Build the scheduler on one device per role: its constructor checks every memory."""
        system = SystemSpec("fit", cls.name, ctx.placements(sig), options)
        cls().build_sim(system, ctx.model, ctx.requests)

    @classmethod
    def screen_bounds(
        cls,
        ctx: BoundContext,
        sig: SignatureLike,
        options: dict[str, Any],
        fitted: Any,
        cmax: int,
        tp: int | None,
    ) -> Bounds | None:
        """See :mod:`.screen`."""
        return screen.bounds(ctx, sig, options, cmax)

    def build_sim(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> GlitchesSim:
        """The scheduler for ``system`` on ``requests``, ready to :meth:`~GlitchesSim.run`."""
        opts = self.resolve_options(system.options)
        gpus_p: list[tuple[int, DevicePlacement]] = []
        fpgas_p: list[tuple[int, DevicePlacement]] = []
        for i, p in enumerate(system.devices):
            if p.role == "prefill" or (not p.role and p.device.kind is DeviceKind.GPU):
                if p.device.kind is not DeviceKind.GPU:
                    raise SpecError(f"devices[{i}].role", "the prefill role needs a GPU")
                gpus_p.append((i, p))
            elif p.role == "decode" or (not p.role and p.device.kind is DeviceKind.FPGA):
                if p.device.kind is not DeviceKind.FPGA:
                    raise SpecError(f"devices[{i}].role", "the decode role needs an FPGA")
                fpgas_p.append((i, p))
            else:
                raise SpecError(
                    f"devices[{i}].role", "GLITCHES roles are 'prefill' (GPU) or 'decode' (FPGA)"
                )
        if not gpus_p:
            raise SpecError("devices", "GLITCHES needs at least one GPU in the prefill role")
        prefetch = int(opts["prefetch_ratio"])

        def fpga_factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
            return self.device_models(device, runtime).with_settings({"prefetch_ratio": prefetch})

        tp = int(opts["tensor_parallel"])
        gpu_placements = [p for _, p in gpus_p]
        gpu_factory = self.device_models
        if tp > 1:
            self.check_system(system, model)
            link = resolve_link(system, opts)
            # one prefill unit per group of ``tp`` GPUs
            gpu_placements = [replace(p, count=p.count // tp) for p in gpu_placements]

            def gpu_factory(device: DeviceSpec, runtime: RuntimeProfile) -> DeviceModel:
                return ParallelGroup(self.device_models(device, runtime), tp, 1, link=link)

        gpus = build_units(
            gpu_placements,
            model,
            gpu_factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            placement_index=[i for i, _ in gpus_p],
        )
        fpgas = build_units(
            [p for _, p in fpgas_p],
            model,
            fpga_factory,
            exact=self.reference,
            timeline_cap=self.timeline_cap,
            step_overhead_s=lambda p, dm: dm.host_sampling_s(model),
            first_index=len(gpus),
            placement_index=[i for i, _ in fpgas_p],
        )
        kv_bits = {p.runtime.kv_bits for _, p in fpgas_p}
        if len(kv_bits) > 1:
            raise SpecError("devices", "all FPGAs of a GLITCHES system must share a KV precision")
        fpga_kv_bits = kv_bits.pop() if kv_bits else 16
        sim = GlitchesSim(
            requests,
            gpus,
            fpgas,
            fpga_kv_bits=fpga_kv_bits,
            gpu_decode=bool(opts["gpu_decode"]),
            reference=self.reference,
            audit=self.audit,
            progress=progress,
        )
        sim.extra["options"] = opts
        return sim

    def simulate(
        self,
        system: SystemSpec,
        model: ModelSpec,
        requests: RequestSet,
        progress: ProgressFn | None = None,
    ) -> SimOutput:
        """Run the scheduler on ``requests`` and return the raw outcome."""
        return self.build_sim(system, model, requests, progress).run()
