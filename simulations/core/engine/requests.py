"""Requests drawn from a workload: arrival times and prompt/output lengths.

Every system of a scenario must see the same requests, so they are drawn from the workload's
own seed (``numpy.random.default_rng``-style streams derived from ``workload.seed``), never
from a policy's generator. Lengths and arrivals use independent child streams, so changing
the arrival process does not change the lengths drawn.

Conventions (documented here because every policy relies on them):

- ``output_tokens`` counts *generated* tokens including the first one, which the prefill
  produces; a request therefore runs ``output_tokens - 1`` decode iterations.
- A workload's shared prefix (a system prompt of ``P`` tokens) is prepended to the drawn
  prompt of each request that carries it (:attr:`RequestSet.prefix_tokens`).
- A request whose prompt plus output exceeds the model's context window is clipped (the
  output first to ``max_context - 1``, then the prompt to what is left), as a serving stack
  that truncates prompts would; how many were clipped is reported in the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulations.core.errors import SpecError
from simulations.core.spec import (
    ArrivalKind,
    LengthDist,
    LengthDistKind,
    ModelSpec,
    WorkloadSpec,
)

#: Longest prompt or output a workload may ask for (far above any context window).
MAX_LENGTH = 10_000_000


@dataclass(frozen=True)
class RequestSet:
    """The requests of one workload, sorted by arrival (ties keep their draw order).

    Arrays are read-only numpy arrays of equal length: ``arrival_s`` (float64, seconds),
    ``input_tokens`` and ``output_tokens`` (int64, after context clipping). ``clipped`` is
    the number of requests whose lengths were clipped to the model's context window.
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    clipped: int = 0
    #: Tokens of the workload's shared prefix at the start of each prompt (0: the request
    #: does not share it); ``None`` when the workload declares no shared prefix.
    prefix_tokens: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise SpecError("workload", "arrival and length arrays differ in length")
        if self.prefix_tokens is not None and len(self.prefix_tokens) != n:
            raise SpecError("workload.shared_prefix", "one prefix length per request")
        for arr in (self.arrival_s, self.input_tokens, self.output_tokens, self.prefix_tokens):
            if arr is not None:
                arr.setflags(write=False)

    def __len__(self) -> int:
        return len(self.arrival_s)

    @classmethod
    def from_lists(
        cls,
        arrival_s: list[float] | np.ndarray,
        input_tokens: list[int] | np.ndarray,
        output_tokens: list[int] | np.ndarray,
    ) -> RequestSet:
        """Build a request set directly (tests, reproductions); validates the lengths."""
        arr = np.asarray(arrival_s, dtype=np.float64).copy()
        inp = np.asarray(input_tokens, dtype=np.int64).copy()
        out = np.asarray(output_tokens, dtype=np.int64).copy()
        if len(arr) == 0:
            raise SpecError("workload.requests", "must be at least 1")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise SpecError("workload.arrival", "arrival times must be finite and >= 0")
        if np.any(inp < 1):
            raise SpecError("workload.input_tokens", "every prompt needs at least 1 token")
        if np.any(out < 1):
            raise SpecError("workload.output_tokens", "every request generates at least 1 token")
        order = np.argsort(arr, kind="stable")
        return cls(arr[order], inp[order], out[order])


def _draw_lengths(
    dist: LengthDist, n: int, rng: np.random.Generator, path: str, trace_col: tuple[int, ...] | None
) -> np.ndarray:
    kind = LengthDistKind(dist.kind)
    if kind is LengthDistKind.FIXED:
        if dist.value is None or dist.value < 1:
            raise SpecError(f"{path}.value", "a fixed length needs a value of at least 1")
        return np.full(n, int(dist.value), dtype=np.int64)
    if kind is LengthDistKind.UNIFORM:
        if dist.low is None or dist.high is None:
            raise SpecError(path, "a uniform length needs low and high")
        if dist.low < 1 or dist.high < dist.low:
            raise SpecError(f"{path}.high", "needs 1 <= low <= high")
        return rng.integers(int(dist.low), int(dist.high) + 1, size=n, dtype=np.int64)
    if kind is LengthDistKind.LOGNORMAL:
        if dist.median is None or dist.sigma is None:
            raise SpecError(path, "a lognormal length needs median and sigma")
        if not (dist.median >= 1 and np.isfinite(dist.median)):
            raise SpecError(f"{path}.median", "must be a finite number >= 1")
        if not (dist.sigma > 0 and np.isfinite(dist.sigma)):
            raise SpecError(f"{path}.sigma", "must be a finite positive number")
        raw = rng.lognormal(mean=float(np.log(dist.median)), sigma=float(dist.sigma), size=n)
        low = 1 if dist.low is None else max(1, int(dist.low))
        high = MAX_LENGTH if dist.high is None else int(dist.high)
        if high < low:
            raise SpecError(f"{path}.high", "must be at least low")
        return np.clip(np.rint(raw), low, high).astype(np.int64)
    if trace_col is None:
        raise SpecError(path, "lengths from a trace need the workload's trace")
    if n > len(trace_col):
        raise SpecError(
            "workload.requests", f"asks for {n} requests but the trace has {len(trace_col)} rows"
        )
    return np.asarray(trace_col[:n], dtype=np.int64)


