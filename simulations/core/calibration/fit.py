"""Fit a GPU stack's kernel-class parameters to a measurement set (bounded least squares).

The stacks and devices fitted are those of the families that cost their passes with the
kernel-class model (:attr:`~simulations.core.devices.base.DeviceModel.kernel_calibration`:
the GPUs). The model is :mod:`simulations.core.devices.gpu_kernels`: every parameter belongs to the
stack and is a physical quantity with physical bounds (efficiencies in (0, 1], token counts
and latencies ≥ 0), so a fit is a statement about the stack that transfers to other GPUs
through their datasheets. :func:`fit_profile` is the service; the ``calibrate`` command and
the Django side call it.

*Rows.* An operator row is predicted as the kernel's time on one layer (the sum of the graph
operators it runs, each ``max(compute, memory, floor)``); an end-to-end row as the whole
pass of the device's family (:class:`~simulations.core.devices.gpu.GpuModel`: the layers'
kernels plus the embedding, LM head, sampler and host step).

*Residuals.* ``log(predicted / measured)`` for rows of at least :data:`SMALL_MS`; smaller rows
(kernels that the source quantises to 1 µs) enter as ``(predicted − measured) /``
:data:`SMALL_MS` — their absolute error, on the scale where a 20 µs row's relative error
would sit — and are reported by absolute error, not in MAPE.

*What is fitted.* Parameters the rows constrain: for operator rows those of the kernel
classes present (GEMM: ``compute_eff``, ``bw_eff``, ``gemm_n_half``; each elementwise
class's bandwidth; each attention kernel's pair; the floor, from the rows under
:data:`SMALL_MS` — only a small kernel can sit on it); for end-to-end rows
:data:`END_TO_END_FREE` (the efficiencies that dominate a pass and the host step). The rest
keep the base profile's values (reported with ``fitted: false``). The host-side costs are
never fitted to operator rows: the kernels' CUDA time does not contain them.

*Refusals* (:class:`FitRefusedError`). Under-determined: a family of parameters (the kernel
class they belong to) constrained by fewer independent shapes than it has parameters, or a
singular Jacobian at the solution (parameters the rows cannot tell apart, named).
Unphysical: a row faster than the device's datasheet allows at 100 % of peak (an efficiency
above 1), an efficiency or shape parameter that ends on a physical bound, a prediction that
is not a positive finite time.

*Hold-out.* For each group (operator rows: a token count — decode rows carry the batch size
there; end-to-end: a prefill size or a decode batch size) the rows outside it are refitted
from the same start and the group is predicted. Where the remaining groups cannot determine
a family's shape parameters, those are held at their neutral prior (:data:`PRIOR`: no
saturation, no fixed latency) and listed; a group whose kernels no remaining row constrains
is reported as not predictable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulations.core.catalog import Catalog
from simulations.core.devices import calibrated_kinds, device_family
from simulations.core.devices.gpu_kernels import (
    ALL_PARAMS,
    FIELD_PARAMS,
    KERNEL_PARAMS,
    MEASURED_KERNELS,
    KernelClass,
    KernelCosts,
    KernelParams,
    layer_extra_ops,
    op_features,
    runtime_values,
)
from simulations.core.errors import CapacityError, CoreError, SpecError
from simulations.core.graph import Op, Precision, decode_graph, prefill_graph
from simulations.core.spec import DeviceSpec, ModelSpec, RuntimeProfile

from .measurements import (
    CellError,
    MeasurementError,
    MeasurementFormat,
    MeasurementRow,
    MeasurementSet,
)

#: Rows shorter than this (ms) are quantised in the source: absolute error, not in MAPE.
SMALL_MS = 0.020
#: Where a fit starts (every fit, whatever the base profile holds: a refit is reproducible).
START: Mapping[str, float] = {
    "compute_eff": 0.5,
    "bw_eff": 0.5,
    "gemm_n_half": 16.0,
    "norm_bw_eff": 0.5,
    "rope_bw_eff": 0.5,
    "act_bw_eff": 0.5,
    "copy_bw_eff": 0.5,
    "kernel_floor_us": 2.0,
    "attn_prefill_eff": 0.5,
    "attn_prefill_n_half": 16.0,
    "attn_decode_bw_eff": 0.5,
    "attn_decode_fixed_us": 2.0,
    "layer_fixed_us": 1.0,
    "host_step_us": 100.0,
    "host_step_per_seq_us": 10.0,
}
#: A second start for the shape parameters: the model's max() makes the cost piecewise, so a
#: saturation can settle in a local minimum on either side of a kernel's ridge; every fit
#: runs from both starts and keeps the lower cost.
START_HIGH: Mapping[str, float] = {"gemm_n_half": 256.0, "attn_prefill_n_half": 1024.0}
#: Neutral values of the shape parameters, held in a hold-out refit the remaining groups
#: cannot determine (no saturation, no fixed latency).
PRIOR: Mapping[str, float] = {
    "gemm_n_half": 0.0,
    "attn_prefill_n_half": 0.0,
    "attn_decode_fixed_us": 0.0,
    "kernel_floor_us": 0.0,
}
#: Parameter families of operator rows, by kernel class, most fundamental first.
FAMILIES: Mapping[KernelClass, tuple[str, ...]] = {
    KernelClass.GEMM: ("compute_eff", "bw_eff", "gemm_n_half"),
    KernelClass.NORM: ("norm_bw_eff",),
    KernelClass.ROPE: ("rope_bw_eff",),
    KernelClass.ACT: ("act_bw_eff",),
    KernelClass.COPY: ("copy_bw_eff",),
    KernelClass.ATTN_PREFILL: ("attn_prefill_eff", "attn_prefill_n_half"),
    KernelClass.ATTN_DECODE: ("attn_decode_bw_eff", "attn_decode_fixed_us"),
}
FLOOR_FAMILY = ("kernel_floor_us",)
#: What end-to-end rows fit by default, most fundamental first.
END_TO_END_FREE = (
    "bw_eff",
    "compute_eff",
    "attn_decode_bw_eff",
    "attn_prefill_eff",
    "host_step_us",
    "host_step_per_seq_us",
)
_E2E_TOUCH = {
    "prefill": frozenset(
        {"compute_eff", "bw_eff", "attn_prefill_eff", "host_step_us", "host_step_per_seq_us"}
    ),
    "decode": frozenset({"bw_eff", "attn_decode_bw_eff", "host_step_us", "host_step_per_seq_us"}),
}
#: Relative condition below which the Jacobian counts as singular.
SINGULAR = 1e-7
#: How close to a bound a fitted value counts as on it (relative to the bound's range).
AT_BOUND = 1e-3


class FitRefusedError(CoreError, ValueError):
    """The fit is under-determined or unphysical; the message says which parameters or rows."""


@dataclass(frozen=True, slots=True)
class FittedParameter:
    """One parameter after the fit: its value and bounds, whether the rows determined it
    (else the base profile's value is kept), and its standard error from the Jacobian."""

    name: str
    value: float
    lower: float
    upper: float
    unit: str
    meaning: str
    fitted: bool
    stderr: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "unit": self.unit,
            "fitted": self.fitted,
            "stderr": self.stderr,
            "meaning": self.meaning,
        }


