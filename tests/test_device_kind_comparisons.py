"""Nothing outside the device families branches on a device's kind: a policy, the planner,
the calibration and the Django side ask the family (a trait of its
:class:`~simulations.core.devices.base.DeviceModel`, or the registry's sets of kinds such as
:func:`~simulations.core.devices.roofline_kinds`) instead, so a new family is a module plus
data.

The check parses every module (``ast``) and fails on

* a comparison (``==``, ``!=``, ``is``, ``is not``, ``in``, ``not in``) or a ``match`` case
  with a :class:`~simulations.core.spec.DeviceKind` member (or the Django choices' one) as
  an operand, or with a device kind written as a string literal against an expression that
  names a kind (``device.kind``, ``runtime.device_kind``, ``row["kind"]``);
* a query lookup (``filter``, ``exclude``, ``get``, ``Q``) on a kind field (``kind=``,
  ``device_kind__in=``, ``device__kind=``) with such a value.

Exempt: the families themselves (``simulations/core/devices/``), the kinds' declarations
(``simulations/choices.py``, migrations) and a paper's own package — a paper is defined on
the device types it studies (HeteroLLM on a phone SoC's GPU and NPU, GLITCHES on GPUs and
FPGAs)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

from simulations.core.devices import device_kinds
from simulations.core.policies import papers
from simulations.core.spec import DeviceKind

ROOT = Path(__file__).resolve().parents[1]
#: The code checked: the Django side and the core.
CHECKED = ("frontend", "api", "simulations", "hetplanner")
#: Where a kind may be named in a branch: the families and the kinds' declarations.
EXEMPT = (ROOT / "simulations" / "core" / "devices", ROOT / "simulations" / "choices.py")
#: Query methods whose keyword arguments are field lookups.
LOOKUPS = frozenset({"filter", "exclude", "get", "Q"})


def _kinds() -> frozenset[str]:
    """Every device kind's value: the registered families', the containers' and the
    built-in members'."""
    return frozenset(device_kinds()) | {k.value for k in DeviceKind}


def _paper_packages() -> set[Path]:
    """Each paper's own package directory."""
    return {Path(importlib.import_module(p.package).__file__ or "").parent for p in papers()}


def _is_member(node: ast.AST) -> bool:
    """``DeviceKind.X`` (also ``choices.DeviceKind.X``)."""
    if not isinstance(node, ast.Attribute):
        return False
    owner = node.value
    name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
    return name == "DeviceKind"


def _items(node: ast.AST) -> list[ast.AST]:
    return list(node.elts) if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]


def _kind_values(node: ast.AST, kinds: frozenset[str]) -> list[str]:
    """The device kinds ``node`` writes as string literals (itself or its items)."""
    return [
        i.value
        for i in _items(node)
        if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in kinds
    ]


def _members(node: ast.AST) -> list[str]:
    """The ``DeviceKind`` members ``node`` names (itself or its items)."""
    return [f"DeviceKind.{i.attr}" for i in _items(node) if _is_member(i) and hasattr(i, "attr")]


def _names_a_kind(node: ast.AST) -> bool:
    """Whether ``node`` reads a kind: ``kind``, ``x.device_kind``, ``row["kind"]``,
    ``row.get("kind")``."""
    if isinstance(node, ast.Name):
        return node.id.endswith("kind")
    if isinstance(node, ast.Attribute):
        return node.attr.endswith("kind")
    key: ast.AST | None = None
    if isinstance(node, ast.Subscript):
        key = node.slice
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
    ):
        key = node.args[0]
    return (
        isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.endswith("kind")
    )


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def comparisons(source: str, kinds: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, what)`` of every branch on a device kind in ``source`` (see the module
    notes)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            on_kind = any(_names_a_kind(o) for o in operands)
            for o in operands:
                found += [(node.lineno, m) for m in _members(o)]
                if on_kind:
                    found += [(node.lineno, repr(v)) for v in _kind_values(o, kinds)]
        elif isinstance(node, ast.Match):
            on_kind = _names_a_kind(node.subject)
            for case in node.cases:
                for sub in ast.walk(case.pattern):
                    if isinstance(sub, ast.MatchValue):
                        found += [(sub.lineno, m) for m in _members(sub.value)]
                        if on_kind:
                            found += [(sub.lineno, repr(v)) for v in _kind_values(sub.value, kinds)]
        elif isinstance(node, ast.Call) and _call_name(node) in LOOKUPS:
            for kw in node.keywords:
                field = kw.arg or ""
                if not any(part.endswith("kind") for part in field.split("__")):
                    continue
                values = _members(kw.value) + [repr(v) for v in _kind_values(kw.value, kinds)]
                found += [(node.lineno, f"{field}={v}") for v in values]
    return sorted(found)


def _files() -> Iterator[Path]:
    exempt = (*EXEMPT, *_paper_packages())
    for top in CHECKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts or any(path.is_relative_to(p) for p in exempt):
                continue
            yield path


def test_the_check_finds_a_branch_on_a_device_kind() -> None:
    kinds = _kinds()
    source = (
        "if p.device.kind is not DeviceKind.GPU:\n    pass\n"  # 1
        'if p.device.kind != "gpu":\n    pass\n'  # 3
        'ok = runtime.device_kind in ("cpu", "npu")\n'  # 5
        'ok = row["kind"] == "fpga" or d.get("kind") == "soc"\n'  # 6
        "match dev.kind:\n    case DeviceKind.NPU:\n        pass\n"  # 7-9
        '    case "memory-accel":\n        pass\n'  # 10-11
        'Device.objects.filter(kind="gpu")\n'  # 12
        "runtimes.exclude(device_kind__in=[DeviceKind.CPU])\n"  # 13
        'MeasurementSet.objects.filter(device__kind="gpu")\n'  # 14
        # not branches on a device kind: a role, another kind of thing, a declaration,
        # the registry's sets, a construction
        'if p.role == "gpu":\n    pass\n'
        'if op.kind == "gemm" or mode == "cpu":\n    pass\n'
        'ROLE = RoleSpec("gpu", "GPUs", ("gpu",))\n'
        "if dev.kind in roofline_kinds():\n    pass\n"
        'Device.objects.create(kind="gpu")\n'
    )
    assert comparisons(source, kinds) == [
        (1, "DeviceKind.GPU"),
        (3, "'gpu'"),
        (5, "'cpu'"),
        (5, "'npu'"),
        (6, "'fpga'"),
        (6, "'soc'"),
        (8, "DeviceKind.NPU"),
        (10, "'memory-accel'"),
        (12, "kind='gpu'"),
        (13, "device_kind__in=DeviceKind.CPU"),
        (14, "device__kind='gpu'"),
    ]


def test_the_paper_packages_are_exempt_and_the_families_are_not_checked() -> None:
    exempt = {p.name for p in _paper_packages()}
    assert {"glitches", "neo", "heterollm", "h2m2"} <= exempt
    files = set(_files())
    assert not any(p.is_relative_to(EXEMPT[0]) for p in files)
    assert ROOT / "simulations" / "core" / "policies" / "homogeneous" / "policy.py" in files
    assert ROOT / "frontend" / "views" / "calibration.py" in files


def test_nothing_outside_the_device_families_branches_on_a_device_kind() -> None:
    kinds = _kinds()
    found = [
        f"{path.relative_to(ROOT)}:{line}: compares a device kind with {what}"
        for path in _files()
        for line, what in comparisons(path.read_text(), kinds)
    ]
    assert not found, "ask the device family (a trait) or the registry instead:\n" + "\n".join(
        found
    )
