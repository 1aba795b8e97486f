"""The search space: configurations grouped by *signature* (policy, options and the device
entry in each role), each group holding every count combination as a numpy matrix.

Grouping is what makes the screen fast: everything that depends on which devices play
which role (per-request service times, memory fit) is computed once per signature, and
everything that depends on the counts (capacities, capital cost, power) is evaluated for
all count combinations of the group at once.

A configuration's *key* is canonical and human-readable, e.g.
``glitches:1xa100-80gb[prefill]+7xu280[decode]:prefetch_ratio=4``; it identifies the
configuration in results, in the database (unique per plan) and across workers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from itertools import product
from typing import Any

import numpy as np

from simulations.core.policies import get_policy
from simulations.core.policies.base import RoleSpec
from simulations.core.scenario import MAX_DEVICES_PER_SYSTEM
from simulations.core.spec import DevicePlacement, SystemSpec

from .document import (
    PlanSpec,
    count_range,
    plan_roles,
    policy_traits,
    role_may_be_empty,
)

#: Constraint names in the order they are checked (the first violated one is counted).
CONSTRAINT_ORDER = (
    "max_devices",
    "max_capex_usd",
    "max_power_w",
    "max_devices_per_node",
    "max_nodes",
)


@dataclass(frozen=True)
class Signature:
    """What a group of configurations shares: policy, option values, and for each filled
    role the device entry playing it (``roles`` is in the policy's role order)."""

    policy: str
    options: tuple[tuple[str, Any], ...]
    roles: tuple[tuple[str, int], ...]

    def role_entry(self, role: str) -> int | None:
        """The device entry playing ``role`` (None if the role is empty)."""
        for name, entry in self.roles:
            if name == role:
                return entry
        return None


@dataclass(frozen=True)
class Config:
    """One configuration: a signature with a count per filled role."""

    signature: Signature
    counts: tuple[int, ...]
    key: str
    capex_usd: float
    power_w: float

    @property
    def policy(self) -> str:
        """The policy's name."""
        return self.signature.policy

    def entries(self) -> tuple[int, ...]:
        """Device entries used (one per filled role)."""
        return tuple(e for _, e in self.signature.roles)

    @property
    def device_count(self) -> int:
        """Devices in the system."""
        return int(sum(self.counts))


@dataclass
class Group:
    """Every count combination of one signature, after the constraints.

    ``counts`` is (configurations × filled roles); ``capex_usd`` and ``power_w`` are per
    configuration.
    """

    signature: Signature
    counts: np.ndarray
    capex_usd: np.ndarray
    power_w: np.ndarray

    def __len__(self) -> int:
        return int(self.counts.shape[0])

    def config(self, i: int, plan: PlanSpec) -> Config:
        """The ``i``-th configuration of the group."""
        counts = tuple(int(c) for c in self.counts[i])
        return Config(
            self.signature,
            counts,
            config_key(self.signature, counts, plan),
            float(self.capex_usd[i]),
            float(self.power_w[i]),
        )


def _value_text(v: Any) -> str:
    return _value_text_cached(type(v).__name__, v)


@cache
def _value_text_cached(kind: str, v: Any) -> str:
    # Option values are few and hashable; keys are built for every survivor. The type name
    # is part of the key so that True and 1 (equal, same hash) stay distinct.
    return v if kind == "str" else json.dumps(v)


def config_key(sig: Signature, counts: tuple[int, ...], plan: PlanSpec) -> str:
    """The canonical key of a configuration."""
    parts = []
    for (role, entry), count in zip(sig.roles, counts, strict=True):
        label = plan.devices[entry].label
        parts.append(f"{count}x{label}" + (f"[{role}]" if role else ""))
    key = f"{sig.policy}:{'+'.join(parts)}"
    if sig.options:
        key += ":" + ",".join(f"{k}={_value_text(v)}" for k, v in sig.options)
    return key


def describe(config: Config, plan: PlanSpec) -> str:
    """Plain-language name, e.g. ``1× a100-80gb [prefill] + 7× u280 [decode] (glitches)``."""
    parts = []
    for (role, entry), count in zip(config.signature.roles, config.counts, strict=True):
        parts.append(f"{count}× {plan.devices[entry].label}" + (f" [{role}]" if role else ""))
    opts = ", ".join(f"{k}={_value_text(v)}" for k, v in config.signature.options)
    return " + ".join(parts) + f" ({config.policy}{', ' + opts if opts else ''})"


def system_document(config: Config, plan: PlanSpec) -> dict[str, Any]:
    """The configuration as a scenario ``systems`` entry (docs/architecture.md), runtimes
    named."""
    devices = []
    for (role, entry), count in zip(config.signature.roles, config.counts, strict=True):
        choice = plan.devices[entry]
        item: dict[str, Any] = {"device": choice.device.slug, "count": count}
        if role:
            item["role"] = role
        item["runtime"] = choice.runtime.slug
        devices.append(item)
    return {
        "name": config.key,
        "policy": config.policy,
        "devices": devices,
        "options": dict(config.signature.options),
    }


def system_spec(config: Config, plan: PlanSpec) -> SystemSpec:
    """The configuration as a core SystemSpec (options resolved with the policy's defaults).

    A placement carries the plan's price as its quote where the plan quotes one or prices a
    memory configuration, so the engine's capex and per-device prices are the plan's, and
    the plan's power quote (the entry's ``tdp_w``), so the result says where power came
    from and the report's scenario keeps the quote."""
    cls = get_policy(config.policy)
    placements = tuple(
        DevicePlacement(
            device=plan.devices[entry].device,
            count=count,
            runtime=plan.devices[entry].runtime,
            role=role,
            quoted_price_usd=plan.devices[entry].price_usd
            if plan.devices[entry].quoted_price_usd is not None or plan.devices[entry].variant
            else None,
            quoted_tdp_w=plan.devices[entry].quoted_tdp_w,
        )
        for (role, entry), count in zip(config.signature.roles, config.counts, strict=True)
    )
    options = cls.resolve_options(dict(config.signature.options))
    return SystemSpec(name=config.key, policy=config.policy, devices=placements, options=options)


def config_to_dict(config: Config) -> dict[str, Any]:
    """A configuration as plain JSON (what a worker needs to simulate it)."""
    sig = config.signature
    return {
        "key": config.key,
        "policy": sig.policy,
        "options": [[k, v] for k, v in sig.options],
        "roles": [[r, e] for r, e in sig.roles],
        "counts": list(config.counts),
        "capex_usd": config.capex_usd,
        "power_w": config.power_w,
    }


def config_from_dict(d: dict[str, Any], plan: PlanSpec) -> Config:
    """Inverse of :func:`config_to_dict`; the key is recomputed and must match."""
    sig = Signature(
        str(d["policy"]),
        tuple((str(k), v) for k, v in d["options"]),
        tuple((str(r), int(e)) for r, e in d["roles"]),
    )
    counts = tuple(int(c) for c in d["counts"])
    key = config_key(sig, counts, plan)
    if key != d["key"]:
        raise ValueError(f"configuration {d['key']!r} does not match this plan ({key!r})")
    return Config(sig, counts, key, float(d["capex_usd"]), float(d["power_w"]))


def signatures(plan: PlanSpec) -> Iterator[Signature]:
    """Every signature of the plan's space, in a deterministic order."""
    for pol in plan.policies:
        layouts: dict[tuple[RoleSpec, ...], list[list[int | None]]] = {}
        for opts in pol.option_sets():
            # the roles this option set's systems fill (its policy's plan_roles)
            roles_of = plan_roles(pol.policy, dict(opts))
            per_role = layouts.get(roles_of)
            if per_role is None:
                per_role = []
                for role in roles_of:
                    eligible: list[int | None] = [
                        k
                        for k in pol.devices
                        if not role.kinds or plan.devices[k].device.kind in role.kinds
                    ]
                    if role_may_be_empty(pol.policy, role, len(eligible)):
                        eligible = [None, *eligible]
                    per_role.append(eligible)
                layouts[roles_of] = per_role
            for combo in product(*per_role):
                roles = tuple(
                    (role.name, entry)
                    for role, entry in zip(roles_of, combo, strict=True)
                    if entry is not None
                )
                if roles:
                    yield Signature(pol.policy, opts, roles)


def replica_devices(sig: Signature) -> int:
    """Devices one engine unit of ``sig`` spans (its policy's
    :meth:`~simulations.core.policies.base.Policy.replica_devices` under its options)."""
    cls = get_policy(sig.policy)
    return cls.replica_devices(cls.resolve_options(dict(sig.options)))


def _count_grid(bounds: list[tuple[int, int]]) -> np.ndarray:
    ranges = [np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in bounds]
    mesh = np.meshgrid(*ranges, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


@dataclass
class Space:
    """The enumerated space: groups that passed the constraints, and what was excluded."""

    groups: list[Group]
    total: int
    excluded: dict[str, int]
    #: Capex of every excluded configuration and the index (into CONSTRAINT_ORDER) of the
    #: constraint it violates, to tell which constraints exclude cheaper systems.
    excluded_capex: np.ndarray
    excluded_code: np.ndarray

    @property
    def admitted(self) -> int:
        """Configurations that satisfy every constraint."""
        return sum(len(g) for g in self.groups)


def violated_constraint(
    plan: PlanSpec,
    policy: str,
    devices: np.ndarray,
    capex: np.ndarray,
    power: np.ndarray,
    slots: np.ndarray | None = None,
) -> np.ndarray:
    """Index into :data:`CONSTRAINT_ORDER` of the first violated constraint, or -1.

    ``slots`` are the devices that take a place in a node (all of ``devices`` by default;
    a host of one of the policy's :attr:`~.spec.PolicyTraits.host_roles` or
    :attr:`~.spec.PolicyTraits.paired_roles` takes none).
    ``max_devices_per_node`` bounds the whole system of a policy that declares itself
    :attr:`~.spec.PolicyTraits.single_node` (its devices exchange data through one host:
    GLITCHES streams KV caches GPU → host → FPGA; Neo-style systems are one node with a
    tensor-parallel GPU group and its host CPU; an H2M2 system is one board whose count
    adds accelerator chips beside its memories)."""
    c = plan.constraints
    per_node_devices = slots if slots is not None else devices
    out = np.full(devices.shape, -1, dtype=np.int64)
    checks: list[np.ndarray] = [devices > MAX_DEVICES_PER_SYSTEM]
    checks.append(capex > c.max_capex_usd if c.max_capex_usd is not None else devices < 0)
    checks.append(power > c.max_power_w if c.max_power_w is not None else devices < 0)
    per_node = c.max_devices_per_node
    if per_node is not None and policy_traits(policy).single_node:
        checks.append(per_node_devices > per_node)
    else:
        checks.append(devices < 0)
    if per_node is not None and c.max_nodes is not None:
        checks.append(np.ceil(per_node_devices / per_node) > c.max_nodes)
    else:
        checks.append(devices < 0)
    for i in range(len(checks) - 1, -1, -1):
        out = np.where(checks[i], i, out)
    return out


def enumerate_space(plan: PlanSpec) -> Space:
    """Every configuration of the plan's space that satisfies its constraints, in groups."""
    groups: list[Group] = []
    total = 0
    excluded = dict.fromkeys(CONSTRAINT_ORDER, 0)
    ex_capex: list[np.ndarray] = []
    ex_code: list[np.ndarray] = []
    for sig in signatures(plan):
        choices = [plan.devices[e] for _, e in sig.roles]
        counts = _count_grid([count_range(sig.policy, r, plan.devices[e]) for r, e in sig.roles])
        traits = policy_traits(sig.policy)
        if traits.paired_roles:
            # a paired role's count is its leader's (one host beside every GPU)
            cols = {r: k for k, (r, _) in enumerate(sig.roles)}
            for role, leader in traits.paired_roles:
                if role in cols and leader in cols:
                    counts = counts[counts[:, cols[role]] == counts[:, cols[leader]]]
            if not len(counts):
                continue
        step = replica_devices(sig)
        if step > 1:
            # only whole replicas of a tensor-parallel group are systems at all
            counts = counts[np.all(counts % step == 0, axis=1)]
            if not len(counts):
                continue
        prices = np.array([c.price_usd for c in choices])
        tdps = np.array([c.device.tdp_w for c in choices])
        capex = counts @ prices
        power = counts @ tdps
        devices = counts.sum(axis=1)
        beside = traits.host_roles | {r for r, _ in traits.paired_roles}
        in_node = [k for k, (r, _) in enumerate(sig.roles) if r not in beside]
        slots = counts[:, in_node].sum(axis=1)
        total += len(counts)
        bad = violated_constraint(plan, sig.policy, devices, capex, power, slots)
        for i, name in enumerate(CONSTRAINT_ORDER):
            excluded[name] += int(np.count_nonzero(bad == i))
        keep = bad < 0
        ex_capex.append(capex[~keep])
        ex_code.append(bad[~keep])
        if np.any(keep):
            groups.append(Group(sig, counts[keep], capex[keep], power[keep]))
    return Space(
        groups,
        total,
        excluded,
        np.concatenate(ex_capex) if ex_capex else np.zeros(0),
        np.concatenate(ex_code) if ex_code else np.zeros(0, dtype=np.int64),
    )


def nodes_needed(plan: PlanSpec, devices: int) -> int | None:
    """Nodes a system of ``devices`` devices occupies (None without a per-node limit)."""
    per_node = plan.constraints.max_devices_per_node
    return None if per_node is None else math.ceil(devices / per_node)


__all__ = [
    "CONSTRAINT_ORDER",
    "Config",
    "Group",
    "Signature",
    "Space",
    "config_from_dict",
    "config_key",
    "config_to_dict",
    "describe",
    "enumerate_space",
    "nodes_needed",
    "replica_devices",
    "signatures",
    "system_document",
    "system_spec",
]