@dataclass(frozen=True, slots=True)
class RowFit:
    """A measured row beside its prediction."""

    row: MeasurementRow
    predicted_ms: float

    @property
    def measured_ms(self) -> float:
        """The measured time."""
        return self.row.time_ms

    @property
    def rel_err(self) -> float:
        """(predicted − measured) / measured."""
        return self.predicted_ms / self.row.time_ms - 1.0

    @property
    def abs_err_ms(self) -> float:
        """predicted − measured."""
        return self.predicted_ms - self.row.time_ms

    @property
    def counted(self) -> bool:
        """Whether the row counts in MAPE (not quantised: at least :data:`SMALL_MS`)."""
        return self.row.time_ms >= SMALL_MS

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the contract's ``measured_ms``, ``predicted_ms``, ``rel_err``)."""
        r = self.row
        return {
            "line": r.line,
            "label": r.label,
            "device": r.device,
            "model": r.model,
            "op": r.op or None,
            "phase": r.phase,
            "tokens": r.tokens,
            "batch": r.batch,
            "kv_tokens": r.kv_tokens,
            "group": r.group,
            "measured_ms": r.time_ms,
            "predicted_ms": self.predicted_ms,
            "rel_err": self.rel_err,
            "abs_err_ms": self.abs_err_ms,
            "counted": self.counted,
        }


