"""Fast-forward of runs of identical decode iterations.

Between two scheduling events a device decodes a fixed batch of ``B`` sequences; step ``k``
of the run sees ``K0 + k·B`` cached tokens, so its cost is ``f_B(K0 + k·B)`` for the device
model's per-step cost ``f_B``. The engine needs, for a run, the total time (and energy) of
``n`` steps and the number of steps that fit in a time budget — without calling the device
model once per step, so simulation cost grows with events, not with generated tokens.

Roofline cost models are piecewise affine in the cached-token count for a fixed batch
(sums of ``max`` of affine terms). :class:`DecodeCurve` therefore learns ``f_B`` as a set
of affine pieces, each *verified* by evaluating the model at its ends and at interior
points (relative agreement within :data:`AFFINE_RTOL`), and sums a run in closed form.
Where the model is not affine (e.g. an FPGA whose KV loads are tile-quantised, a
staircase in ``K``), pieces are split until short and short pieces are tabulated; once a
batch size has needed more than :data:`DENSE_AFTER_TABLES` tables or splits that were not
at a convex kink, it switches to *dense*
mode: the model is evaluated at every ``K`` a run touches (once per simulation — the
values are bounded by the context window, not by the number of requests) and runs are
summed from prefix sums per residue class ``K mod B``, in O(1) per run. Learned pieces
and tables are cached per batch size and reused by every later run.

``convex=True`` (a device family that declares its decode cost convex in the cached
tokens, for a scheduler that asks for it) verifies a piece at its ends' neighbours only —
for a convex cost, equal end slopes force the chord — instead of also at interior probes.

``exact=True`` turns all of this off and evaluates every step (the reference mode that the
fast path is tested against).
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections.abc import Callable, Iterable

import numpy as np

from simulations.core.errors import SpecError

#: Relative tolerance within which a model value must match its affine piece.
AFFINE_RTOL = 1e-11
#: Pieces shorter than this (in cached tokens) are not split further but tabulated.
MIN_SPAN = 32
#: A batch size whose cost needed more tables or non-convex splits than this is summed
#: from dense prefix sums.
DENSE_AFTER_TABLES = 6

#: Interior points checked before a range is accepted as one affine piece.
PROBES = 24
_PROBE_FRACTIONS = tuple(((i + 1) * 0.6180339887498949) % 1.0 for i in range(PROBES))

StepFn = Callable[[int, int], tuple[float, float]]
#: ``steps_fn(batch, kv_tokens_array) -> (seconds_array, joules_array)``: many steps of one
#: batch size at once, each value equal to ``step_fn``'s.
StepsFn = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]


class _Piece:
    """``f(K) = a + b·K`` (seconds and joules) for integer ``K`` in ``[lo, hi]``, or a table."""

    __slots__ = ("a_j", "a_s", "b_j", "b_s", "hi", "lo", "table")

    def __init__(self, lo: int, hi: int) -> None:
        self.lo = lo
        self.hi = hi
        self.a_s = self.b_s = self.a_j = self.b_j = 0.0
        self.table: dict[int, tuple[float, float]] | None = None


class _Dense:
    """Values of ``f_B`` at ``K = r + j·B`` for ``j`` in ``[lo, lo + len)``, as prefix sums
    (``pre_s[i]`` = sum of the first ``i`` values)."""

    __slots__ = ("lo", "pre_j", "pre_s", "vals")

    def __init__(self) -> None:
        self.lo = 0
        self.vals: list[tuple[float, float]] = []
        self.pre_s: list[float] = [0.0]
        self.pre_j: list[float] = [0.0]

    def _rebuild(self) -> None:
        s = j = 0.0
        pre_s = [0.0]
        pre_j = [0.0]
        for vs, vj in self.vals:
            s += vs
            j += vj
            pre_s.append(s)
            pre_j.append(j)
        self.pre_s = pre_s
        self.pre_j = pre_j


class DecodeCurve:
    """Per-step decode cost of one device as a function of batch and cached tokens.

    ``step_fn(batch, kv_tokens) -> (seconds, joules)`` is the device model's cost of one
    iteration. All sums are over steps ``k = 0 .. n-1`` of a run starting at ``K0`` cached
    tokens with ``batch`` sequences, i.e. at ``K = K0 + k·batch``.
    """

    def __init__(
        self,
        step_fn: StepFn,
        *,
        exact: bool = False,
        steps_fn: StepsFn | None = None,
        convex: bool = False,
    ) -> None:
        self._fn = step_fn
        self._many = steps_fn
        #: The cost is known to be convex in the cached tokens for every batch size (a sum
        #: of roofline maxima of affine terms): a range whose end slopes equal its chord is
        #: affine, so pieces are verified at their ends' neighbours only.
        self.convex = convex
        #: The most cached tokens a run may reach (the scheduler's KV pool, in tokens): a
        #: convex curve learns each batch size up to it at once. 0: no such learning.
        self.kv_limit = 0
        self.exact = exact
        self._pieces: dict[int, list[_Piece]] = {}
        self._los: dict[int, list[int]] = {}
        self._tables: dict[int, int] = {}
        self._dense: dict[tuple[int, int], _Dense] = {}
        self._memo: dict[tuple[int, int], tuple[float, float]] = {}
        self.evaluations = 0

    # -- model evaluations ---------------------------------------------------------------

    def step(self, batch: int, kv_tokens: int) -> tuple[float, float]:
        """The model's cost of one step (always evaluated, never approximated)."""
        self.evaluations += 1
        s, j = self._fn(batch, kv_tokens)
        if not (math.isfinite(s) and s > 0 and math.isfinite(j) and j >= 0):
            raise ValueError(f"device model returned a bad step cost ({s} s, {j} J)")
        return s, j

    def _prefetch(self, batch: int, ks: Iterable[int]) -> None:
        """Evaluate the model at every ``ks`` not memoised yet in one vectorised call (when
        the curve has a ``steps_fn``): learning a piece reads its ends and probes anyway,
        and one array evaluation costs about as much as one scalar one. The values are the
        scalar ones, so what the curve learns does not change."""
        if self._many is None:
            return
        memo = self._memo
        todo = sorted({k for k in ks if (batch, k) not in memo})
        if len(todo) < 2:
            return
        s_arr, j_arr = self._many(batch, np.array(todo, dtype=np.int64))
        if not (
            np.all(np.isfinite(s_arr))
            and np.all(s_arr > 0)
            and np.all(np.isfinite(j_arr))
            and np.all(j_arr >= 0)
        ):
            bad = next(
                i
                for i, (sv, jv) in enumerate(zip(s_arr.tolist(), j_arr.tolist(), strict=True))
                if not (math.isfinite(sv) and sv > 0 and math.isfinite(jv) and jv >= 0)
            )
            raise ValueError(
                f"device model returned a bad step cost ({s_arr[bad]} s, {j_arr[bad]} J)"
            )
        self.evaluations += len(todo)
        for k, sv, jv in zip(todo, s_arr.tolist(), j_arr.tolist(), strict=True):
            memo[(batch, k)] = (sv, jv)

    # -- piece learning ------------------------------------------------------------------

    def _fits(self, batch: int, a_s: float, b_s: float, a_j: float, b_j: float, k: int) -> bool:
        s, j = self._val(batch, k)
        ps = a_s + b_s * k
        pj = a_j + b_j * k
        return abs(s - ps) <= AFFINE_RTOL * abs(s) and abs(j - pj) <= AFFINE_RTOL * abs(j)

    def _val(self, batch: int, k: int) -> tuple[float, float]:
        """A model value, memoised (learning pieces revisits ends and neighbours)."""
        key = (batch, k)
        v = self._memo.get(key)
        if v is None:
            v = self._memo[key] = self.step(batch, k)
        return v

    def _new_piece(self, batch: int, lo: int, hi: int) -> list[_Piece]:
        """Verified pieces covering exactly ``[lo, hi]``.

        A range that is not affine is split where the tangents at its ends cross when the
        cost bends upwards there (the kink of a roofline ``max``, found in one step), else
        in the middle. Short ranges are verified point by point, or tabulated.
        """
        span = hi - lo
        if span < MIN_SPAN:
            probes: tuple[int, ...] | range = range(lo + 1, hi)
        else:
            # The neighbours of both ends pin the slopes there: for a convex cost (a sum of
            # roofline maxima) end slopes equal to the chord's already force it affine. Costs
            # need not be convex (tile staircases, regime-dependent power), so interior points
            # spread at irregular (golden-ratio) fractions of the span catch jumps and dips
            # wider than about span / PROBES without aliasing with periodic staircases.
            probes = (
                (lo + 1, hi - 1)
                if self.convex
                else (lo + 1, hi - 1, *(lo + 1 + int(f * (span - 2)) for f in _PROBE_FRACTIONS))
            )
        if self._many is not None and span > 0:
            # The ends and every probe in one array call: a call costs about the same for 4
            # points as for 26, and the engine learns thousands of pieces (one set per batch
            # size), so fetching the probes of a range that then fails at its ends is cheaper
            # than a second call for every range that passes. Values are the scalar ones.
            self._prefetch(batch, (lo, hi, *probes))
        s0, j0 = self._val(batch, lo)
        if span == 0:
            p = _Piece(lo, hi)
            p.a_s, p.a_j = s0, j0
            return [p]
        s1, j1 = self._val(batch, hi)
        b_s = (s1 - s0) / span
        b_j = (j1 - j0) / span
        a_s = s0 - b_s * lo
        a_j = j0 - b_j * lo
        if all(self._fits(batch, a_s, b_s, a_j, b_j, k) for k in probes):
            p = _Piece(lo, hi)
            p.a_s, p.b_s, p.a_j, p.b_j = a_s, b_s, a_j, b_j
            return [p]
        if span < MIN_SPAN:
            p = _Piece(lo, hi)
            p.table = {}
            self._tables[batch] = self._tables.get(batch, 0) + 1
            return [p]
        cut = -1
        sl = self._val(batch, lo + 1)[0] - s0
        sr = s1 - self._val(batch, hi - 1)[0]
        if sr > sl:
            x = (s1 - s0 - sr * hi + sl * lo) / (sl - sr)
            # A tangent crossing hard against an end is no convex kink to cut at (a jump, a
            # dip): cutting there would shave one token per level and recurse span-deep.
            margin = span // 16
            if math.isfinite(x) and lo + margin <= math.floor(x) <= hi - 1 - margin:
                cut = math.floor(x)
        if cut < 0:
            # Not a convex kink: a rough stretch, counted towards dense mode.
            self._tables[batch] = self._tables.get(batch, 0) + 1
            cut = lo + span // 2
        return self._new_piece(batch, lo, cut) + self._new_piece(batch, cut + 1, hi)

    def _extend(self, batch: int, piece: _Piece, hi: int) -> bool:
        """Try to extend an affine ``piece`` up to ``hi`` (verified on the new part)."""
        if piece.table is not None:
            return False
        old = piece.hi
        span = hi - old
        if self.convex:
            # The piece fits at its own ends and their neighbours: for a convex cost, the new
            # end and its neighbour on the same line force every step between onto it.
            probes: tuple[int, ...] = (hi, hi - 1)
        else:
            probes = (
                hi,
                hi - 1,
                *(old + 1 + int(f * max(span - 1, 0)) for f in _PROBE_FRACTIONS),
            )
        a_s, b_s, a_j, b_j = piece.a_s, piece.b_s, piece.a_j, piece.b_j
        # One array call for the new end, its neighbour and the probes (as in _new_piece).
        self._prefetch(batch, probes)
        if all(self._fits(batch, a_s, b_s, a_j, b_j, k) for k in probes):
            piece.hi = hi
            return True
        return False

    def _cover(self, batch: int, lo: int, hi: int) -> None:
        """Make sure pieces cover every integer of ``[lo, hi]``.

        A convex curve learns a batch size's whole range ``[0, kv_limit]`` the first time
        it is asked for it: its few pieces (one per roofline regime) cost a handful of
        evaluations, and later runs of that batch size find them already there."""
        if self.convex and hi < self.kv_limit and not self._pieces.get(batch):
            # The model may refuse the far end (memory): then learn what is asked only.
            with contextlib.suppress(SpecError):
                self._cover_range(batch, 0, self.kv_limit)
        self._cover_range(batch, lo, hi)

    def _cover_range(self, batch: int, lo: int, hi: int) -> None:
        pieces = self._pieces.setdefault(batch, [])
        los = self._los.setdefault(batch, [])
        k = lo
        while k <= hi:
            i = bisect.bisect_right(los, k) - 1
            if i >= 0 and pieces[i].hi >= k:
                k = pieces[i].hi + 1
                continue
            # Gap starts at k; it ends before the next piece or at hi.
            nxt = los[i + 1] if i + 1 < len(los) else None
            gap_hi = hi if nxt is None else min(hi, nxt - 1)
            if i >= 0 and pieces[i].hi == k - 1 and self._extend(batch, pieces[i], gap_hi):
                k = gap_hi + 1
                continue
            new = self._new_piece(batch, k, gap_hi)
            at = i + 1
            pieces[at:at] = new
            los[at:at] = [p.lo for p in new]
            k = gap_hi + 1

    # -- sums over runs ------------------------------------------------------------------

    def _single(self, batch: int, k0: int, n: int) -> _Piece | None:
        """The affine piece covering the whole run, if one does (fast path; the sums are the
        same expressions as the general path's single segment, so results are identical)."""
        los = self._los.get(batch)
        if not los:
            return None
        i = bisect.bisect_right(los, k0) - 1
        if i < 0:
            return None
        p = self._pieces[batch][i]
        if p.table is None and k0 + (n - 1) * batch <= p.hi:
            return p
        return None

    def next_boundary(self, batch: int, k0: int, n: int, elapsed: float) -> tuple[int, float]:
        """The first step count ``k`` in ``[1, n]`` whose run time exceeds ``elapsed`` (the
        next iteration boundary after ``elapsed`` into the run), and that time; ``n`` and the
        run's total when the run ends first."""
        one = None if self.exact or self._is_dense(batch) else self._single(batch, k0, n)
        if one is not None:
            # Inline closed form on one affine piece (the engine asks this for every unit
            # at every arrival); the expressions equal _piece_sum's bit for bit.
            a_s, b_s = one.a_s, one.b_s
            total = n * a_s + b_s * (n * k0 + batch * (n * (n - 1) // 2))
            if total <= elapsed:
                return n, total
            if b_s != 0.0:
                qa = b_s * batch / 2.0
                qb = a_s + b_s * k0 - qa
                disc = qb * qb + 4.0 * qa * elapsed
                guess = (-qb + math.sqrt(max(disc, 0.0))) / (2.0 * qa)
            else:
                guess = elapsed / a_s
            k = int(min(max(math.floor(guess), 0), n - 1)) + 1
            tk = k * a_s + b_s * (k * k0 + batch * (k * (k - 1) // 2))
            while k > 1:
                j = k - 1
                tj = j * a_s + b_s * (j * k0 + batch * (j * (j - 1) // 2))
                if tj <= elapsed:
                    break
                k, tk = j, tj
            while k < n and tk <= elapsed:
                k += 1
                tk = k * a_s + b_s * (k * k0 + batch * (k * (k - 1) // 2))
            return k, tk
        if self.exact or self._is_dense(batch):
            m, t = self.steps_within(batch, k0, n, elapsed)
            if m >= n:
                return n, t
            k = m + 1
            tk = self.run_cost(batch, k0, k)[0]
            while k < n and tk <= elapsed:
                k += 1
                tk = self.run_cost(batch, k0, k)[0]
            return k, tk
        # One pass over the segments; t + partial sum equals run_cost's accumulation.
        t = 0.0
        for p, first, cnt in self._segments(batch, k0, n):
            seg = self._piece_sum(p, batch, k0, first, cnt)[0]
            if t + seg <= elapsed:
                t += seg
                continue
            j = self._solve(p, batch, k0, first, cnt, elapsed - t) + 1
            tk = t + self._piece_sum(p, batch, k0, first, j)[0]
            while j < cnt and tk <= elapsed:
                j += 1
                tk = t + self._piece_sum(p, batch, k0, first, j)[0]
            if tk > elapsed:
                return first + j, tk
            t += seg
        return n, t

    def _segments(self, batch: int, k0: int, n: int) -> list[tuple[_Piece, int, int]]:
        """Split steps ``0..n-1`` into (piece, first step, step count) runs."""
        last = k0 + (n - 1) * batch
        self._cover(batch, k0, last)
        pieces = self._pieces[batch]
        los = self._los[batch]
        out: list[tuple[_Piece, int, int]] = []
        step = 0
        i = bisect.bisect_right(los, k0) - 1
        while step < n:
            k = k0 + step * batch
            while pieces[i].hi < k:
                i += 1
            p = pieces[i]
            cnt = min(n - step, (p.hi - k) // batch + 1)
            out.append((p, step, cnt))
            step += cnt
        return out

    def _piece_sum(
        self, p: _Piece, batch: int, k0: int, first: int, cnt: int
    ) -> tuple[float, float]:
        if p.table is not None:
            s_tot = j_tot = 0.0
            if self._many is not None:
                self._prefetch(
                    batch,
                    (
                        k0 + i * batch
                        for i in range(first, first + cnt)
                        if k0 + i * batch not in p.table
                    ),
                )
            for i in range(first, first + cnt):
                k = k0 + i * batch
                v = p.table.get(k)
                if v is None:
                    v = p.table[k] = self._val(batch, k)
                s_tot += v[0]
                j_tot += v[1]
            return s_tot, j_tot
        # sum of K over the steps: cnt·k0 + batch·(first·cnt + cnt(cnt-1)/2)
        ksum = cnt * k0 + batch * (first * cnt + cnt * (cnt - 1) // 2)
        return cnt * p.a_s + p.b_s * ksum, cnt * p.a_j + p.b_j * ksum

    # -- dense mode ----------------------------------------------------------------------

    def _is_dense(self, batch: int) -> bool:
        return self._tables.get(batch, 0) > DENSE_AFTER_TABLES

    def _dense_span(self, batch: int, k0: int, n: int) -> tuple[_Dense, int]:
        """The dense table of ``k0``'s residue class covering the run, and the run's offset."""
        r = k0 % batch
        j0 = k0 // batch
        j1 = j0 + n  # exclusive
        d = self._dense.get((batch, r))
        if d is None:
            d = self._dense[(batch, r)] = _Dense()
            d.lo = j0
        if j0 < d.lo:
            self._prefetch(batch, (r + j * batch for j in range(j0, d.lo)))
            front = [self._dense_val(batch, r + j * batch) for j in range(j0, d.lo)]
            d.vals[0:0] = front
            d.lo = j0
            d._rebuild()
        hi = d.lo + len(d.vals)
        if j1 > hi:
            self._prefetch(batch, (r + j * batch for j in range(hi, j1)))
            new = [self._dense_val(batch, r + j * batch) for j in range(hi, j1)]
            d.vals.extend(new)
            s_acc, j_acc = d.pre_s[-1], d.pre_j[-1]
            for vs, vj in new:
                s_acc += vs
                j_acc += vj
                d.pre_s.append(s_acc)
                d.pre_j.append(j_acc)
        return d, j0 - d.lo

    def _dense_val(self, batch: int, k: int) -> tuple[float, float]:
        """A value for a dense table: prefetched (and dropped from the memo, which dense
        tables replace), else evaluated."""
        v = self._memo.pop((batch, k), None) if self._many is not None else None
        return v if v is not None else self.step(batch, k)

    def _dense_cost(self, batch: int, k0: int, n: int) -> tuple[float, float]:
        d, a = self._dense_span(batch, k0, n)
        return d.pre_s[a + n] - d.pre_s[a], d.pre_j[a + n] - d.pre_j[a]

    def _dense_within(self, batch: int, k0: int, n: int, budget: float) -> tuple[int, float]:
        d, a = self._dense_span(batch, k0, n)
        pre = d.pre_s
        base = pre[a]
        m = bisect.bisect_right(pre, base + budget, a, a + n + 1) - 1 - a
        m = max(0, min(m, n))
        while m > 0 and pre[a + m] - base > budget:
            m -= 1
        while m < n and pre[a + m + 1] - base <= budget:
            m += 1
        return m, pre[a + m] - base

    # -- public sums ---------------------------------------------------------------------

    def run_cost(self, batch: int, k0: int, n: int) -> tuple[float, float]:
        """Seconds and joules of ``n`` steps starting at ``k0`` cached tokens."""
        if n <= 0:
            return 0.0, 0.0
        if self.exact:
            s_tot = j_tot = 0.0
            for i in range(n):
                s, j = self.step(batch, k0 + i * batch)
                s_tot += s
                j_tot += j
            return s_tot, j_tot
        if self._is_dense(batch):
            return self._dense_cost(batch, k0, n)
        one = self._single(batch, k0, n)
        if one is not None:
            return self._piece_sum(one, batch, k0, 0, n)
        s_tot = j_tot = 0.0
        for p, first, cnt in self._segments(batch, k0, n):
            s, j = self._piece_sum(p, batch, k0, first, cnt)
            s_tot += s
            j_tot += j
        return s_tot, j_tot

    def steps_within(self, batch: int, k0: int, n: int, budget: float) -> tuple[int, float]:
        """The most steps ``m <= n`` whose total time is ``<= budget``, and that time."""
        if n <= 0 or budget < 0:
            return 0, 0.0
        if self.exact:
            t = 0.0
            for i in range(n):
                s, _ = self.step(batch, k0 + i * batch)
                if t + s > budget:
                    return i, t
                t += s
            return n, t
        if self._is_dense(batch):
            return self._dense_within(batch, k0, n, budget)
        one = self._single(batch, k0, n)
        if one is not None:
            total = self._piece_sum(one, batch, k0, 0, n)[0]
            if total <= budget:
                return n, total
            m = self._solve(one, batch, k0, 0, n, budget)
            return m, (self._piece_sum(one, batch, k0, 0, m)[0] if m else 0.0)
        t = 0.0
        for p, first, cnt in self._segments(batch, k0, n):
            s, _ = self._piece_sum(p, batch, k0, first, cnt)
            if t + s <= budget:
                t += s
                continue
            # The budget ends inside this segment: find the step count m in [0, cnt).
            m = self._solve(p, batch, k0, first, cnt, budget - t)
            s_m, _ = self._piece_sum(p, batch, k0, first, m) if m else (0.0, 0.0)
            return first + m, t + s_m
        return n, t

    def _solve(self, p: _Piece, batch: int, k0: int, first: int, cnt: int, budget: float) -> int:
        """Largest m < cnt with sum of the first m steps of the segment <= budget."""
        if p.table is None and p.b_s != 0.0:
            # m·(a + b(k0 + B·first)) + b·B·m(m-1)/2 = budget  →  quadratic in m
            c1 = p.a_s + p.b_s * (k0 + batch * first)
            qa = p.b_s * batch / 2.0
            qb = c1 - qa
            disc = qb * qb + 4.0 * qa * budget
            guess = (-qb + math.sqrt(max(disc, 0.0))) / (2.0 * qa) if qa != 0 else budget / c1
            m = int(min(max(math.floor(guess), 0), cnt - 1))
        elif p.table is None:
            step_s = p.a_s + p.b_s * (k0 + batch * first)
            m = int(min(max(math.floor(budget / step_s), 0), cnt - 1))
        else:
            m = 0
            t = 0.0
            while m < cnt - 1:
                s, _ = self._piece_sum(p, batch, k0, first + m, 1)
                if t + s > budget:
                    break
                t += s
                m += 1
            return m
        # Correct the closed-form guess against the exact segment sums.
        while m > 0 and self._piece_sum(p, batch, k0, first, m)[0] > budget:
            m -= 1
        while m + 1 < cnt and self._piece_sum(p, batch, k0, first, m + 1)[0] <= budget:
            m += 1
        return m
