"""The planner lays out a system by what its policy declares (tensor-parallel role, host
roles, single node), read from the registry, never by the policy's name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any, ClassVar

import pytest

from simulations.core.engine.requests import generate_requests
from simulations.core.planner import PlanSpec, enumerate_space
from simulations.core.planner.document import PolicyChoice, PolicyTraits, policy_traits
from simulations.core.planner.screen import CostCache, Screen
from simulations.core.planner.space import Signature
from simulations.core.policies import base
from simulations.core.policies.base import Policy, RoleSpec, policy_names, register
from tests.core.planner.helpers import neo_doc, parse

#: What the planner assumed of each policy when it knew them by name (before the policies
#: declared it): Neo-style nodes are one tensor-parallel group over their ``gpu`` role with
#: the ``cpu`` role as the node's host; those, ``glitches`` and ``h2m2`` fit in one node —
#: and ``disaggregated`` (added since), which the planner places on one node.
_NAMED_TENSOR_PARALLEL = {"neo", "fastdecode+", "gpu-only"}
_NAMED_HOST_ROLES = {("neo", "cpu"), ("fastdecode+", "cpu"), ("gpu-only", "cpu")}
_NAMED_SINGLE_NODE = {"glitches", "h2m2", "disaggregated", *_NAMED_TENSOR_PARALLEL}
#: Declared since: expert offloading pairs one host CPU with every GPU.
_DECLARED_PAIRED = {"moe-offload": (("host", "gpu"),)}

_TEST_NAME = "test-pooled-node"


def _roles() -> tuple[RoleSpec, ...]:
    return (
        RoleSpec("accel", "GPUs of one tensor-parallel group", ("gpu",)),
        RoleSpec("host", "the node's host CPU", ("cpu",), required=False),
    )


class _NeverRuns(Policy):
    name: ClassVar[str] = "test-never-runs"
    roles: ClassVar[tuple[RoleSpec, ...]] = _roles()

    def run(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("the space and the screen never run a policy")


class _PooledNode(_NeverRuns):
    """Declares Neo's layout under other role names."""

    name: ClassVar[str] = _TEST_NAME
    tensor_parallel_role: ClassVar[str | None] = "accel"
    host_roles: ClassVar[frozenset[str]] = frozenset({"host"})
    single_node: ClassVar[bool] = True


class _PairedHosts(_NeverRuns):
    """The same roles, one host beside every accelerator (as expert offloading lays out)."""

    name: ClassVar[str] = "test-paired-hosts"
    paired_roles: ClassVar[dict[str, str]] = {"host": "accel"}


class _Replicas(_NeverRuns):
    """The same roles, declaring nothing: independent replicas."""

    name: ClassVar[str] = "test-replicas"


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A copy of the registry for the test; the real one is put back afterwards."""
    before = dict(base._REGISTRY)
    monkeypatch.setattr(base, "_REGISTRY", dict(before))
    yield
    monkeypatch.undo()
    assert before == base._REGISTRY
    assert _TEST_NAME not in policy_names()


def _doc() -> dict[str, Any]:
    # Two host CPUs may be counted twice and the node holds two devices: only a policy whose
    # ``cpu``/``host`` role is a host keeps it at one and out of the node's slots.
    doc = neo_doc(constraints={"max_devices_per_node": 2, "max_nodes": 4})
    for entry in doc["space"]["devices"]:
        if entry["device"].endswith("-cpu"):
            entry["max_count"] = 2
    doc["space"]["policies"] = [{"policy": "neo"}]
    return doc


def _as_policy(plan: PlanSpec, name: str) -> PlanSpec:
    every = tuple(range(len(plan.devices)))
    return replace(plan, policies=(PolicyChoice(0, name, (), every),))


def _layout(plan: PlanSpec) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every admitted configuration as (device entries, counts), role names dropped."""
    space = enumerate_space(plan)
    out = set()
    for g in space.groups:
        entries = tuple(e for _, e in g.signature.roles)
        for row in g.counts:
            out.add((entries, tuple(int(c) for c in row)))
    return out


def test_each_registered_policy_declares_what_the_planner_assumed_of_it_by_name() -> None:
    names = policy_names()
    assert {"neo", "fastdecode+", "gpu-only", "glitches", "h2m2", "homogeneous"} <= set(names)
    for name in names:
        traits = policy_traits(name)
        assert traits == PolicyTraits(
            tensor_parallel_role="gpu" if name in _NAMED_TENSOR_PARALLEL else None,
            host_roles=frozenset(r for p, r in _NAMED_HOST_ROLES if p == name),
            single_node=name in _NAMED_SINGLE_NODE,
            paired_roles=_DECLARED_PAIRED.get(name, ()),
        ), name