@dataclass(frozen=True, slots=True)
class HoldoutGroup:
    """One group predicted by a refit on the other groups; ``held`` names parameters the
    refit held at their neutral prior; ``error`` says why the group could not be predicted."""

    group: str
    rows: tuple[RowFit, ...]
    held: tuple[str, ...] = ()
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "group": self.group,
            "held_at_prior": list(self.held),
            "error": self.error,
            "rows": [
                {
                    "line": f.row.line,
                    "label": f.row.label,
                    "measured_ms": f.measured_ms,
                    "predicted_ms": f.predicted_ms,
                    "rel_err": f.rel_err,
                    "counted": f.counted,
                }
                for f in self.rows
            ],
        }


def _mape(fits: Sequence[RowFit]) -> tuple[float | None, float | None]:
    errs = [abs(f.rel_err) for f in fits if f.counted]
    if not errs:
        return None, None
    return float(np.mean(errs)), float(np.max(errs))


@dataclass(frozen=True)
class FitReport:
    """The outcome of :func:`fit_profile`."""

    stack: str
    measurement_set: str
    format: MeasurementFormat
    devices: tuple[str, ...]
    models: tuple[str, ...]
    parameters: tuple[FittedParameter, ...]
    rows: tuple[RowFit, ...]
    holdout: tuple[HoldoutGroup, ...]
    profile: RuntimeProfile
    cost: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def values(self) -> dict[str, float]:
        """Every parameter's value (fitted or kept)."""
        return {p.name: p.value for p in self.parameters}

    @property
    def fitted_values(self) -> dict[str, float]:
        """The values the rows determined."""
        return {p.name: p.value for p in self.parameters if p.fitted}

    @property
    def mape(self) -> float | None:
        """Mean absolute relative error over rows of at least :data:`SMALL_MS`."""
        return _mape(self.rows)[0]

    @property
    def max_rel_err(self) -> float | None:
        """Largest absolute relative error over rows of at least :data:`SMALL_MS`."""
        return _mape(self.rows)[1]

    @property
    def small_rows_max_abs_err_ms(self) -> float | None:
        """Largest absolute error over the quantised rows (below :data:`SMALL_MS`)."""
        errs = [abs(f.abs_err_ms) for f in self.rows if not f.counted]
        return max(errs) if errs else None

    @property
    def holdout_rows(self) -> tuple[RowFit, ...]:
        """Every predicted hold-out row."""
        return tuple(f for g in self.holdout for f in g.rows)

    @property
    def holdout_mape(self) -> float | None:
        """MAPE of the hold-out predictions (rows of at least :data:`SMALL_MS`)."""
        return _mape(self.holdout_rows)[0]

    @property
    def holdout_max_rel_err(self) -> float | None:
        """Largest absolute relative error of the hold-out predictions."""
        return _mape(self.holdout_rows)[1]

    def as_dict(self) -> dict[str, Any]:
        """The calibration document (``docs/architecture.md``, Documents) with the hold-out
        detail."""
        small = self.small_rows_max_abs_err_ms
        return {
            "stack": self.stack,
            "measurement_set": self.measurement_set,
            "format": self.format.value,
            "devices": list(self.devices),
            "models": list(self.models),
            "parameters": {p.name: p.as_dict() for p in self.parameters},
            "rows": [f.as_dict() for f in self.rows],
            "mape": self.mape,
            "max_rel_err": self.max_rel_err,
            "holdout_mape": self.holdout_mape,
            "holdout_max_rel_err": self.holdout_max_rel_err,
            "counted_rows": sum(1 for f in self.rows if f.counted),
            "small_rows": sum(1 for f in self.rows if not f.counted),
            "small_rows_max_abs_err_ms": small,
            "small_row_threshold_ms": SMALL_MS,
            "holdout": [g.as_dict() for g in self.holdout],
            "notes": list(self.notes),
        }


