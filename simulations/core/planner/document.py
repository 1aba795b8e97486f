"""The plan document: what to search, for which workload, against which targets.

A plan asks "what is the cheapest system that meets these latency targets?". Its document
(JSON; the CLI, the Celery job and the API accept the same shape)::

    {"name": "LLaMA2-7B, Azure conversation lengths at 1 request/s",
     "model": "llama2-7b",
     "workload": {... exactly a scenario's workload object (docs/architecture.md) ...},
     "targets": {"ttft_p90_ms": 1000, "tpot_p90_ms": 50, "min_throughput_tok_s": 100},
     "space": {
       "devices": [{"device": "a100-80gb", "max_count": 4},
                   {"device": "u280", "min_count": 1, "max_count": 8,
                    "runtime": "flightllm-w4a8"},
                   {"device": "t4", "max_count": 4, "price_usd": 2500}],
       "policies": [{"policy": "homogeneous", "options": {"max_batch": [1, 16]}},
                    {"policy": "glitches", "options": {"prefetch_ratio": [4]},
                     "devices": ["a100-80gb", "u280"]}]},
     "constraints": {"max_capex_usd": 200000, "max_power_w": 4000,
                     "max_devices_per_node": 8, "max_nodes": 1},
     "search": {"max_confirmations": 400, "round_size": 8, "sensitivity": true,
                "max_load_factor": 8}}

:func:`parse_plan` validates the whole document against a catalog and reports *every*
problem at once, keyed by JSON path, through :mod:`simulations.core.json_fields` (the workload
object is parsed by exactly the code that parses a scenario's), raising
:class:`~simulations.core.errors.ScenarioValidationError`.

Meaning of the space: every policy entry is tried with every combination of its option
values; each of the policy's device roles (``RoleSpec``) takes one device entry whose kind
the role accepts (or none, for an optional role) with a count in ``[min_count,
max_count]``. ``devices`` on a policy entry restricts which device entries it may use.
The planner minimises capital cost, so every device entry needs a price: a device entry's
``price_usd`` (the user's quote, USD per device, finite, in ``(0, MAX_PRICE_USD]``) is
required when the catalog has none and overrides the catalog's when given; the result
says where each price came from. A device entry of a board with HBM and LPDDR tiers (H2M2)
may list ``memory_options``: ``{"hbm_gb": [48, 96], "lpddr_gb": [256, 512],
"hbm_usd_per_gb": 20, "lpddr_usd_per_gb": 4}`` — one device choice per capacity
combination (labelled ``h2m2[hbm48+lpddr256]``), priced at the entry's ``price_usd`` plus
each listed tier's capacity at its price per GB.

A device entry's ``tdp_w`` (the board power per device the user measured or was quoted,
W, finite, in ``(0, MAX_TDP_W]``, not below the catalog's idle power) works like its price
quote: required when the vendor publishes no power (catalog ``tdp_w`` null, e.g. TPUs),
and overriding the catalog's figure when given. It replaces the device record's ``tdp_w``
for the whole search (the power constraint, the screen's energy, the engine runs), and the
report's scenario entries carry it as their ``tdp_w``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulations.core.catalog import Catalog
from simulations.core.devices import CONTAINER_KINDS
from simulations.core.errors import ScenarioValidationError, UnknownPolicyError
from simulations.core.json_fields import (
    MAX_PRICE_USD,
    MAX_TDP_W,
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
from simulations.core.policies import get_policy
from simulations.core.policies.base import RoleSpec, screened_policies
from simulations.core.scenario import TraceLoader, parse_head, trace_names
from simulations.core.spec import (
    CostSpec,
    DeviceSpec,
    ModelSpec,
    RuntimeProfile,
    SloSpec,
    TraceData,
    WorkloadSpec,
)
from simulations.core.tco import parse_costs

# --- limits ----------------------------------------------------------------------------------

#: Requests of a plan's workload (every confirmed configuration simulates all of them).
MAX_PLAN_REQUESTS = 20_000
#: Device entries of a space.
MAX_DEVICE_ENTRIES = 32
#: Policy entries of a space.
MAX_POLICY_ENTRIES = 16
#: Values tried for one option.
MAX_OPTION_VALUES = 16
#: Largest count of one device entry in one role.
MAX_COUNT = 256
#: Configurations a space may describe (counted before anything is enumerated).
MAX_CONFIGS = 200_000
#: Engine confirmations one plan may run.
MAX_CONFIRMATIONS = 20_000
#: Configurations confirmed per round (a round is fanned out over the workers).
MAX_ROUND_SIZE = 256
#: Largest factor the sensitivity analysis scales the arrival rate by.
MAX_LOAD_FACTOR = 1000.0

_TOP_KEYS = (
    "name",
    "description",
    "model",
    "workload",
    "targets",
    "space",
    "constraints",
    "search",
    "costs",
    "objective",
)
#: What the recommendation minimises (docs/architecture.md "TCO"): capital cost, total cost
#: of ownership per year, dollars per million generated tokens, or energy per token. The
#: two cost objectives need the plan's ``costs``.
OBJECTIVES = ("capex", "tco_per_year", "usd_per_million_tokens", "energy_per_token")
_TARGET_KEYS = (
    "ttft_p90_ms",
    "tpot_p90_ms",
    "ttft_p99_ms",
    "tpot_p99_ms",
    "min_throughput_tok_s",
)
_SPACE_KEYS = ("devices", "policies")
_DEVICE_KEYS = (
    "device",
    "runtime",
    "min_count",
    "max_count",
    "price_usd",
    "tdp_w",
    "memory_options",
)
_MEMORY_OPTION_KEYS = ("hbm_gb", "lpddr_gb", "hbm_usd_per_gb", "lpddr_usd_per_gb")
#: Largest memory capacity one tier may be given (GB) and largest price per GB (USD).
MAX_TIER_GB = 65536.0
MAX_USD_PER_GB = 1e5
_POLICY_KEYS = ("policy", "options", "devices")
_CONSTRAINT_KEYS = ("max_capex_usd", "max_power_w", "max_devices_per_node", "max_nodes")
_SEARCH_KEYS = (
    "max_confirmations",
    "round_size",
    "sensitivity",
    "max_load_factor",
    "load_tolerance",
    "pareto_tolerance",
)


@dataclass(frozen=True, slots=True)
class PolicyTraits:
    """How the planner lays out a system of one policy, as the policy declares it
    (:class:`~simulations.core.policies.base.Policy`): never by the policy's name."""

    #: The role whose count is the tensor-parallel degree of one server (Neo §4), not a
    #: number of replicas; ``None``: the policy has no tensor-parallel group.
    tensor_parallel_role: str | None
    #: Roles that are the node's host (a node has one): count 1, no device slot.
    host_roles: frozenset[str]
    #: Whether the system must fit in one node (``max_devices_per_node`` bounds it whole).
    single_node: bool
    #: Roles whose count equals another role's (role → the role it follows): no device slot.
    paired_roles: tuple[tuple[str, str], ...] = ()