@pytest.mark.usefixtures("scratch_registry")
def test_a_newly_registered_policy_is_laid_out_by_its_declared_traits_like_neo() -> None:
    register(_PooledNode)
    register(_Replicas)
    plan = parse(_doc())
    neo = _layout(plan)
    pooled = _layout(_as_policy(plan, _TEST_NAME))
    replicas = _layout(_as_policy(plan, _Replicas.name))
    assert pooled == neo
    # The host is one per node, never left out while there is one, and takes no slot.
    cpus = {k for k, d in enumerate(plan.devices) if d.device.kind.value == "cpu"}
    for entries, counts in pooled:
        assert [c for e, c in zip(entries, counts, strict=True) if e in cpus] == [1]
        assert sum(c for e, c in zip(entries, counts, strict=True) if e not in cpus) <= 2
    # The same roles without the declarations are replicas: what ignoring them would give.
    assert replicas != pooled
    assert any(not set(entries) & cpus for entries, _ in replicas)
    assert any(2 in counts for _, counts in replicas if set(entries) & cpus)


@pytest.mark.usefixtures("scratch_registry")
def test_a_paired_role_takes_its_leaders_count_within_its_own_range_and_no_node_slot() -> None:
    register(_PairedHosts)
    register(_Replicas)
    doc = _doc()
    doc["constraints"] = {"max_devices_per_node": 2, "max_nodes": 1}
    for entry in doc["space"]["devices"]:
        entry["max_count"] = 2
    plan = parse(doc)
    paired = _layout(_as_policy(plan, _PairedHosts.name))
    replicas = _layout(_as_policy(plan, _Replicas.name))
    cpus = {k for k, d in enumerate(plan.devices) if d.device.kind.value == "cpu"}
    with_host = [(e, c) for e, c in paired if set(e) & cpus]
    assert with_host
    for entries, counts in with_host:
        (accel,) = [c for e, c in zip(entries, counts, strict=True) if e not in cpus]
        (host,) = [c for e, c in zip(entries, counts, strict=True) if e in cpus]
        assert host == accel
    # two accelerators and two hosts: four devices, but only the two accelerators take slots
    # of the one two-device node (as replicas, all four would)
    four = {(e, c) for e, c in with_host if sum(c) == 4}
    assert four
    assert not four & replicas


@pytest.mark.usefixtures("scratch_registry")
def test_the_screen_bounds_each_tensor_parallel_degree_of_the_declared_role() -> None:
    register(_PooledNode)
    register(_Replicas)
    base_plan = parse(_doc())
    requests = generate_requests(base_plan.workload, base_plan.model)

    class Recording(CostCache):
        """Records the tensor-parallel degree of every memory-fit question."""

        def __init__(self, plan: PlanSpec) -> None:
            super().__init__(plan, requests)
            self.tp: list[int | None] = []

        def fit(self, sig: Signature, tp: int | None = None) -> str | None:
            self.tp.append(tp)
            return super().fit(sig, tp)

    for name, per_config in ((_TEST_NAME, True), (_Replicas.name, False)):
        plan = _as_policy(base_plan, name)
        groups = enumerate_space(plan).groups
        assert groups
        for group in groups:
            cache = Recording(plan)
            Screen(plan, requests, cache).evaluate(group)
            if per_config:
                # One server per configuration, its degree the ``accel`` role's count.
                col = [r for r, _ in group.signature.roles].index("accel")
                assert cache.tp == group.counts[:, col].tolist()
            else:
                assert cache.tp == [None]


@pytest.mark.usefixtures("scratch_registry")
@pytest.mark.parametrize(
    ("traits", "message"),
    [
        ({"host_roles": frozenset({"cpu"}), "single_node": True}, "not among its roles"),
        ({"tensor_parallel_role": "gpu", "single_node": True}, "is not a role"),
        (
            {"tensor_parallel_role": "accel", "host_roles": frozenset({"accel"})},
            "both host and TP",
        ),
        ({"tensor_parallel_role": "accel"}, "single_node = True"),
        ({"host_roles": frozenset({"host"})}, "single_node = True"),
        ({"paired_roles": {"host": "cpu"}}, "must follow another of its roles"),
        ({"paired_roles": {"host": "host"}}, "must follow another of its roles"),
        (
            {
                "paired_roles": {"host": "accel"},
                "tensor_parallel_role": "host",
                "single_node": True,
            },
            "cannot be a host role, the tensor-parallel group",
        ),
    ],
)
def test_registering_a_layout_inconsistent_with_the_roles_is_refused(
    traits: dict[str, Any], message: str
) -> None:
    cls = type("Inconsistent", (_NeverRuns,), {"name": "test-inconsistent", **traits})
    with pytest.raises(ValueError, match=message):
        register(cls)
    assert "test-inconsistent" not in policy_names()
