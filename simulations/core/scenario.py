"""Parse and validate a scenario document (docs/architecture.md) into a
:class:`ScenarioSpec`.

:func:`parse_scenario` checks the whole document against a :class:`Catalog` and reports
*every* problem at once, keyed by JSON path (``systems[0].devices[1].count``), by raising
:class:`~simulations.core.errors.ScenarioValidationError`. Nothing else in the project
interprets scenario documents: the REST API, the pages, the CLI and the workers all call it.

Sizes are capped so one document cannot ask for absurd work; the limits are the ``MAX_*``
constants below (README.md lists them). A policy that is not registered in the core is not
a validation error — the run fails later with :class:`UnknownPolicyError`'s message — but
when it is registered, its option names, option values and device roles are checked here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulations.core.catalog import Catalog
from simulations.core.errors import ScenarioValidationError, SpecError, UnknownPolicyError
from simulations.core.json_fields import (
    MAX_PRICE_USD,
    MAX_TDP_W,
    ROOT,
    Errors,
    key_path,
    read_int,
    read_list,
    read_mapping,
    read_positive,
    read_power_quote,
    read_str,
    reject_unknown_keys,
    type_name,
)
from simulations.core.spec import (
    ArrivalKind,
    ArrivalSpec,
    CapacitySpec,
    DevicePlacement,
    LengthDist,
    LengthDistKind,
    ModelSpec,
    RuntimeProfile,
    ScenarioSpec,
    SharedPrefixSpec,
    SloSpec,
    SystemSpec,
    TraceData,
    WorkloadSpec,
)
from simulations.core.tco import parse_costs

# --- limits (documented in README.md) -------------------------------------------------------

#: Requests per scenario (every system simulates all of them).
MAX_REQUESTS = 100_000
#: Candidate systems per scenario.
MAX_SYSTEMS = 32
#: Entries in one system's ``devices`` list.
MAX_PLACEMENTS_PER_SYSTEM = 16
#: Devices in one system (sum of the entries' ``count``).
MAX_DEVICES_PER_SYSTEM = 1024
#: Tokens of one request's prompt or output (fixed values and distribution bounds).
MAX_TOKENS = 1_048_576
#: σ of a log-normal length distribution (of log-length).
MAX_SIGMA = 10.0
#: Poisson arrival rate, requests per second.
MAX_RATE_PER_S = 1_000_000.0
#: Stretch factor for trace timestamps.
MAX_TIME_SCALE = 1_000_000.0
#: Largest seed (numpy accepts any non-negative integer; this keeps it a 64-bit column).
MAX_SEED = 2**63 - 1
#: Rows of an uploaded trace.
MAX_TRACE_ROWS = 200_000
#: Latency targets (ms or s, per the key).
MAX_SLO = 1e9
#: Options of one system.
MAX_OPTIONS = 64

_TOP_KEYS = ("name", "description", "model", "workload", "systems", "slo", "costs", "capacity")
_CAPACITY_KEYS = ("requests", "steps")
#: Requests per engine run of a capacity search, and its bisection steps (bounded work).
MIN_CAPACITY_REQUESTS, MAX_CAPACITY_REQUESTS = 20, 2000
MAX_CAPACITY_STEPS = 10
_WORKLOAD_KEYS = ("requests", "input_tokens", "output_tokens", "arrival", "seed", "shared_prefix")
_PREFIX_KEYS = ("tokens", "fraction")
_SYSTEM_KEYS = ("name", "description", "policy", "devices", "options")
_PLACEMENT_KEYS = ("device", "count", "role", "runtime", "price_usd", "tdp_w")
_SLO_KEYS = ("ttft_p90_ms", "tpot_p90_ms", "ttft_p99_ms", "tpot_p99_ms", "e2e_p90_s")
_DIST_KEYS = {
    "fixed": ("dist", "value"),
    "uniform": ("dist", "low", "high"),
    "lognormal": ("dist", "median", "sigma", "low", "high"),
    "trace": ("dist", "trace"),
}
_ARRIVAL_KEYS = {
    "closed": ("kind",),
    "poisson": ("kind", "rate_per_s"),
    "trace": ("kind", "trace", "time_scale"),
}

if TYPE_CHECKING:  # the registry is imported where a policy is looked up (start-up time)
    from simulations.core.policies import Policy, RoleSpec

TraceLoader = Callable[[str | Path], TraceData]


def get_policy(name: str) -> type[Policy]:
    """The registered policy ``name`` (the registry is imported on first use, not when this
    module is: every management command imports the scenario rules at start-up)."""
    from simulations.core.policies import get_policy as lookup

    return lookup(name)


# --- workload --------------------------------------------------------------------------------


def _tokens(errs: Errors, path: str, value: Any) -> int | None:
    return read_int(errs, path, value, minimum=1, maximum=MAX_TOKENS)


def _length_dist(
    errs: Errors, path: str, value: Any, trace_refs: list[tuple[str, str]]
) -> LengthDist | None:
    """An integer (fixed) or a ``{"dist": ...}`` object; trace names go to ``trace_refs``."""
    if value is None:
        errs.add(path, "is required")
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        n = _tokens(errs, path, value)
        return None if n is None else LengthDist(LengthDistKind.FIXED, value=n)
    if not isinstance(value, Mapping):
        errs.add(path, f"must be an integer or a distribution object, got {type_name(value)}")
        return None
    kind = value.get("dist")
    if kind not in _DIST_KEYS:
        errs.add(key_path(path, "dist"), f"must be one of: {', '.join(_DIST_KEYS)}")
        return None
    reject_unknown_keys(errs, path, value, _DIST_KEYS[kind])
    before = len(errs.by_path)
    if kind == "fixed":
        n = _tokens(errs, key_path(path, "value"), value.get("value"))
        return None if n is None else LengthDist(LengthDistKind.FIXED, value=n)
    if kind == "trace":
        name = value.get("trace")
        if name is None:
            trace_refs.append((path, ""))
        elif read_str(errs, key_path(path, "trace"), name, max_len=4096) is not None:
            trace_refs.append((key_path(path, "trace"), name))
        else:
            return None
        return LengthDist(LengthDistKind.TRACE)
    low = high = None
    if kind == "uniform" or "low" in value:
        low = _tokens(errs, key_path(path, "low"), value.get("low"))
    if kind == "uniform" or "high" in value:
        high = _tokens(errs, key_path(path, "high"), value.get("high"))
    if low is not None and high is not None and low > high:
        errs.add(key_path(path, "high"), "must not be below low")
    if kind == "uniform":
        if len(errs.by_path) != before:
            return None
        return LengthDist(LengthDistKind.UNIFORM, low=low, high=high)
    median = read_positive(errs, key_path(path, "median"), value.get("median"), maximum=MAX_TOKENS)
    sigma = read_positive(errs, key_path(path, "sigma"), value.get("sigma"), maximum=MAX_SIGMA)
    if len(errs.by_path) != before:
        return None
    return LengthDist(LengthDistKind.LOGNORMAL, low=low, high=high, median=median, sigma=sigma)


def _arrival(
    errs: Errors, path: str, value: Any, trace_refs: list[tuple[str, str]]
) -> ArrivalSpec | None:
    if value is None:
        return ArrivalSpec(ArrivalKind.CLOSED)
    obj = read_mapping(errs, path, value)
    if obj is None:
        return None
    kind = obj.get("kind")
    if kind not in _ARRIVAL_KEYS:
        errs.add(key_path(path, "kind"), f"must be one of: {', '.join(_ARRIVAL_KEYS)}")
        return None
    reject_unknown_keys(errs, path, obj, _ARRIVAL_KEYS[kind])
    if kind == "closed":
        return ArrivalSpec(ArrivalKind.CLOSED)
    if kind == "poisson":
        rate = read_positive(
            errs, key_path(path, "rate_per_s"), obj.get("rate_per_s"), maximum=MAX_RATE_PER_S
        )
        return None if rate is None else ArrivalSpec(ArrivalKind.POISSON, rate_per_s=rate)
    scale: float | None = 1.0
    if "time_scale" in obj:
        scale = read_positive(
            errs, key_path(path, "time_scale"), obj["time_scale"], maximum=MAX_TIME_SCALE
        )
    name = obj.get("trace")
    if name is None:
        trace_refs.append((key_path(path, "trace"), ""))
    elif read_str(errs, key_path(path, "trace"), name, max_len=4096) is not None:
        trace_refs.append((key_path(path, "trace"), name))
    else:
        return None
    return None if scale is None else ArrivalSpec(ArrivalKind.TRACE, time_scale=scale)


def _named(trace: TraceData, name: str) -> TraceData:
    """The trace under the name the document uses (so the document round-trips)."""
    return trace if trace.name == name else replace(trace, name=name)


def _resolve_trace(
    errs: Errors,
    trace_refs: list[tuple[str, str]],
    traces: Mapping[str, TraceData],
    trace_dir: Path | None,
    loader: TraceLoader | None,
) -> TraceData | None:
    """The one trace a workload refers to (``None`` when it refers to none or it is invalid)."""
    named = [(p, n) for p, n in trace_refs if n]
    if not trace_refs:
        return None
    if not named:
        for path, _ in trace_refs:
            errs.add(
                key_path(path, "trace") if not path.endswith(".trace") else path,
                "name the trace (here or in workload.arrival.trace)",
            )
        return None
    first_path, name = named[0]
    for path, other in named[1:]:
        if other != name:
            errs.add(path, f"a workload uses one trace; {first_path} names {name!r}")
    if name in traces:
        return _named(traces[name], name)
    if trace_dir is not None:
        candidate = Path(name)
        if not candidate.is_absolute():
            candidate = trace_dir / candidate
        if candidate.is_file():
            if loader is None:
                from simulations.core.traces import load_azure_trace

                loader = load_azure_trace
            try:
                return _named(loader(candidate), name)
            except SpecError as exc:
                errs.add(first_path, f"{exc.field}: {exc.message}")
                return None
    errs.add(first_path, f"unknown trace {name!r}")
    return None


def _workload(
    errs: Errors,
    value: Any,
    traces: Mapping[str, TraceData] | None,
    trace_dir: str | Path | None,
    loader: TraceLoader | None,
) -> WorkloadSpec | None:
    path = "workload"
    if value is None:
        errs.add(path, "is required")
        return None
    obj = read_mapping(errs, path, value)
    if obj is None:
        return None
    reject_unknown_keys(errs, path, obj, _WORKLOAD_KEYS)
    requests = read_int(
        errs, "workload.requests", obj.get("requests"), minimum=1, maximum=MAX_REQUESTS
    )
    refs: list[tuple[str, str]] = []
    inp = _length_dist(errs, "workload.input_tokens", obj.get("input_tokens"), refs)
    out = _length_dist(errs, "workload.output_tokens", obj.get("output_tokens"), refs)
    arrival = _arrival(errs, "workload.arrival", obj.get("arrival"), refs)
    seed = read_int(errs, "workload.seed", obj.get("seed", 0), minimum=0, maximum=MAX_SEED)
    prefix: SharedPrefixSpec | None = None
    prefix_ok = True
    if obj.get("shared_prefix") is not None:
        prefix = _shared_prefix(errs, obj["shared_prefix"])
        prefix_ok = prefix is not None
    trace = _resolve_trace(
        errs, refs, traces or {}, Path(trace_dir) if trace_dir is not None else None, loader
    )
    if trace is not None:
        rows = len(trace.arrival_s)
        if rows > MAX_TRACE_ROWS:
            errs.add(refs[0][0], f"the trace has {rows} rows; at most {MAX_TRACE_ROWS} are allowed")
        if requests is not None and requests > rows:
            errs.add("workload.requests", f"must not exceed the trace's {rows} requests")
    if requests is None or inp is None or out is None or arrival is None or seed is None:
        return None
    if (refs and trace is None) or not prefix_ok:
        return None
    return WorkloadSpec(
        requests=requests,
        input_tokens=inp,
        output_tokens=out,
        arrival=arrival,
        seed=seed,
        trace=trace,
        shared_prefix=prefix,
    )


def _shared_prefix(errs: Errors, value: Any) -> SharedPrefixSpec | None:
    """``{"tokens": P, "fraction": f}``: a system prompt of P tokens shared by a fraction f
    of the requests."""
    path = "workload.shared_prefix"
    obj = read_mapping(errs, path, value)
    if obj is None:
        return None
    reject_unknown_keys(errs, path, obj, _PREFIX_KEYS)
    tokens = _tokens(errs, key_path(path, "tokens"), obj.get("tokens"))
    fraction = obj.get("fraction")
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        errs.add(key_path(path, "fraction"), "must be a number in [0, 1]")
        return None
    if not 0.0 <= float(fraction) <= 1.0:
        errs.add(key_path(path, "fraction"), "must lie in [0, 1]")
        return None
    if tokens is None:
        return None
    return SharedPrefixSpec(tokens=tokens, fraction=float(fraction))


# --- systems ---------------------------------------------------------------------------------


def _placement(
    errs: Errors, path: str, value: Any, catalog: Catalog
) -> tuple[DevicePlacement | None, int]:
    """One ``devices`` entry; also returns its count (0 when invalid) for the system total."""
    obj = read_mapping(errs, path, value)
    if obj is None:
        return None, 0
    reject_unknown_keys(errs, path, obj, _PLACEMENT_KEYS)
    slug = read_str(errs, key_path(path, "device"), obj.get("device"))
    device = None
    if slug is not None:
        device = catalog.devices.get(slug)
        if device is None:
            errs.add(key_path(path, "device"), f"unknown device {slug!r}")
    count = read_int(
        errs, key_path(path, "count"), obj.get("count"), minimum=1, maximum=MAX_DEVICES_PER_SYSTEM
    )
    role = read_str(errs, key_path(path, "role"), obj.get("role", ""), required=False, max_len=64)
    # The user's quote per device (null = none): overrides the catalog price in capex.
    price: float | None = None
    price_ok = True
    if obj.get("price_usd") is not None:
        price = read_positive(
            errs, key_path(path, "price_usd"), obj["price_usd"], maximum=MAX_PRICE_USD
        )
        price_ok = price is not None
    tdp_w, tdp_ok = read_power_quote(errs, key_path(path, "tdp_w"), obj.get("tdp_w"), device)
    runtime: RuntimeProfile | None = None
    rt_path = key_path(path, "runtime")
    if obj.get("runtime") is not None:
        rt_slug = read_str(errs, rt_path, obj["runtime"])
        if rt_slug is not None:
            runtime = catalog.runtimes.get(rt_slug)
            if runtime is None:
                errs.add(rt_path, f"unknown runtime profile {rt_slug!r}")
            elif device is not None and runtime.device_kind != device.kind:
                errs.add(
                    rt_path,
                    f"runtime {rt_slug!r} is for {runtime.device_kind} devices, "
                    f"not {device.kind} ({device.slug})",
                )
                runtime = None
            elif device is not None and runtime.fp8 and device.fp8_tflops is None:
                errs.add(
                    rt_path,
                    f"runtime {rt_slug!r} runs FP8 but {device.slug} has no FP8 tensor path "
                    f"(its fp8_tflops is empty); use an FP16/BF16 or INT4 profile",
                )
                runtime = None
    elif device is not None:
        default = catalog.default_runtimes.get(device.kind)
        if default is None or default not in catalog.runtimes:
            errs.add(
                rt_path,
                f"no default runtime profile for {device.kind} devices; name one",
            )
        else:
            runtime = catalog.runtimes[default]
    if (
        device is None
        or count is None
        or role is None
        or runtime is None
        or not price_ok
        or not tdp_ok
    ):
        return None, count or 0
    placement = DevicePlacement(
        device=device,
        count=count,
        runtime=runtime,
        role=role,
        quoted_price_usd=price,
        quoted_tdp_w=tdp_w,
    )
    return placement, count


def _check_roles(
    errs: Errors,
    path: str,
    policy: str,
    roles: Sequence[RoleSpec],
    entries: Sequence[tuple[int, DevicePlacement]],
) -> None:
    """Roles of the placements against the roles a registered policy declares."""
    by_name = {r.name: r for r in roles}
    for j, placement in entries:
        role = by_name.get(placement.role)
        if role is None:
            known = ", ".join(repr(n) for n in by_name) or "none"
            what = f"unknown role {placement.role!r}" if placement.role else "a role is required"
            errs.add(f"{path}.devices[{j}].role", f"{what} for policy {policy!r} (known: {known})")
        elif role.kinds and placement.device.kind not in role.kinds:
            errs.add(
                f"{path}.devices[{j}].device",
                f"role {role.name!r} of policy {policy!r} takes {', '.join(role.kinds)} "
                f"devices, not {placement.device.kind} ({placement.device.slug})",
            )
    present = {p.role for _, p in entries}
    for role in roles:
        if role.required and role.name not in present:
            errs.add(f"{path}.devices", f"policy {policy!r} needs a device with role {role.name!r}")


def _options(
    errs: Errors, path: str, policy: str | None, value: Any
) -> tuple[dict[str, Any] | None, type[Policy] | None]:
    """Options checked against the policy's declared ones (when it is registered)."""
    opts_path = key_path(path, "options")
    obj = read_mapping(errs, opts_path, value)
    if obj is None:
        return None, None
    if len(obj) > MAX_OPTIONS:
        errs.add(opts_path, f"must have at most {MAX_OPTIONS} options")
        return None, None
    if policy is None:
        return dict(obj), None
    try:
        cls = get_policy(policy)
    except UnknownPolicyError:
        # Not implemented yet: the run fails later with UnknownPolicyError's message.
        return dict(obj), None
    declared = {o.name: o for o in cls.options}
    before = len(errs.by_path)
    for key, val in obj.items():
        opt = declared.get(key)
        if opt is None:
            errs.add(
                key_path(opts_path, str(key)),
                f"unknown option for policy {policy!r} (known: {', '.join(declared) or 'none'})",
            )
            continue
        try:
            opt.validate(val, key_path(opts_path, key))
        except SpecError as exc:
            errs.add(exc.field, exc.message)
    if len(errs.by_path) != before:
        return None, cls
    try:
        return cls.resolve_options(obj, opts_path), cls
    except SpecError as exc:
        errs.add(exc.field, exc.message)
        return None, cls


