"""Fixtures: the catalog's Snapdragon 8 Gen 3 (Adreno 750 + Hexagon NPU, W4A16 stacks)."""

from __future__ import annotations

import pytest

from simulations.core.catalog import Catalog, builtin_catalog
from simulations.core.policies.heterollm import HeteroSoc
from simulations.core.spec import DevicePlacement, ModelSpec, SystemSpec

GPU = ("adreno-750", "w4a16-opencl-adreno")
NPU = ("hexagon-npu", "w4a16-qnn-hexagon")


@pytest.fixture(scope="session")
def cat() -> Catalog:
    return builtin_catalog()


@pytest.fixture(scope="session")
def soc(cat: Catalog) -> HeteroSoc:
    return HeteroSoc.from_specs(
        cat.device(GPU[0]), cat.runtime(GPU[1]), cat.device(NPU[0]), cat.runtime(NPU[1])
    )


@pytest.fixture(scope="session")
def llama8b(cat: Catalog) -> ModelSpec:
    return cat.model("llama3.1-8b")


@pytest.fixture(scope="session")
def internlm(cat: Catalog) -> ModelSpec:
    return cat.model("internlm-1.8b")


def phone_system(cat: Catalog, name: str = "phone", **options: object) -> SystemSpec:
    """A heterollm system on the catalog's SoC."""
    return SystemSpec(
        name=name,
        policy="heterollm",
        devices=(
            DevicePlacement(cat.device(GPU[0]), 1, cat.runtime(GPU[1]), "gpu"),
            DevicePlacement(cat.device(NPU[0]), 1, cat.runtime(NPU[1]), "npu"),
        ),
        options=dict(options),
    )
