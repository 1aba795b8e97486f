"""The run page asks the policy registry what a system's result holds: which blocks carry
notes and a placement (``Policy.result_blocks``) and which figures of its own a policy
gives (``Policy.figures``) — a policy registered from a test alone gets both, and a result
whose policy is no longer registered still shows its engine notes."""

from __future__ import annotations

from typing import ClassVar

import pytest

from frontend.views import runs
from simulations.core.policies import base, register
from tests.core.toy.policy import ToyReplicasPolicy


class NotedToy(ToyReplicasPolicy):
    """The toy policy with a result block of its own and the footprint figure."""

    name = "toy-noted"
    result_blocks: ClassVar[tuple[str, ...]] = ("toy", "scheduler")
    figures: ClassVar[tuple[str, ...]] = ("hbm-footprint", "not-drawable-here")


@pytest.fixture
def noted_toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    register(NotedToy)


@pytest.mark.usefixtures("noted_toy")
def test_a_registered_policy_declares_its_blocks_and_figures() -> None:
    system = {
        "policy": "toy-noted",
        "toy": {"notes": "from the toy", "placement": {"prefill": [{"kernel": "k"}]}},
        "scheduler": {"note": "from the engine"},
        "other": {"notes": "not declared: not shown"},
    }
    assert [b.get("notes") or b.get("note") for b in runs._blocks(system)] == [
        "from the toy",
        "from the engine",
    ]
    assert runs._placement(system) is system["toy"]
    assert runs._policy_figures(["homogeneous", "toy-noted", "toy-noted"]) == ["hbm-footprint"]


def test_an_unregistered_policys_result_keeps_its_engine_notes() -> None:
    system = {"policy": "gone", "scheduler": {"note": "n"}, "gone": {"notes": "x"}}
    assert runs._blocks(system) == [{"note": "n"}]
    assert runs._placement(system) is None
    assert runs._policy_figures(["gone"]) == []
