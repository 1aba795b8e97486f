"""Model choices mirror the core enums (the core is the source of truth)."""

from __future__ import annotations

from enum import StrEnum

import pytest
from django.db import models

from simulations import choices
from simulations.core import spec


@pytest.mark.parametrize(
    ("choice", "core"),
    [
        (choices.DeviceKind, spec.DeviceKind),
        (choices.MemoryKind, spec.MemoryKind),
        (choices.LinkKind, spec.LinkKind),
        (choices.FfnKind, spec.FfnKind),
        (choices.LengthDistKind, spec.LengthDistKind),
        (choices.ArrivalKind, spec.ArrivalKind),
    ],
)
def test_choice_values_equal_the_core_enum(
    choice: type[models.TextChoices], core: type[StrEnum]
) -> None:
    assert set(choice.values) == {m.value for m in core}


def test_final_and_active_statuses_partition_the_run_statuses() -> None:
    final, active = set(choices.FINAL_STATUSES), set(choices.ACTIVE_STATUSES)
    assert not final & active
    assert final | active == set(choices.RunStatus.values)