def _draw_arrivals(workload: WorkloadSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    arrival = workload.arrival
    kind = ArrivalKind(arrival.kind)
    if kind is ArrivalKind.CLOSED:
        return np.zeros(n)
    if kind is ArrivalKind.POISSON:
        rate = arrival.rate_per_s
        if rate is None or not np.isfinite(rate) or rate <= 0:
            raise SpecError("workload.arrival.rate_per_s", "a Poisson arrival needs a rate > 0")
        return np.cumsum(rng.exponential(1.0 / rate, size=n))
    if workload.trace is None:
        raise SpecError("workload.arrival", "trace arrivals need the workload's trace")
    scale = arrival.time_scale
    if not np.isfinite(scale) or scale <= 0:
        raise SpecError("workload.arrival.time_scale", "must be a finite number > 0")
    rows = workload.trace.arrival_s
    if n > len(rows):
        raise SpecError(
            "workload.requests", f"asks for {n} requests but the trace has {len(rows)} rows"
        )
    return np.asarray(rows[:n], dtype=np.float64) * scale


def generate_requests(workload: WorkloadSpec, model: ModelSpec | None = None) -> RequestSet:
    """Draw the workload's requests from ``workload.seed`` (identical for every system).

    With ``model`` given, lengths are clipped to its context window (see the module notes).
    Trace-driven lengths and arrivals take the trace's first ``workload.requests`` rows.
    """
    n = workload.requests
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpecError("workload.requests", "must be a whole number >= 1")
    # Independent streams per quantity: changing the arrival process keeps the lengths,
    # and declaring a shared prefix changes neither (spawned children do not depend on how
    # many are spawned).
    s_in, s_out, s_arr, s_pfx = np.random.SeedSequence(workload.seed).spawn(4)
    trace = workload.trace
    inp = _draw_lengths(
        workload.input_tokens,
        n,
        np.random.default_rng(s_in),
        "workload.input_tokens",
        trace.input_tokens if trace else None,
    )
    out = _draw_lengths(
        workload.output_tokens,
        n,
        np.random.default_rng(s_out),
        "workload.output_tokens",
        trace.output_tokens if trace else None,
    )
    arr = _draw_arrivals(workload, n, np.random.default_rng(s_arr))
    shared: np.ndarray | None = None
    prefix = workload.shared_prefix
    if prefix is not None:
        # Which requests carry the system prompt: a Bernoulli(fraction) draw per request
        # from the workload's own stream, so every system sees the same ones.
        shared = np.random.default_rng(s_pfx).random(n) < prefix.fraction
        inp = inp + np.where(shared, prefix.tokens, 0)
    clipped = 0
    if model is not None:
        ctx = model.max_context
        too_long = inp + out > ctx
        clipped = int(np.count_nonzero(too_long))
        if clipped:
            out = np.minimum(out, ctx - 1)
            inp = np.minimum(inp, ctx - out)
    if shared is None:
        base = RequestSet.from_lists(arr, inp, out)
        return RequestSet(base.arrival_s, base.input_tokens, base.output_tokens, clipped)
    assert prefix is not None
    # The prefix is the start of the prompt; at least one prompt token is always prefilled
    # (a clipped prompt keeps what is left of it).
    pfx = np.where(shared, np.minimum(prefix.tokens, inp - 1), 0).astype(np.int64)
    base = RequestSet.from_lists(arr, inp, out)
    order = np.argsort(np.asarray(arr, dtype=np.float64), kind="stable")
    return RequestSet(base.arrival_s, base.input_tokens, base.output_tokens, clipped, pfx[order])
