"""factory_boy factories for the simulations app's models.

Numbers default to real datasheet figures (NVIDIA A100 80 GB SXM, LLaMA-2 7B) so a factory
row is a plausible catalog entry; tests override what they exercise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import factory
from django.contrib.auth import get_user_model

from simulations.catalog.models import Device, LLMModel, MemoryTier, RuntimeProfile
from simulations.choices import DeviceKind, FfnKind, MemoryKind, RunStatus
from simulations.measurements.models import MeasurementSet
from simulations.runs.models import SimulationRun
from simulations.scenarios.models import Scenario, Trace, Workload

A100_SOURCE = "NVIDIA A100 datasheet r4 (test fixture value)"


class UserFactory(factory.django.DjangoModelFactory):
    """A signed-up planner."""

    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"planner{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


class StaffFactory(UserFactory):
    """A staff member who maintains the catalog in the admin."""

    username = factory.Sequence(lambda n: f"staff{n}")
    is_staff = True
    is_superuser = True


class DeviceFactory(factory.django.DjangoModelFactory):
    """A GPU with one HBM tier (A100 80 GB SXM figures)."""

    class Meta:
        model = Device
        skip_postgeneration_save = True

    slug = factory.Sequence(lambda n: f"gpu-{n}")
    name = factory.LazyAttribute(lambda d: d.slug.upper())
    kind = DeviceKind.GPU
    vendor = "NVIDIA"
    fp16_tflops = 312.0
    int8_tops = 624.0
    tdp_w = 400.0
    idle_w = 50.0
    price_usd = 15000.0
    sources = factory.LazyAttribute(
        lambda d: {k: A100_SOURCE for k in ("fp16_tflops", "int8_tops", "tdp_w", "idle_w")}
    )

    @factory.post_generation
    def memory(self, create: bool, extracted: Any, **kwargs: Any) -> None:
        """``memory=[(kind, capacity_gb, bw_gbps), ...]``; default one HBM2e tier."""
        if not create:
            return
        tiers = extracted if extracted is not None else [(MemoryKind.HBM, 80.0, 2039.0)]
        for order, (kind, capacity, bw) in enumerate(tiers):
            MemoryTier.objects.create(
                device=self, order=order, kind=kind, capacity_gb=capacity, bw_gbps=bw
            )


class RuntimeProfileFactory(factory.django.DjangoModelFactory):
    """An FP16 GPU stack."""

    class Meta:
        model = RuntimeProfile

    slug = factory.Sequence(lambda n: f"stack-{n}")
    name = factory.LazyAttribute(lambda r: r.slug)
    device_kind = DeviceKind.GPU
    weight_bits = 16
    act_bits = 16
    kv_bits = 16
    compute_eff = 0.5
    bw_eff = 0.8
    kernel_launch_us = 5.0
    kernels_per_layer = 10
    sources = factory.LazyFunction(
        lambda: {"compute_eff": "test fixture", "bw_eff": "test fixture"}
    )


class LLMModelFactory(factory.django.DjangoModelFactory):
    """LLaMA-2 7B's shapes (meta-llama/Llama-2-7b-hf config.json)."""

    class Meta:
        model = LLMModel

    slug = factory.Sequence(lambda n: f"model-{n}")
    name = factory.LazyAttribute(lambda m: m.slug)
    n_layers = 32
    hidden_size = 4096
    n_heads = 32
    n_kv_heads = 32
    head_dim = 128
    ffn_size = 11008
    ffn_kind = FfnKind.GATED
    vocab_size = 32000
    max_context = 4096
    sources = factory.LazyFunction(lambda: {"n_layers": "Llama-2-7b-hf config.json"})


class TraceFactory(factory.django.DjangoModelFactory):
    """A three-request trace."""

    class Meta:
        model = Trace

    slug = factory.Sequence(lambda n: f"trace-{n}")
    name = factory.LazyAttribute(lambda t: t.slug)
    request_count = 3
    duration_s = 1.0
    data = factory.LazyFunction(
        lambda: {
            "arrival_s": [0.0, 0.5, 1.0],
            "input_tokens": [100, 200, 300],
            "output_tokens": [10, 20, 30],
        }
    )


class WorkloadFactory(factory.django.DjangoModelFactory):
    """A closed workload of fixed lengths."""

    class Meta:
        model = Workload

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"workload {n}")
    requests = 10
    input_tokens = 512
    output_tokens = 128


class ScenarioFactory(factory.django.DjangoModelFactory):
    """A stored scenario (the document is not validated: use services for that)."""

    class Meta:
        model = Scenario

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"scenario {n}")
    document = factory.LazyAttribute(lambda s: {"name": s.name})


class SimulationRunFactory(factory.django.DjangoModelFactory):
    """A queued run of a scenario."""

    class Meta:
        model = SimulationRun

    scenario = factory.SubFactory(ScenarioFactory)
    owner = factory.LazyAttribute(lambda r: r.scenario.owner)
    document = factory.LazyAttribute(lambda r: r.scenario.document)
    status = RunStatus.QUEUED


#: The shipped A100 operator set (LLaMA-2-7B on vLLM kernels): what the calibration tests fit.
A100_OPERATORS = (
    Path(__file__).resolve().parent.parent
    / "simulations/core/data/measurements/a100_llama2-7b_vllm_operators.csv"
)


class MeasurementSetFactory(factory.django.DjangoModelFactory):
    """A private measurement set imported (through the service) from the shipped A100
    operator CSV; needs the built-in catalog rows (``builtin_catalog_rows``)."""

    class Meta:
        model = MeasurementSet

    owner = factory.SubFactory(UserFactory)
    slug = factory.Sequence(lambda n: f"a100-ops-{n}")
    name = factory.LazyAttribute(lambda m: f"A100 operators ({m.slug})")
    visibility = "private"

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> MeasurementSet:
        from simulations.measurements.services import measurement_set_import

        return measurement_set_import(
            slug=kwargs["slug"],
            name=kwargs["name"],
            text=kwargs.get("text") or A100_OPERATORS.read_text(encoding="utf-8"),
            stack=kwargs.get("stack", "vllm-fp16"),
            owner=kwargs["owner"],
            visibility=kwargs["visibility"],
        )