def _system(
    errs: Errors,
    i: int,
    value: Any,
    catalog: Catalog,
    names: set[str],
    model: ModelSpec | None = None,
) -> SystemSpec | None:
    path = f"systems[{i}]"
    obj = read_mapping(errs, path, value)
    if obj is None:
        return None
    reject_unknown_keys(errs, path, obj, _SYSTEM_KEYS)
    name = read_str(errs, key_path(path, "name"), obj.get("name"))
    if name is not None:
        if name in names:
            errs.add(key_path(path, "name"), f"duplicate system name {name!r}")
        names.add(name)
    read_str(
        errs, key_path(path, "description"), obj.get("description"), required=False, max_len=2000
    )
    policy = read_str(errs, key_path(path, "policy"), obj.get("policy"), max_len=64)
    entries = read_list(
        errs,
        key_path(path, "devices"),
        obj.get("devices"),
        minimum=1,
        maximum=MAX_PLACEMENTS_PER_SYSTEM,
    )
    placements: list[tuple[int, DevicePlacement]] = []
    ok = entries is not None
    total = 0
    for j, entry in enumerate(entries or ()):
        placement, count = _placement(errs, f"{path}.devices[{j}]", entry, catalog)
        total += count
        if placement is None:
            ok = False
        else:
            placements.append((j, placement))
    if total > MAX_DEVICES_PER_SYSTEM:
        errs.add(
            key_path(path, "devices"),
            f"has {total} devices in total; at most {MAX_DEVICES_PER_SYSTEM} are allowed",
        )
        ok = False
    options, cls = _options(errs, path, policy, obj.get("options", {}))
    if cls is not None and policy is not None and cls.roles and ok:
        before = len(errs.by_path)
        _check_roles(errs, path, policy, cls.roles, placements)
        ok = len(errs.by_path) == before
    interconnect = None
    if options is not None and options.get("link"):
        # A policy's ``link`` option names a catalog interconnect.
        interconnect = catalog.links.get(str(options["link"]))
        if interconnect is None:
            errs.add(
                key_path(path, "options.link"),
                f"unknown link {options['link']!r} (known: {', '.join(catalog.links)})",
            )
            ok = False
    if not ok or name is None or policy is None or options is None:
        return None
    system = SystemSpec(
        name=name,
        policy=policy,
        devices=tuple(p for _, p in placements),
        options=options,
        interconnect=interconnect,
    )
    if cls is not None and model is not None:
        try:
            cls.check_system(system, model)
        except SpecError as exc:
            errs.add(key_path(path, exc.field), exc.message)
            return None
    return system