# --- the problem ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _OpRows:
    """Operator rows as flat arrays of their kernels' graph operators."""

    row: np.ndarray  # index of the row each operator belongs to
    device: np.ndarray  # index into devices
    cls: np.ndarray
    flops: np.ndarray
    x_gemm: np.ndarray
    x_attn: np.ndarray
    nbytes: np.ndarray
    fixed: np.ndarray


def _accepted_precisions(rt: RuntimeProfile) -> set[str]:
    w, a = rt.weight_bits, rt.act_bits
    names = {f"w{w}a{a}"}
    if w == a == 16:
        names |= {"fp16", "bf16", "float16", "bfloat16"}
    elif w == a == 8:
        names |= {"fp8", "int8"}
    elif w == a == 32:
        names |= {"fp32"}
    elif (w, a) == (4, 16):
        names |= {"int4", "w4a16"}
    return names


def _kernel_ops(
    row: MeasurementRow, model: ModelSpec, prec: Precision
) -> list[tuple[Op, bool, int, int]]:
    """The graph operators (op, decode?, tokens, attended) the measured kernel runs."""
    names = MEASURED_KERNELS[row.op]
    decode = row.phase == "decode"
    if decode:
        g = decode_graph(model, row.batch, row.batch * row.kv_tokens, prec, fused_attention=True)
    else:
        batch = row.batch or 1
        g = prefill_graph(model, [row.tokens // batch] * batch, prec, fused_attention=True)
    q_dim = model.n_heads * model.head_dim
    ops = (*g.layer_ops, *layer_extra_ops(model.n_layers, q_dim, g.tokens, prec))
    return [(op, decode, g.tokens, g.attended) for op in ops if op.name in names]


class _Problem:
    """Rows resolved against the catalog, and their predictions for a parameter vector."""

    def __init__(self, base: RuntimeProfile, mset: MeasurementSet, catalog: Catalog) -> None:
        self.base = base
        self.mset = mset
        self.rows = mset.rows
        self.prec = Precision.of(base)
        errors: list[CellError] = []
        accepted = _accepted_precisions(base)
        fitted_kinds = calibrated_kinds()
        self.devices: list[DeviceSpec] = []
        self.models: list[ModelSpec] = []
        dev_index: dict[str, int] = {}
        self.row_device: list[int] = []
        self.row_model: list[ModelSpec] = []
        for r in self.rows:
            try:
                dev = catalog.device(r.device)
            except SpecError:
                errors.append(CellError(r.line, "device", f"unknown device {r.device!r}"))
                continue
            if dev.kind not in fitted_kinds:
                errors.append(CellError(r.line, "device", f"{r.device} is not a GPU"))
                continue
            try:
                model = catalog.model(r.model)
            except SpecError:
                errors.append(CellError(r.line, "model", f"unknown model {r.model!r}"))
                continue
            if r.precision and r.precision.lower() not in accepted:
                errors.append(
                    CellError(
                        r.line,
                        "precision",
                        f"{base.slug} runs w{base.weight_bits}a{base.act_bits} "
                        f"({', '.join(sorted(accepted))}), not {r.precision!r}",
                    )
                )
                continue
            if r.device not in dev_index:
                dev_index[r.device] = len(self.devices)
                self.devices.append(dev)
            if model not in self.models:
                self.models.append(model)
            self.row_device.append(dev_index[r.device])
            self.row_model.append(model)
        if errors:
            raise MeasurementError(errors)
        self.operator = mset.format is MeasurementFormat.OPERATORS
        self.measured = np.array([r.time_ms for r in self.rows])
        self.small = self.measured < SMALL_MS
        self.touch: list[frozenset[KernelClass] | frozenset[str]] = []
        if self.operator:
            self._build_operator_rows()
        else:
            self.touch = [_E2E_TOUCH[r.phase] for r in self.rows]
        self._check_physical()

    def _build_operator_rows(self) -> None:
        cols: list[list[float]] = [[] for _ in range(8)]
        for i, r in enumerate(self.rows):
            classes: set[KernelClass] = set()
            ops = _kernel_ops(r, self.row_model[i], self.prec)
            if not ops:
                raise MeasurementError(
                    [CellError(r.line, "op", f"{self.row_model[i].slug} has no {r.op} kernel")]
                )
            for op, decode, tokens, attended in ops:
                cls, flops, xg, xa, nbytes, fixed = op_features(op, decode, tokens, attended)
                classes.add(cls)
                for col, v in zip(
                    cols,
                    (i, self.row_device[i], int(cls), flops, xg, xa, nbytes, fixed),
                    strict=True,
                ):
                    col.append(float(v))
            self.touch.append(frozenset(classes))
        self.ops = _OpRows(
            np.array(cols[0], dtype=np.int64),
            np.array(cols[1], dtype=np.int64),
            np.array(cols[2], dtype=np.int64),
            *(np.array(c) for c in cols[3:]),
        )

    def _check_physical(self) -> None:
        """Refuse rows faster than the datasheet allows at 100 % of every peak. Rows below
        :data:`SMALL_MS` are exempt: the source rounds them to 1 µs, and a kernel that small
        may read operands its predecessor left in the L2 cache."""
        ideal = {n: 1.0 for n in ALL_PARAMS if ALL_PARAMS[n].upper == 1.0}
        ideal.update({n: 0.0 for n in ALL_PARAMS if n not in ideal})
        bound = self.predict(ideal)
        for i, r in enumerate(self.rows):
            if not self.small[i] and r.time_ms < bound[i] * (1 - 1e-9):
                dev = self.devices[self.row_device[i]]
                peak = dev.peak_ops_per_s(self.prec.act_bits, self.prec.weight_bits) / 1e12
                raise FitRefusedError(
                    f"unphysical: line {r.line} ({r.label}) measures {r.time_ms:.4g} ms but "
                    f"{dev.slug} needs at least {bound[i]:.4g} ms at 100 % of its datasheet "
                    f"peak ({peak:.4g} TFLOP/s, {dev.mem_bw_gbps:.4g} GB/s): an efficiency of "
                    f"{bound[i] / r.time_ms:.3g} > 1 (check the device and the model)"
                )

    def predict(self, values: Mapping[str, float]) -> np.ndarray:
        """Predicted milliseconds of every row under the parameter ``values``."""
        if self.operator:
            return self._predict_operators(values)
        return self._predict_end_to_end(values)

    def _predict_operators(self, values: Mapping[str, float]) -> np.ndarray:
        kp = KernelParams.from_mapping(values)
        o = self.ops
        rate_c = np.empty(len(o.cls))
        rate_m = np.empty(len(o.cls))
        costs = [KernelCosts(d, self.prec, kp) for d in self.devices]
        for j, kc in enumerate(costs):
            on = o.device == j
            table = np.array(kc.rates)
            rate_c[on] = table[o.cls[on], 0]
            rate_m[on] = table[o.cls[on], 1]
        kc = costs[0]
        c, m = kc.combine(o.flops, o.x_gemm, o.x_attn, o.nbytes, o.fixed, rate_c, rate_m)
        t = np.maximum(np.maximum(c, m), kc.floor_s)
        return np.bincount(o.row, weights=t, minlength=len(self.rows)) * 1e3

    def _predict_end_to_end(self, values: Mapping[str, float]) -> np.ndarray:
        rt = with_values(self.base, values)
        models = [device_family(d.kind)(d, rt) for d in self.devices]
        out = np.empty(len(self.rows))
        for i, r in enumerate(self.rows):
            gm, model = models[self.row_device[i]], self.row_model[i]
            try:
                if r.phase == "prefill":
                    s = gm.prefill(model, [r.tokens] * r.batch).seconds
                else:
                    s = gm.decode_step(model, r.batch, r.batch * r.kv_tokens).seconds
            except CapacityError as exc:
                raise MeasurementError(
                    [CellError(r.line, "batch", f"does not fit the device: {exc.message}")]
                ) from exc
            out[i] = s * 1e3
        return out

    def residuals(self, values: Mapping[str, float], idx: np.ndarray) -> np.ndarray:
        """Residuals of the rows ``idx`` (log ratio; absolute on the small-row scale)."""
        pred = self.predict(values)[idx]
        meas = self.measured[idx]
        small = self.small[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.log(pred / meas)
        return np.where(small, (pred - meas) / SMALL_MS, rel)

    def touches(self, i: int, name: str) -> bool:
        """Whether row ``i`` depends on parameter ``name`` (structurally)."""
        t = self.touch[i]
        if not self.operator:
            return name in t
        if name in FLOOR_FAMILY:
            # Only a small kernel can sit on the floor (a few µs): rows under SMALL_MS.
            return bool(self.small[i])
        return any(name in FAMILIES[c] for c in t)  # type: ignore[index]

    def families(self, free: Sequence[str]) -> list[tuple[str, ...]]:
        """The free parameters grouped into families (in priority order)."""
        if not self.operator:
            order = [n for n in END_TO_END_FREE if n in free]
            order += [n for n in free if n not in order]
            return [tuple(order)] if order else []
        fams = [*FAMILIES.values(), FLOOR_FAMILY]
        out = [tuple(n for n in fam if n in free) for fam in fams]
        listed = {n for fam in fams for n in fam}
        out += [(n,) for n in free if n not in listed]
        return [f for f in out if f]


def with_values(base: RuntimeProfile, values: Mapping[str, float]) -> RuntimeProfile:
    """``base`` with kernel-model ``values`` (fields ``compute_eff``/``bw_eff``, the rest in
    ``params``) and fused attention."""
    params = dict(base.params)
    params.update({k: float(v) for k, v in values.items() if k in KERNEL_PARAMS})
    params["fused_attention"] = 1.0
    fields: dict[str, Any] = {k: float(v) for k, v in values.items() if k in FIELD_PARAMS}
    return replace(base, **fields, params=params)


def _base_values(base: RuntimeProfile) -> dict[str, float]:
    """The base profile's value of every parameter (START where it sets none)."""
    return runtime_values(base, START)


# --- fitting --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Solution:
    values: dict[str, float]
    free: tuple[str, ...]
    jac: np.ndarray
    residuals: np.ndarray
    cost: float


def _solve(
    prob: _Problem, idx: np.ndarray, free: Sequence[str], fixed: Mapping[str, float]
) -> _Solution:
    lo = np.array([ALL_PARAMS[n].lower for n in free])
    hi = np.array([ALL_PARAMS[n].upper for n in free])

    def values(x: np.ndarray) -> dict[str, float]:
        v = dict(fixed)
        v.update(zip(free, (float(t) for t in x), strict=True))
        return v

    def fun(x: np.ndarray) -> np.ndarray:
        r = prob.residuals(values(x), idx)
        # A non-finite prediction (no time at all) must repel the solver, not crash it.
        return np.where(np.isfinite(r), r, 1e6)

    # Imported here: scipy.optimize costs 0.35 s to import, which every management command
    # would pay (the admin imports the calibration services at start-up).
    from scipy.optimize import least_squares

    best = None
    starts = [START] + ([{**START, **START_HIGH}] if any(n in START_HIGH for n in free) else [])
    for start in starts:
        x0 = np.clip(np.array([start[n] for n in free]), lo + 1e-9, hi - 1e-9)
        sol = least_squares(fun, x0, bounds=(lo, hi), x_scale="jac", method="trf")
        if best is None or sol.cost < best.cost * (1 - 1e-9):
            best = sol
    assert best is not None
    return _Solution(values(best.x), tuple(free), best.jac, best.fun, float(best.cost))


def _singular(sol: _Solution) -> list[str]:
    """Parameters the Jacobian cannot determine (empty when it has full column rank)."""
    jac = np.asarray(sol.jac, dtype=float)
    norms = np.linalg.norm(jac, axis=0)
    dead = [n for n, v in zip(sol.free, norms, strict=True) if not v > 0]
    if dead:
        return dead
    s, vt = np.linalg.svd(jac / norms, full_matrices=False)[1:]
    if s[-1] >= SINGULAR * s[0]:
        return []
    v = np.abs(vt[-1])
    return [n for n, w in zip(sol.free, v, strict=True) if w >= 0.3 * v.max()]


def _stderr(sol: _Solution) -> dict[str, float]:
    """Standard errors from the Jacobian (residual variance × (JᵀJ)⁻¹), in parameter units."""
    m, p = sol.jac.shape
    if m <= p:
        return {}
    s2 = float(np.sum(sol.residuals**2)) / (m - p)
    try:
        cov = np.linalg.inv(sol.jac.T @ sol.jac) * s2
    except np.linalg.LinAlgError:
        return {}
    return {n: math.sqrt(max(float(cov[i, i]), 0.0)) for i, n in enumerate(sol.free)}


def _free_params(prob: _Problem, idx: np.ndarray, free: Sequence[str] | None) -> list[str]:
    """The parameters to fit: ``free`` (default: by format) that some row of ``idx`` touches."""
    if free is None:
        if prob.operator:
            candidates: Sequence[str] = [
                *FIELD_PARAMS,
                *(n for fam in FAMILIES.values() for n in fam if n not in FIELD_PARAMS),
                *FLOOR_FAMILY,
            ]
        else:
            candidates = END_TO_END_FREE
    else:
        unknown = [n for n in free if n not in ALL_PARAMS]
        if unknown:
            raise SpecError("free", f"unknown parameters: {', '.join(unknown)}")
        candidates = free
    return [n for n in dict.fromkeys(candidates) if any(prob.touches(int(i), n) for i in idx)]


def _shapes_per_family(prob: _Problem, idx: np.ndarray, fam: Sequence[str]) -> set[Any]:
    return {prob.rows[i].shape for i in idx if any(prob.touches(int(i), n) for n in fam)}


def fit_profile(
    base: RuntimeProfile,
    mset: MeasurementSet,
    catalog: Catalog,
    *,
    free: Sequence[str] | None = None,
    holdout: bool = True,
    progress: Callable[[float], None] | None = None,
) -> FitReport:
    """Fit the kernel-class parameters of GPU stack ``base`` to ``mset``.

    ``free`` overrides which parameters are fitted (default: those the rows constrain, see
    the module notes). Raises MeasurementError (rows naming unknown devices or models, a
    precision the stack does not run) or FitRefusedError (under-determined or unphysical).
    """
    if base.device_kind not in calibrated_kinds():
        kind = str(base.device_kind)
        raise FitRefusedError(f"{base.slug} is a {kind} stack: only GPU stacks are fitted")
    if not base.params.get("fused_attention", 0):
        raise FitRefusedError(
            f"{base.slug} runs eager attention: the kernel-class model fits fused-attention "
            "stacks (FlashAttention prefill, paged decode)"
        )
    prob = _Problem(base, mset, catalog)
    n = len(prob.rows)
    everything = np.arange(n)
    names = _free_params(prob, everything, free)
    base_vals = _base_values(base)
    if not names:
        raise FitRefusedError("under-determined: no row constrains any parameter")
    for fam in prob.families(names):
        shapes = _shapes_per_family(prob, everything, fam)
        if len(shapes) < len(fam):
            raise FitRefusedError(
                f"under-determined: {', '.join(fam)} ({len(fam)} parameters) are constrained "
                f"by {len(shapes)} independent shape(s) only; measure more token counts / "
                "batch sizes"
            )
    fixed = {k: v for k, v in base_vals.items() if k not in names}
    sol = _solve(prob, everything, names, fixed)
    dead = _singular(sol)
    if dead:
        raise FitRefusedError(
            f"under-determined: the rows cannot tell {', '.join(dead)} apart (singular "
            "Jacobian); measure shapes where they act differently"
        )
    _check_bounds(sol)
    pred = prob.predict(sol.values)
    if not np.all(np.isfinite(pred) & (pred > 0)):
        raise FitRefusedError("unphysical: the fit predicts a non-positive or infinite time")
    if progress is not None:
        progress(1.0 / (1 + len({r.group for r in prob.rows})))
    stderr = _stderr(sol)
    params = tuple(
        FittedParameter(
            name,
            float(sol.values[name]),
            spec.lower,
            spec.upper,
            spec.unit,
            spec.meaning,
            name in names,
            stderr.get(name),
        )
        for name, spec in ALL_PARAMS.items()
    )
    rows = tuple(RowFit(r, float(p)) for r, p in zip(prob.rows, pred, strict=True))
    groups = _holdout(prob, free, progress) if holdout else ()
    notes = []
    kept = [p.name for p in params if not p.fitted]
    if kept:
        notes.append(f"kept from {base.slug} (no row constrains them): {', '.join(kept)}")
    return FitReport(
        stack=base.slug,
        measurement_set=mset.name,
        format=mset.format,
        devices=mset.devices,
        models=mset.models,
        parameters=params,
        rows=rows,
        holdout=groups,
        profile=with_values(base, sol.values),
        cost=sol.cost,
        notes=tuple(notes),
    )


def _check_bounds(sol: _Solution) -> None:
    """Refuse a solution with a parameter on a physical bound it may not sit on."""
    for name in sol.free:
        spec = ALL_PARAMS[name]
        v = sol.values[name]
        span = spec.upper - spec.lower
        if v >= spec.upper - AT_BOUND * span:
            what = "an efficiency above 1" if spec.upper == 1.0 else "beyond its physical range"
            raise FitRefusedError(
                f"unphysical: {name} = {v:.6g} sits on its bound {spec.upper:g} {spec.unit}: "
                f"the rows imply {what} ({spec.meaning})"
            )
        if spec.unit == "fraction" and v <= spec.lower + AT_BOUND * span:
            raise FitRefusedError(
                f"unphysical: {name} = {v:.6g} sits on its lower bound: the rows imply a kernel "
                f"that achieves almost none of the peak ({spec.meaning})"
            )


def _group_order(prob: _Problem) -> list[str]:
    groups: dict[str, tuple[str, int]] = {}
    for r in prob.rows:
        groups.setdefault(r.group, (r.phase if not r.op else "", r.tokens * max(r.batch, 1)))
    return sorted(groups, key=lambda g: groups[g])


def _holdout(
    prob: _Problem, free: Sequence[str] | None, progress: Callable[[float], None] | None
) -> tuple[HoldoutGroup, ...]:
    """Refit without each group and predict it (see the module notes)."""
    order = _group_order(prob)
    base_vals = _base_values(prob.base)
    out = []
    for k, g in enumerate(order):
        test = np.array([i for i, r in enumerate(prob.rows) if r.group == g])
        train = np.array([i for i, r in enumerate(prob.rows) if r.group != g])
        out.append(_holdout_group(prob, g, train, test, free, base_vals))
        if progress is not None:
            progress((k + 2) / (len(order) + 1))
    return tuple(out)


def _holdout_group(
    prob: _Problem,
    group: str,
    train: np.ndarray,
    test: np.ndarray,
    free: Sequence[str] | None,
    base_vals: Mapping[str, float],
) -> HoldoutGroup:
    if len(train) == 0:
        return HoldoutGroup(group, (), error="no other group to fit on")
    names = _free_params(prob, train, free)
    wanted = _free_params(prob, test, free)
    missing = [n for n in wanted if n not in names and n not in PRIOR]
    if missing:
        return HoldoutGroup(
            group, (), error=f"no other group constrains {', '.join(missing)}: not predictable"
        )
    held: list[str] = []
    for fam in prob.families(names):
        shapes = _shapes_per_family(prob, train, fam)
        for name in fam[len(shapes) :]:
            if name not in PRIOR:
                return HoldoutGroup(
                    group, (), error=f"the other groups cannot determine {name}: not predictable"
                )
            held.append(name)
    held += [n for n in wanted if n not in names]
    names = [n for n in names if n not in held]
    fixed = {k: v for k, v in base_vals.items() if k not in names}
    fixed.update({n: PRIOR[n] for n in held})
    sol = _solve(prob, train, names, fixed)
    dead = _singular(sol)
    if dead:
        return HoldoutGroup(
            group, (), tuple(held), error=f"refit under-determined ({', '.join(dead)})"
        )
    pred = prob.predict(sol.values)
    rows = tuple(RowFit(prob.rows[i], float(pred[i])) for i in test)
    return HoldoutGroup(group, rows, tuple(sorted(set(held))))


__all__ = [
    "END_TO_END_FREE",
    "FAMILIES",
    "PRIOR",
    "SMALL_MS",
    "START",
    "FitRefusedError",
    "FitReport",
    "FittedParameter",
    "HoldoutGroup",
    "RowFit",
    "fit_profile",
    "with_values",
]
