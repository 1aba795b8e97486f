"""Database CheckConstraints back the positive/finite rules (run on SQLite and PostgreSQL).

Each test writes with ``QuerySet.update`` or ``bulk_create``, bypassing model validation,
so only the database stands between the bad value and the table.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from simulations.catalog.models import Device, LLMModel, MemoryTier, RuntimeProfile
from simulations.choices import RunStatus
from simulations.runs.models import SimulationRun
from tests.factories import (
    DeviceFactory,
    LLMModelFactory,
    RuntimeProfileFactory,
    SimulationRunFactory,
)

pytestmark = pytest.mark.django_db

BAD_NUMBERS = [0.0, -1.0, math.nan, math.inf, -math.inf, 1e16]


def rejected(queryset: Any, **values: Any) -> bool:
    """Whether the database refuses ``queryset.update(**values)``.

    SQLite turns NaN into NULL on write; a NaN that comes back as NULL (or is refused by
    NOT NULL) was kept out of the table too, so it counts as rejected there.
    """
    try:
        with transaction.atomic():
            queryset.update(**values)
    except IntegrityError:
        return True
    nans = [k for k, v in values.items() if isinstance(v, float) and math.isnan(v)]
    if nans and connection.vendor == "sqlite":
        stored = queryset.values(*nans).get()
        return all(stored[k] is None for k in nans)
    return False


@pytest.mark.parametrize("value", BAD_NUMBERS)
@pytest.mark.parametrize("field", ["fp16_tflops", "tdp_w", "price_usd", "host_link_bw_gbps"])
def test_device_numbers_must_be_positive_finite_and_bounded(field: str, value: float) -> None:
    device = DeviceFactory(host_link_kind="pcie", host_link_bw_gbps=32.0)
    assert rejected(Device.objects.filter(pk=device.pk), **{field: value})


@pytest.mark.parametrize("value", [-1.0, math.inf, math.nan])
def test_idle_power_may_be_zero_but_not_negative_or_infinite(value: float) -> None:
    device = DeviceFactory()
    assert not rejected(Device.objects.filter(pk=device.pk), idle_w=0.0)
    assert rejected(Device.objects.filter(pk=device.pk), idle_w=value)


def test_idle_power_must_not_exceed_tdp() -> None:
    device = DeviceFactory(tdp_w=400.0)
    assert rejected(Device.objects.filter(pk=device.pk), idle_w=401.0)


def test_a_link_needs_a_kind_and_a_bandwidth_together() -> None:
    device = DeviceFactory()
    qs = Device.objects.filter(pk=device.pk)
    assert rejected(qs, host_link_kind="", host_link_bw_gbps=32.0)
    assert rejected(qs, peer_link_kind="nvlink", peer_link_bw_gbps=None)
    assert not rejected(qs, peer_link_kind="nvlink", peer_link_bw_gbps=300.0)


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_memory_tiers_need_positive_finite_capacity_and_bandwidth(value: float) -> None:
    tier = DeviceFactory().memory_tiers.get()
    assert rejected(MemoryTier.objects.filter(pk=tier.pk), capacity_gb=value)
    assert rejected(MemoryTier.objects.filter(pk=tier.pk), bw_gbps=value)


def test_memory_tier_orders_are_unique_per_device() -> None:
    device = DeviceFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryTier.objects.create(device=device, order=0, kind="ddr", capacity_gb=1, bw_gbps=1)


def test_device_slugs_are_unique() -> None:
    DeviceFactory(slug="a100")
    with pytest.raises(IntegrityError), transaction.atomic():
        DeviceFactory(slug="a100")


@pytest.mark.parametrize("value", [0.0, 1.5, -0.1, math.inf])
def test_runtime_efficiencies_are_fractions(value: float) -> None:
    rt = RuntimeProfileFactory()
    assert rejected(RuntimeProfile.objects.filter(pk=rt.pk), compute_eff=value)
    assert rejected(RuntimeProfile.objects.filter(pk=rt.pk), bw_eff=value)


def test_runtime_precisions_are_known_bit_widths() -> None:
    rt = RuntimeProfileFactory()
    assert rejected(RuntimeProfile.objects.filter(pk=rt.pk), weight_bits=5)
    assert not rejected(RuntimeProfile.objects.filter(pk=rt.pk), weight_bits=4)


def test_one_default_runtime_per_device_kind() -> None:
    RuntimeProfileFactory(device_kind="gpu", default_for_kind=True)
    RuntimeProfileFactory(device_kind="fpga", default_for_kind=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        RuntimeProfileFactory(device_kind="gpu", default_for_kind=True)


def test_model_kv_heads_must_divide_heads_and_dims_be_positive() -> None:
    model = LLMModelFactory()
    qs = LLMModel.objects.filter(pk=model.pk)
    assert rejected(qs, n_kv_heads=5)
    assert not rejected(qs, n_kv_heads=8)
    assert rejected(qs, n_layers=0)
    assert rejected(qs, vocab_size=10**8)


def test_run_status_must_be_known_and_consistent() -> None:
    run = SimulationRunFactory()
    qs = SimulationRun.objects.filter(pk=run.pk)
    now = timezone.now()
    assert rejected(qs, status="paused")
    # running needs a start and a heartbeat (and an attempt)
    assert rejected(qs, status=RunStatus.RUNNING)
    # a success needs a result, a finish time and 100 %
    assert rejected(qs, status=RunStatus.SUCCEEDED, finished_at=now, result={"systems": []})
    assert rejected(qs, status=RunStatus.SUCCEEDED, finished_at=now, progress=100, attempts=1)
    # a failure needs an error message
    assert rejected(qs, status=RunStatus.FAILED, finished_at=now)
    assert not rejected(qs, status=RunStatus.FAILED, finished_at=now, error="boom")


def test_run_progress_is_a_percentage() -> None:
    run = SimulationRunFactory()
    assert rejected(SimulationRun.objects.filter(pk=run.pk), progress=101)


def test_run_rows_are_never_saved_after_creation() -> None:
    from simulations.runs.models import RunImmutableError

    run = SimulationRunFactory()
    run.status = RunStatus.CANCELLED
    with pytest.raises(RunImmutableError):
        run.save()