def _slo(errs: Errors, value: Any) -> SloSpec | None:
    if value is None:
        return SloSpec()
    obj = read_mapping(errs, "slo", value)
    if obj is None:
        return None
    reject_unknown_keys(errs, "slo", obj, _SLO_KEYS)
    targets: dict[str, float] = {}
    ok = True
    for key in _SLO_KEYS:
        if obj.get(key) is not None:
            v = read_positive(errs, f"slo.{key}", obj[key], maximum=MAX_SLO)
            if v is None:
                ok = False
            else:
                targets[key] = v
    return SloSpec(**targets) if ok else None


def _capacity(errs: Errors, value: Any, slo: SloSpec | None) -> CapacitySpec | None:
    """``capacity``: ``true`` (the defaults) or ``{"requests", "steps"}``; it needs an SLO
    target to search against."""
    if value is None or value is False:
        return None
    spec = CapacitySpec()
    if value is not True:
        obj = read_mapping(errs, "capacity", value)
        if obj is None:
            return None
        reject_unknown_keys(errs, "capacity", obj, _CAPACITY_KEYS)
        requests = read_int(
            errs,
            "capacity.requests",
            obj.get("requests", spec.requests),
            minimum=MIN_CAPACITY_REQUESTS,
            maximum=MAX_CAPACITY_REQUESTS,
        )
        steps = read_int(
            errs,
            "capacity.steps",
            obj.get("steps", spec.steps),
            minimum=1,
            maximum=MAX_CAPACITY_STEPS,
        )
        if requests is None or steps is None:
            return None
        spec = CapacitySpec(requests=requests, steps=steps)
    if slo is not None and not slo.has_targets:
        errs.add("capacity", "needs an slo with at least one latency target to search against")
        return None
    return spec