def policy_traits(policy: str) -> PolicyTraits:
    """The layout traits the registered policy ``policy`` declares (UnknownPolicyError if
    none is registered under that name). Read from the registry on every call, so a
    policy registered later is laid out by what it declares."""
    cls = get_policy(policy)
    return PolicyTraits(
        tensor_parallel_role=cls.tensor_parallel_role,
        host_roles=frozenset(cls.host_roles),
        single_node=bool(cls.single_node),
        paired_roles=tuple(sorted(cls.paired_roles.items())),
    )


def is_host_role(policy: str, role: str) -> bool:
    """Whether ``role`` of ``policy`` is the node's host rather than a count to search: the
    host CPU of Neo-style systems (the policies take exactly one; a node has one host).
    Such a role always has count 1 and takes no device slot of the node."""
    return role in policy_traits(policy).host_roles


def role_may_be_empty(policy: str, role: RoleSpec, eligible: int) -> bool:
    """Whether the space tries ``role`` empty: an optional role may be, except a host role
    with a host to choose (every node has a host, and the baseline that leaves it idle must
    pay for it too, or it would win on the host's price alone)."""
    if role.required:
        return False
    return not (is_host_role(policy, role.name) and eligible > 0)


def role_option_sets(
    policy: str, options: Sequence[tuple[str, Sequence[Any]]]
) -> list[dict[str, Any]]:
    """Every combination of the values a policy entry lists for the policy's
    :attr:`~simulations.core.policies.base.Policy.role_options` (the declared default where
    it lists none): one per layout of roles its systems may have."""
    cls = get_policy(policy)
    declared = {o.name: o.default for o in cls.options}
    listed = dict(options)
    names = [n for n in cls.role_options if n in declared]
    values = [tuple(listed.get(n, (declared[n],))) for n in names]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def plan_roles(policy: str, options: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
    """The roles the planner fills for a system of ``policy`` with ``options`` (an option
    set of a policy entry; the role options it does not list take their defaults)."""
    cls = get_policy(policy)
    declared = {o.name: o.default for o in cls.options}
    chosen = {n: options.get(n, declared.get(n)) for n in cls.role_options}
    return cls.plan_roles(chosen)


def _layout_text(layout: Mapping[str, Any]) -> str:
    return f" with {', '.join(f'{k} {v}' for k, v in layout.items())}" if layout else ""


def count_range(policy: str, role: str, choice: DeviceChoice) -> tuple[int, int]:
    """The counts ``choice`` takes in ``role`` of ``policy``: its ``[min_count, max_count]``,
    or exactly 1 for a host role."""
    if is_host_role(policy, role):
        return 1, 1
    return choice.min_count, choice.max_count


# --- the parsed plan -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Targets:
    """Latency and throughput targets (``None``: no target). Percentiles are numpy's
    linear percentiles over the simulated requests, as in the result document."""

    ttft_p90_ms: float | None = None
    tpot_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    min_throughput_tok_s: float | None = None

    def slo(self) -> SloSpec:
        """The latency targets as the scenario SLO the engine reports attainment against."""
        return SloSpec(
            ttft_p90_ms=self.ttft_p90_ms,
            tpot_p90_ms=self.tpot_p90_ms,
            ttft_p99_ms=self.ttft_p99_ms,
            tpot_p99_ms=self.tpot_p99_ms,
        )

    def ttft(self) -> list[tuple[float, float]]:
        """(percentile, target ms) pairs of the TTFT targets."""
        return [(q, t) for q, t in ((90.0, self.ttft_p90_ms), (99.0, self.ttft_p99_ms)) if t]

    def tpot(self) -> list[tuple[float, float]]:
        """(percentile, target ms) pairs of the TPOT targets."""
        return [(q, t) for q, t in ((90.0, self.tpot_p90_ms), (99.0, self.tpot_p99_ms)) if t]

    def as_dict(self) -> dict[str, float]:
        """The targets that are set, by document key."""
        return {k: v for k in _TARGET_KEYS if (v := getattr(self, k)) is not None}


@dataclass(frozen=True, slots=True)
class Constraints:
    """Hard limits on a configuration, checked before anything is simulated.

    ``max_power_w`` bounds the sum of the devices' TDPs (provisioned power). A node holds
    at most ``max_devices_per_node`` devices; a data-parallel system (``homogeneous``) may
    span up to ``max_nodes`` nodes, while a system of a policy that declares itself
    single-node (:attr:`PolicyTraits.single_node`: ``glitches`` streams KV caches GPU →
    host → FPGA; ``neo``, ``gpu-only`` and ``fastdecode+`` are one tensor-parallel GPU
    group with its host CPU; ``h2m2`` is one board) must fit in one node, since the engine
    models a single host. A host role (:attr:`PolicyTraits.host_roles`) or a paired role
    (:attr:`PolicyTraits.paired_roles`: one host CPU beside each GPU) takes no device slot.
    """

    max_capex_usd: float | None = None
    max_power_w: float | None = None
    max_devices_per_node: int | None = None
    max_nodes: int | None = None

    def as_dict(self) -> dict[str, float]:
        """The constraints that are set, by document key."""
        return {k: v for k in _CONSTRAINT_KEYS if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class DeviceChoice:
    """One device entry of the space: a catalog device on a software stack, with counts."""

    index: int
    device: DeviceSpec
    runtime: RuntimeProfile
    min_count: int
    max_count: int
    runtime_named: bool = False
    #: The plan document's ``price_usd`` for this entry (the user's quote), if given.
    quoted_price_usd: float | None = None
    #: Position of the entry in the document's ``space.devices`` (one document entry with
    #: ``memory_options`` becomes one choice per memory configuration).
    doc_index: int = -1
    #: ``hbm96+lpddr512`` for a memory configuration of ``memory_options`` ("" otherwise).
    variant: str = ""
    #: Price of that memory configuration (the document's per-GB prices × capacities).
    memory_price_usd: float = 0.0
    #: The plan document's ``tdp_w`` for this entry (the user's power quote), if given;
    #: :attr:`device` already carries it as its ``tdp_w``.
    quoted_tdp_w: float | None = None

    @property
    def price_usd(self) -> float:
        """The price per device: the plan document's quote when given, else the catalog's
        (one of the two is validated present), plus any priced memory configuration."""
        if self.quoted_price_usd is not None:
            return float(self.quoted_price_usd) + self.memory_price_usd
        assert self.device.price_usd is not None
        return float(self.device.price_usd) + self.memory_price_usd

    @property
    def price_source(self) -> str:
        """Where :attr:`price_usd` comes from: the plan document (the user's quote) or the
        catalog record's cited source."""
        i = self.doc_index if self.doc_index >= 0 else self.index
        memory = (
            f" + memory at space.devices[{i}].memory_options' per-GB prices" if self.variant else ""
        )
        if self.quoted_price_usd is not None:
            return f"plan document (space.devices[{i}].price_usd{memory})"
        cited = self.device.sources.get("price_usd")
        return (f"catalog ({cited})" if cited else "catalog") + memory

    @property
    def power_source(self) -> str:
        """Where the device's ``tdp_w`` comes from: the plan document (the user's quote) or
        the catalog record's cited source."""
        if self.quoted_tdp_w is not None:
            i = self.doc_index if self.doc_index >= 0 else self.index
            return f"plan document (space.devices[{i}].tdp_w)"
        cited = self.device.sources.get("tdp_w")
        return f"catalog ({cited})" if cited else "catalog"

    @property
    def label(self) -> str:
        """``slug`` or ``slug@runtime`` when the entry names a runtime, with ``[variant]``
        for a memory configuration."""
        out = self.device.slug
        if self.runtime_named:
            out = f"{out}@{self.runtime.slug}"
        return f"{out}[{self.variant}]" if self.variant else out


@dataclass(frozen=True)
class PolicyChoice:
    """One policy entry: the policy, the option values to try and the devices it may use."""

    index: int
    policy: str
    options: tuple[tuple[str, tuple[Any, ...]], ...]
    devices: tuple[int, ...]  # indices into PlanSpec.devices

    def option_sets(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every combination of the option values (sorted by option name)."""
        names = [n for n, _ in self.options]
        values = [v for _, v in self.options]
        return [tuple(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """How the search runs. None of these change *which* configuration wins (unless the
    confirmation budget runs out, which the result says): ``round_size`` configurations
    are confirmed per round; ``pareto_tolerance`` is the relative slack within which a
    configuration counts as covered by a front member of no higher capex (an ε-Pareto
    front: 0 asks for the exact front, at the price of simulating every configuration
    whose throughput ceiling is a hair above the best confirmed one)."""

    max_confirmations: int = 400
    round_size: int = 8
    sensitivity: bool = True
    max_load_factor: float = 8.0
    load_tolerance: float = 0.02
    pareto_tolerance: float = 0.01


@dataclass(frozen=True)
class PlanSpec:
    """A validated plan with every catalog slug resolved."""

    name: str
    model: ModelSpec
    workload: WorkloadSpec
    targets: Targets
    devices: tuple[DeviceChoice, ...]
    policies: tuple[PolicyChoice, ...]
    constraints: Constraints = field(default_factory=Constraints)
    search: SearchOptions = field(default_factory=SearchOptions)
    description: str = ""
    costs: CostSpec | None = None
    objective: str = "capex"


# --- parsing ---------------------------------------------------------------------------------


def _opt_positive(errs: Errors, path: str, obj: Mapping[str, Any], key: str) -> float | None:
    if obj.get(key) is None:
        return None
    return read_positive(errs, key_path(path, key), obj[key], maximum=1e15)


def _targets(errs: Errors, value: Any) -> Targets | None:
    obj = read_mapping(errs, "targets", value) if value is not None else None
    if value is None:
        errs.add("targets", "is required (at least one of: " + ", ".join(_TARGET_KEYS) + ")")
        return None
    if obj is None:
        return None
    reject_unknown_keys(errs, "targets", obj, _TARGET_KEYS)
    before = len(errs.by_path)
    vals = {k: _opt_positive(errs, "targets", obj, k) for k in _TARGET_KEYS}
    if len(errs.by_path) != before:
        return None
    if all(v is None for v in vals.values()):
        errs.add("targets", "set at least one of: " + ", ".join(_TARGET_KEYS))
        return None
    return Targets(**vals)


def _constraints(errs: Errors, value: Any) -> Constraints | None:
    if value is None:
        return Constraints()
    obj = read_mapping(errs, "constraints", value)
    if obj is None:
        return None
    reject_unknown_keys(errs, "constraints", obj, _CONSTRAINT_KEYS)
    before = len(errs.by_path)
    capex = _opt_positive(errs, "constraints", obj, "max_capex_usd")
    power = _opt_positive(errs, "constraints", obj, "max_power_w")
    per_node = nodes = None
    if obj.get("max_devices_per_node") is not None:
        per_node = read_int(
            errs,
            "constraints.max_devices_per_node",
            obj["max_devices_per_node"],
            minimum=1,
            maximum=1024,
        )
    if obj.get("max_nodes") is not None:
        nodes = read_int(errs, "constraints.max_nodes", obj["max_nodes"], minimum=1, maximum=1024)
        if per_node is None and "max_devices_per_node" not in obj:
            errs.add("constraints.max_nodes", "needs max_devices_per_node (devices in one node)")
    if len(errs.by_path) != before:
        return None
    return Constraints(capex, power, per_node, nodes)


def _search(errs: Errors, value: Any) -> SearchOptions | None:
    if value is None:
        return SearchOptions()
    obj = read_mapping(errs, "search", value)
    if obj is None:
        return None
    reject_unknown_keys(errs, "search", obj, _SEARCH_KEYS)
    d = SearchOptions()
    before = len(errs.by_path)
    conf: int | None = d.max_confirmations
    if "max_confirmations" in obj:
        conf = read_int(
            errs,
            "search.max_confirmations",
            obj["max_confirmations"],
            minimum=1,
            maximum=MAX_CONFIRMATIONS,
        )
    rnd: int | None = d.round_size
    if "round_size" in obj:
        rnd = read_int(
            errs, "search.round_size", obj["round_size"], minimum=1, maximum=MAX_ROUND_SIZE
        )
    sens = d.sensitivity
    if "sensitivity" in obj:
        sens = obj["sensitivity"]
        if not isinstance(sens, bool):
            errs.add("search.sensitivity", f"must be true or false, got {type_name(sens)}")
    factor: float | None = d.max_load_factor
    if "max_load_factor" in obj:
        factor = read_positive(
            errs, "search.max_load_factor", obj["max_load_factor"], maximum=MAX_LOAD_FACTOR
        )
        if factor is not None and factor <= 1.0:
            errs.add("search.max_load_factor", "must be greater than 1")
    tol: float | None = d.load_tolerance
    if "load_tolerance" in obj:
        tol = read_positive(errs, "search.load_tolerance", obj["load_tolerance"], maximum=0.5)
        if tol is not None and tol < 1e-4:
            errs.add("search.load_tolerance", "must be at least 0.0001")
    pareto: float | None = d.pareto_tolerance
    if "pareto_tolerance" in obj:
        raw = obj["pareto_tolerance"]
        if raw == 0 and not isinstance(raw, bool):
            pareto = 0.0
        else:
            pareto = read_positive(errs, "search.pareto_tolerance", raw, maximum=0.5)
    if len(errs.by_path) != before:
        return None
    assert conf is not None and rnd is not None and factor is not None and tol is not None
    assert pareto is not None
    return SearchOptions(conf, rnd, bool(sens), factor, tol, pareto)


def _device_entries(
    errs: Errors, value: Any, catalog: Catalog
) -> tuple[list[DeviceChoice], dict[str, list[int]]]:
    path = "space.devices"
    entries = read_list(errs, path, value, minimum=1, maximum=MAX_DEVICE_ENTRIES)
    out: list[DeviceChoice] = []
    by_slug: dict[str, list[int]] = {}
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(entries or ()):
        p = f"{path}[{i}]"
        obj = read_mapping(errs, p, raw)
        if obj is None:
            continue
        reject_unknown_keys(errs, p, obj, _DEVICE_KEYS)
        slug = read_str(errs, key_path(p, "device"), obj.get("device"), max_len=64)
        device = catalog.devices.get(slug) if slug is not None else None
        if slug is not None and device is None:
            errs.add(key_path(p, "device"), f"unknown device {slug!r}")
        quoted: float | None = None
        if obj.get("price_usd") is not None:
            quoted = read_positive(
                errs, key_path(p, "price_usd"), obj["price_usd"], maximum=MAX_PRICE_USD
            )
            if quoted is None:
                device = None
        elif device is not None and device.price_usd is None:
            errs.add(
                key_path(p, "price_usd"),
                f"is required: the catalog has no price for {slug!r} and the planner "
                "minimises capital cost; give your quote in USD per device",
            )
            device = None
        if device is not None and device.kind in CONTAINER_KINDS:
            errs.add(
                key_path(p, "device"),
                f"{slug!r} holds other devices ({device.kind}); search its components instead",
            )
            device = None
        # The power quote replaces the record's tdp_w before anything reads it (the power
        # constraint, memory variants, the screen and the engine all see one figure).
        tdp_quote, tdp_ok = read_power_quote(errs, key_path(p, "tdp_w"), obj.get("tdp_w"), device)
        if not tdp_ok:
            device = None
        elif device is not None and tdp_quote is not None and tdp_quote != device.tdp_w:
            device = replace(device, tdp_w=tdp_quote)
        lo = read_int(
            errs, key_path(p, "min_count"), obj.get("min_count", 1), minimum=1, maximum=MAX_COUNT
        )
        hi = read_int(
            errs, key_path(p, "max_count"), obj.get("max_count"), minimum=1, maximum=MAX_COUNT
        )
        if lo is not None and hi is not None and lo > hi:
            errs.add(key_path(p, "max_count"), "must not be below min_count")
        runtime: RuntimeProfile | None = None
        named = obj.get("runtime") is not None
        if named:
            rt_slug = read_str(errs, key_path(p, "runtime"), obj["runtime"], max_len=64)
            if rt_slug is not None:
                runtime = catalog.runtimes.get(rt_slug)
                if runtime is None:
                    errs.add(key_path(p, "runtime"), f"unknown runtime profile {rt_slug!r}")
                elif device is not None and runtime.device_kind != device.kind:
                    errs.add(
                        key_path(p, "runtime"),
                        f"runtime {rt_slug!r} is for {runtime.device_kind} devices, "
                        f"not {device.kind} ({device.slug})",
                    )
                    runtime = None
        elif device is not None:
            default = catalog.default_runtimes.get(device.kind)
            if default is None or default not in catalog.runtimes:
                errs.add(
                    key_path(p, "runtime"),
                    f"no default runtime profile for {device.kind} devices; name one",
                )
            else:
                runtime = catalog.runtimes[default]
        variants: list[tuple[str, DeviceSpec, float]] = []
        if obj.get("memory_options") is not None:
            variants = _memory_variants(errs, key_path(p, "memory_options"), obj, device)
            if not variants:
                continue
        if device is None or runtime is None or lo is None or hi is None or lo > hi:
            continue
        pair = (device.slug, runtime.slug)
        if pair in seen:
            errs.add(key_path(p, "device"), f"{device.slug} on {runtime.slug} is listed twice")
            continue
        seen.add(pair)
        for name, spec, memory_usd in variants or [("", device, 0.0)]:
            by_slug.setdefault(device.slug, []).append(len(out))
            out.append(
                DeviceChoice(
                    len(out),
                    spec,
                    runtime,
                    lo,
                    hi,
                    named,
                    quoted,
                    i,
                    name,
                    memory_usd,
                    quoted_tdp_w=tdp_quote,
                )
            )
    return out, by_slug


def _memory_variants(
    errs: Errors, path: str, obj: Mapping[str, Any], device: DeviceSpec | None
) -> list[tuple[str, DeviceSpec, float]]:
    """The memory configurations a device entry's ``memory_options`` lists: every
    combination of its HBM and LPDDR capacities (GB; a tier not listed keeps the catalog's),
    each priced at the document's USD per GB of that tier (required for a listed tier).
    Returns (variant name, the device with those capacities, memory price) per combination,
    or nothing after reporting an error."""
    opts = read_mapping(errs, path, obj["memory_options"])
    if opts is None:
        return []
    before = len(errs.by_path)
    reject_unknown_keys(errs, path, opts, _MEMORY_OPTION_KEYS)
    tiers: dict[str, list[float]] = {}
    per_gb: dict[str, float] = {}
    for tier in ("hbm", "lpddr"):
        key = f"{tier}_gb"
        if opts.get(key) is None:
            continue
        vals = read_list(errs, key_path(path, key), opts[key], minimum=1, maximum=MAX_OPTION_VALUES)
        got = [
            read_positive(errs, f"{key_path(path, key)}[{j}]", v, maximum=MAX_TIER_GB)
            for j, v in enumerate(vals or ())
        ]
        tiers[tier] = sorted({v for v in got if v is not None})
        price = read_positive(
            errs,
            key_path(path, f"{tier}_usd_per_gb"),
            opts.get(f"{tier}_usd_per_gb"),
            maximum=MAX_USD_PER_GB,
        )
        if price is not None:
            per_gb[tier] = price
    if not tiers:
        errs.add(path, "list hbm_gb and/or lpddr_gb: the capacities to try")
    if device is not None:
        kinds = {t.kind.value for t in device.memory}
        for tier in tiers:
            if tier not in kinds:
                errs.add(
                    key_path(path, f"{tier}_gb"),
                    f"{device.slug!r} has no {tier} memory tier "
                    f"(its tiers: {', '.join(sorted(kinds)) or 'none'})",
                )
    if len(errs.by_path) != before or device is None:
        return []
    out = []
    names = list(tiers)
    for combo in itertools.product(*(tiers[t] for t in names)):
        chosen = dict(zip(names, combo, strict=True))
        memory = tuple(
            replace(t, capacity_gb=chosen[t.kind.value]) if t.kind.value in chosen else t
            for t in device.memory
        )
        name = "+".join(f"{t}{chosen[t]:g}" for t in names)
        price = sum(chosen[t] * per_gb[t] for t in names)
        out.append((name, replace(device, memory=memory), price))
    return out


def _policy_entries(
    errs: Errors,
    value: Any,
    devices: Sequence[DeviceChoice],
    by_slug: Mapping[str, list[int]],
    model: ModelSpec | None = None,
) -> list[PolicyChoice]:
    path = "space.policies"
    entries = read_list(errs, path, value, minimum=1, maximum=MAX_POLICY_ENTRIES)
    out: list[PolicyChoice] = []
    for i, raw in enumerate(entries or ()):
        p = f"{path}[{i}]"
        obj = read_mapping(errs, p, raw)
        if obj is None:
            continue
        reject_unknown_keys(errs, p, obj, _POLICY_KEYS)
        name = read_str(errs, key_path(p, "policy"), obj.get("policy"), max_len=64)
        if name is None:
            continue
        try:
            cls = get_policy(name)
        except UnknownPolicyError as exc:
            errs.add(key_path(p, "policy"), str(exc))
            continue
        if not cls.screenable():
            errs.add(
                key_path(p, "policy"),
                f"policy {name!r} cannot be searched: {cls.unscreened_why} "
                f"(searchable: {', '.join(screened_policies())})",
            )
            continue
        why_not = cls.plan_model_error(model) if model is not None else None
        if why_not is not None:
            errs.add(key_path(p, "policy"), f"policy {name!r} cannot serve this model: {why_not}")
            continue
        before = len(errs.by_path)
        declared = {o.name: o for o in cls.options}
        options: list[tuple[str, tuple[Any, ...]]] = []
        raw_opts = obj.get("options", {})
        opts = read_mapping(errs, key_path(p, "options"), raw_opts)
        for key, vals in (opts or {}).items():
            op = key_path(key_path(p, "options"), str(key))
            spec = declared.get(key)
            if spec is None:
                errs.add(
                    op,
                    f"unknown option for policy {name!r} (known: {', '.join(declared) or 'none'})",
                )
                continue
            if not isinstance(vals, list | tuple):
                vals = [vals]
            if not vals:
                errs.add(op, "must list at least one value")
                continue
            if len(vals) > MAX_OPTION_VALUES:
                errs.add(op, f"must list at most {MAX_OPTION_VALUES} values")
                continue
            checked: list[Any] = []
            for j, v in enumerate(vals):
                try:
                    checked.append(spec.validate(v, f"{op}[{j}]"))
                except Exception as exc:  # SpecError from OptionSpec.validate
                    errs.add(getattr(exc, "field", f"{op}[{j}]"), getattr(exc, "message", str(exc)))
            uniq = tuple(dict.fromkeys(checked))
            refused = [(j, cls.unsearchable_option(str(key), v)) for j, v in enumerate(uniq)]
            if model is not None:
                refused += [
                    (j, cls.plan_option_error(model, str(key), v)) for j, v in enumerate(uniq)
                ]
            refused = [(j, why) for j, why in refused if why is not None]
            if refused:
                errs.add(f"{op}[{refused[0][0]}]", str(refused[0][1]))
                continue
            options.append((str(key), uniq))
        allowed = list(range(len(devices)))
        if obj.get("devices") is not None:
            dp = key_path(p, "devices")
            slugs = read_list(errs, dp, obj["devices"], minimum=1, maximum=MAX_DEVICE_ENTRIES)
            allowed = []
            for j, s in enumerate(slugs or ()):
                slug = read_str(errs, f"{dp}[{j}]", s, max_len=64)
                if slug is None:
                    continue
                idx = by_slug.get(slug)
                if idx is None:
                    errs.add(f"{dp}[{j}]", f"{slug!r} is not one of space.devices")
                    continue
                allowed.extend(k for k in idx if k not in allowed)
        if len(errs.by_path) != before:
            continue
        for layout in role_option_sets(name, options):
            for role in cls.plan_roles(layout):
                eligible = [
                    k for k in allowed if not role.kinds or devices[k].device.kind in role.kinds
                ]
                if role.required and not eligible:
                    kinds = ", ".join(role.kinds) or "any"
                    errs.add(
                        key_path(p, "devices")
                        if obj.get("devices") is not None
                        else "space.devices",
                        f"policy {name!r}{_layout_text(layout)} needs a device for its role "
                        f"{role.name!r} ({kinds}); none of the listed devices can play it",
                    )
        out.append(PolicyChoice(len(out), name, tuple(sorted(options)), tuple(sorted(allowed))))
    return out


def count_configurations(devices: Sequence[DeviceChoice], policies: Sequence[PolicyChoice]) -> int:
    """How many configurations the space describes (before constraints); an upper bound
    where a policy's option makes a replica span several devices (the space keeps only
    counts that are whole replicas)."""
    total = 0
    for pol in policies:
        cls = get_policy(pol.policy)
        n_opts = math.prod(len(v) for _, v in pol.options)
        layouts = role_option_sets(pol.policy, pol.options)
        # the option sets are every layout's with each combination of the other options
        per_layout = n_opts // len(layouts)
        for layout in layouts:
            per_roles = 1
            all_may_be_empty = True
            for role in cls.plan_roles(layout):
                eligible = [
                    devices[k]
                    for k in pol.devices
                    if not role.kinds or devices[k].device.kind in role.kinds
                ]
                ranges = [count_range(pol.policy, role.name, d) for d in eligible]
                n = sum(hi - lo + 1 for lo, hi in ranges)
                if role.name in cls.paired_roles:
                    n = len(eligible)  # the count follows the leader's: one per entry at most
                empty = role_may_be_empty(pol.policy, role, len(eligible))
                all_may_be_empty = all_may_be_empty and empty
                per_roles *= n + (1 if empty else 0)
            if all_may_be_empty:
                per_roles -= 1  # the assignment with no device at all
            total += per_layout * max(per_roles, 0)
    return total


def parse_plan(
    doc: Mapping[str, Any],
    catalog: Catalog,
    *,
    traces: Mapping[str, TraceData] | None = None,
    trace_dir: str | Path | None = None,
    trace_loader: TraceLoader | None = None,
) -> PlanSpec:
    """Validate a plan document against ``catalog`` and return the resolved plan.

    Traces resolve as in :func:`~simulations.core.scenario.parse_scenario` (``traces`` by
    name; with ``trace_dir`` also CSV paths relative to it). Raises ScenarioValidationError
    with every problem found, keyed by JSON path.
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
    name, model, workload = head.name, head.model, head.workload
    if workload is not None and workload.requests > MAX_PLAN_REQUESTS:
        errs.add(
            "workload.requests",
            f"must be at most {MAX_PLAN_REQUESTS} for a plan (every confirmed configuration "
            "simulates all of them)",
        )
    targets = _targets(errs, doc.get("targets"))
    devices: list[DeviceChoice] = []
    policies: list[PolicyChoice] = []
    space = doc.get("space")
    if space is None:
        errs.add("space", "is required")
    else:
        obj = read_mapping(errs, "space", space)
        if obj is not None:
            reject_unknown_keys(errs, "space", obj, _SPACE_KEYS)
            devices, by_slug = _device_entries(errs, obj.get("devices"), catalog)
            policies = _policy_entries(errs, obj.get("policies"), devices, by_slug, model)
    constraints = _constraints(errs, doc.get("constraints"))
    search = _search(errs, doc.get("search"))
    costs = parse_costs(errs, "costs", doc.get("costs"), catalog.devices, catalog.cloud_offers)
    objective = doc.get("objective", "capex")
    if objective not in OBJECTIVES:
        errs.add("objective", f"must be one of: {', '.join(OBJECTIVES)}")
    elif objective in ("tco_per_year", "usd_per_million_tokens") and doc.get("costs") is None:
        errs.add("objective", f"{objective} needs the plan's costs")
    if not errs and devices and policies:
        n = count_configurations(devices, policies)
        if n > MAX_CONFIGS:
            errs.add("space", f"describes {n} configurations; at most {MAX_CONFIGS} are allowed")
        elif n == 0:
            errs.add("space", "describes no configuration")
    if errs:
        raise ScenarioValidationError(errs.by_path)
    assert name is not None and model is not None and workload is not None
    assert targets is not None and constraints is not None and search is not None
    return PlanSpec(
        name=name,
        model=model,
        workload=workload,
        targets=targets,
        devices=tuple(devices),
        policies=tuple(policies),
        constraints=constraints,
        search=search,
        description=head.description or "",
        costs=costs,
        objective=str(objective),
    )


__all__ = [
    "MAX_CONFIGS",
    "MAX_PLAN_REQUESTS",
    "MAX_PRICE_USD",
    "MAX_TDP_W",
    "OBJECTIVES",
    "Constraints",
    "DeviceChoice",
    "PlanSpec",
    "PolicyChoice",
    "PolicyTraits",
    "SearchOptions",
    "Targets",
    "count_configurations",
    "count_range",
    "is_host_role",
    "parse_plan",
    "plan_roles",
    "policy_traits",
    "role_may_be_empty",
    "role_option_sets",
    "trace_names",
]
