"""Nothing outside a policy's own package branches on a policy's or a paper's name: the
pages, the API and the Django app ask the registries (``Policy.result_blocks``,
``Policy.figures``, the paper registry) instead. The check parses every module (``ast``)
and fails on any comparison (``==``, ``!=``, ``in``, ``not in``, ``is``, a ``match`` case)
whose operand is the name of a registered policy or paper written as a string literal."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

from simulations.core.policies import get_policy, papers, policy_names

ROOT = Path(__file__).resolve().parents[1]
#: The code checked: the Django side and the core.
CHECKED = ("frontend", "api", "simulations", "hetplanner")


def _names() -> frozenset[str]:
    return frozenset(policy_names()) | {p.name for p in papers()}


def _own_packages() -> set[Path]:
    """Each policy's and paper's own package directory (where it may name itself)."""
    modules = {get_policy(n).__module__ for n in policy_names()} | {p.package for p in papers()}
    out = set()
    for name in modules:
        module = importlib.import_module(name)
        path = Path(module.__file__ or "")
        if path.parent.name != "policies":  # a package under policies/, not a lone module
            while path.parent.parent.name != "policies":
                path = path.parent
            out.add(path.parent if path.is_file() else path)
    return out


def _literals(node: ast.AST, names: frozenset[str]) -> Iterator[str]:
    """Policy/paper names written as string literals in ``node`` (itself, or the items of a
    tuple, list or set literal)."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value in names:
            yield item.value


def comparisons(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of every comparison in ``source`` against a name in ``names``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += [(node.lineno, n) for n in _literals(operand, names)]
        elif isinstance(node, ast.match_case):
            for sub in ast.walk(node.pattern):
                if isinstance(sub, ast.MatchValue):
                    found += [(sub.lineno, n) for n in _literals(sub.value, names)]
    return found


def _files() -> Iterator[Path]:
    own = _own_packages()
    for top in CHECKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts or any(path.is_relative_to(p) for p in own):
                continue
            yield path


def test_the_check_finds_a_comparison_on_a_policy_name() -> None:
    names = _names()
    source = (
        'if s.get("policy") == "h2m2":\n    pass\n'
        'ok = system.policy in ("glitches", "other")\n'
        'match name:\n    case "neo":\n        pass\n'
        'default = {"policy": "homogeneous"}\n'  # naming is not branching
    )
    assert comparisons(source, names) == [(1, "h2m2"), (3, "glitches"), (5, "neo")]


def test_the_own_packages_are_the_policies_packages() -> None:
    own = {p.name for p in _own_packages()}
    assert {"glitches", "neo", "heterollm", "h2m2", "homogeneous"} <= own


def test_no_code_outside_a_policy_package_compares_with_a_policy_or_paper_name() -> None:
    names = _names()
    found = [
        f"{path.relative_to(ROOT)}:{line}: compares with {name!r}"
        for path in _files()
        for line, name in comparisons(path.read_text(), names)
    ]
    assert not found, "ask the policy/paper registry instead:\n" + "\n".join(found)