# --- entry points ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DocumentHead:
    """What scenario and plan documents share, as parsed (``None`` where invalid)."""

    name: str | None
    description: str | None
    model: ModelSpec | None
    workload: WorkloadSpec | None


def parse_head(
    errs: Errors,
    doc: Any,
    catalog: Catalog,
    allowed: Sequence[str],
    *,
    traces: Mapping[str, TraceData] | None = None,
    trace_dir: str | Path | None = None,
    trace_loader: TraceLoader | None = None,
) -> DocumentHead:
    """Check that ``doc`` is an object with no key outside ``allowed`` and parse its
    ``name``, ``description``, ``model`` (against ``catalog``) and ``workload`` (traces
    resolve as in :func:`parse_scenario`), recording problems in ``errs``. A ``doc`` that is
    not an object raises ScenarioValidationError at once (nothing else can be read)."""
    if not isinstance(doc, Mapping):
        errs.add(ROOT, f"must be a JSON object, got {type_name(doc)}")
        raise ScenarioValidationError(errs.by_path)
    reject_unknown_keys(errs, "", doc, allowed)
    name = read_str(errs, "name", doc.get("name"))
    description = read_str(
        errs, "description", doc.get("description"), required=False, max_len=2000
    )
    model: ModelSpec | None = None
    model_slug = read_str(errs, "model", doc.get("model"))
    if model_slug is not None:
        model = catalog.models.get(model_slug)
        if model is None:
            errs.add("model", f"unknown model {model_slug!r}")
    workload = _workload(errs, doc.get("workload"), traces, trace_dir, trace_loader)
    return DocumentHead(name, description, model, workload)


def parse_scenario(
    doc: Mapping[str, Any],
    catalog: Catalog,
    *,
    traces: Mapping[str, TraceData] | None = None,
    trace_dir: str | Path | None = None,
    trace_loader: TraceLoader | None = None,
) -> ScenarioSpec:
    """Validate ``doc`` against ``catalog`` and return the resolved scenario.

    ``traces`` maps the trace names a document may use to their data. With ``trace_dir``
    (the CLI passes the scenario file's folder), a name that is not in ``traces`` is read as
    an Azure-format CSV path relative to it; without it (the web), paths are refused, so a
    document can never make the server read its files. Raises ScenarioValidationError with
    every problem found, keyed by JSON path.
    """
    errs = Errors()
    head = parse_head(
        errs,
        doc,
        catalog,
        _TOP_KEYS,
        traces=traces,
        trace_dir=trace_dir,
        trace_loader=trace_loader,
    )
    systems: list[SystemSpec | None] = []
    raw_systems = read_list(errs, "systems", doc.get("systems"), minimum=1, maximum=MAX_SYSTEMS)
    names: set[str] = set()
    for i, entry in enumerate(raw_systems or ()):
        systems.append(_system(errs, i, entry, catalog, names, head.model))
    slo = _slo(errs, doc.get("slo"))
    costs = parse_costs(errs, "costs", doc.get("costs"), catalog.devices, catalog.cloud_offers)
    capacity = _capacity(errs, doc.get("capacity"), slo)
    if errs:
        raise ScenarioValidationError(errs.by_path)
    name, model, workload = head.name, head.model, head.workload
    assert name is not None and model is not None and workload is not None and slo is not None
    return ScenarioSpec(
        name=name,
        model=model,
        workload=workload,
        systems=tuple(s for s in systems if s is not None),
        slo=slo,
        costs=costs,
        capacity=capacity,
    )


def parse_workload(
    doc: Any,
    *,
    traces: Mapping[str, TraceData] | None = None,
    trace_dir: str | Path | None = None,
    trace_loader: TraceLoader | None = None,
) -> WorkloadSpec:
    """Validate a scenario's ``workload`` object alone (errors keyed ``workload.…``)."""
    errs = Errors()
    spec = _workload(errs, doc, traces, trace_dir, trace_loader)
    if errs or spec is None:
        raise ScenarioValidationError(errs.by_path or {"workload": ["is invalid"]})
    return spec


def trace_names(doc: Any) -> set[str]:
    """Trace names a scenario or plan document refers to (so a caller loads just those);
    never raises."""
    return workload_trace_names(doc.get("workload") if isinstance(doc, Mapping) else None)


def workload_trace_names(workload: Any) -> set[str]:
    """Trace names a ``workload`` object refers to; never raises."""
    names: set[str] = set()
    if not isinstance(workload, Mapping):
        return names
    for key in ("arrival", "input_tokens", "output_tokens"):
        obj = workload.get(key)
        if isinstance(obj, Mapping) and isinstance(obj.get("trace"), str):
            names.add(obj["trace"])
    return names


def with_new_system_options(doc: Any) -> Any:
    """``doc`` (a scenario document, not validated yet) with each system that names none of
    its policy's ``new_system_options`` given them (a copy; anything else is unchanged).

    What the builder and the API do when a scenario is *created*: a new homogeneous system
    runs continuous batching as vLLM does today. A system that names any of those options
    chose its batching itself and is left as given; stored scenarios are never rewritten.
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("systems"), list):
        return doc
    out = dict(doc)
    systems = []
    for system in doc["systems"]:
        if isinstance(system, Mapping) and isinstance(system.get("policy"), str):
            try:
                fresh = get_policy(system["policy"]).new_system_options
            except UnknownPolicyError:
                fresh = {}
            options = system.get("options", {})
            if fresh and isinstance(options, Mapping) and not set(fresh) & set(options):
                system = {**system, "options": {**options, **fresh}}
        systems.append(system)
    out["systems"] = systems
    return out


def _dist_document(dist: LengthDist, trace: str | None) -> Any:
    if dist.kind is LengthDistKind.FIXED:
        return dist.value
    if dist.kind is LengthDistKind.UNIFORM:
        return {"dist": "uniform", "low": dist.low, "high": dist.high}
    if dist.kind is LengthDistKind.LOGNORMAL:
        out: dict[str, Any] = {"dist": "lognormal", "median": dist.median, "sigma": dist.sigma}
        if dist.low is not None:
            out["low"] = dist.low
        if dist.high is not None:
            out["high"] = dist.high
        return out
    return {"dist": "trace", "trace": trace} if trace else {"dist": "trace"}


def scenario_to_document(spec: ScenarioSpec) -> dict[str, Any]:
    """The scenario document of ``spec`` (parsing it again gives an equal spec).

    Runtimes are always named explicitly and options carry their resolved defaults, so the
    document pins down what was simulated even if catalog defaults change later.
    """
    wl = spec.workload
    trace = wl.trace.name if wl.trace is not None else None
    arrival: dict[str, Any] = {"kind": wl.arrival.kind.value}
    if wl.arrival.kind is ArrivalKind.POISSON:
        arrival["rate_per_s"] = wl.arrival.rate_per_s
    elif wl.arrival.kind is ArrivalKind.TRACE:
        arrival["trace"] = trace
        arrival["time_scale"] = wl.arrival.time_scale
    doc: dict[str, Any] = {
        "name": spec.name,
        "model": spec.model.slug,
        "workload": {
            "requests": wl.requests,
            "input_tokens": _dist_document(wl.input_tokens, trace),
            "output_tokens": _dist_document(wl.output_tokens, trace),
            "arrival": arrival,
            "seed": wl.seed,
            **(
                {
                    "shared_prefix": {
                        "tokens": wl.shared_prefix.tokens,
                        "fraction": wl.shared_prefix.fraction,
                    }
                }
                if wl.shared_prefix is not None
                else {}
            ),
        },
        "systems": [
            {
                "name": s.name,
                "policy": s.policy,
                "devices": [
                    {
                        "device": p.device.slug,
                        "count": p.count,
                        **({"role": p.role} if p.role else {}),
                        "runtime": p.runtime.slug,
                        **(
                            {"price_usd": p.quoted_price_usd}
                            if p.quoted_price_usd is not None
                            else {}
                        ),
                        **({"tdp_w": p.quoted_tdp_w} if p.quoted_tdp_w is not None else {}),
                    }
                    for p in s.devices
                ],
                "options": dict(s.options),
            }
            for s in spec.systems
        ],
    }
    slo = {k: getattr(spec.slo, k) for k in _SLO_KEYS if getattr(spec.slo, k) is not None}
    if slo:
        doc["slo"] = slo
    if spec.costs is not None:
        doc["costs"] = spec.costs.as_document()
    if spec.capacity is not None:
        doc["capacity"] = {"requests": spec.capacity.requests, "steps": spec.capacity.steps}
    return doc


__all__ = [
    "MAX_DEVICES_PER_SYSTEM",
    "MAX_OPTIONS",
    "MAX_PLACEMENTS_PER_SYSTEM",
    "MAX_PRICE_USD",
    "MAX_RATE_PER_S",
    "MAX_REQUESTS",
    "MAX_SEED",
    "MAX_SYSTEMS",
    "MAX_TDP_W",
    "MAX_TIME_SCALE",
    "MAX_TOKENS",
    "MAX_TRACE_ROWS",
    "ROOT",
    "DocumentHead",
    "parse_head",
    "parse_scenario",
    "parse_workload",
    "scenario_to_document",
    "trace_names",
    "with_new_system_options",
    "workload_trace_names",
]
