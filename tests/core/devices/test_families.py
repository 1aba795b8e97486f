"""The device families: discovered by kind, each declaring its parameters and answering the
capacity planner's questions itself (no kind check outside the family)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from simulations.core.catalog import builtin_catalog
from simulations.core.devices import (
    build_device_model,
    calibrated_kinds,
    check_device,
    describe_family,
    device_family,
    device_kinds,
    model_parallel_kinds,
    roofline_kinds,
)
from simulations.core.devices.base import DeviceModel, PhaseCost, host_round_trip_s
from simulations.core.devices.fpga import FpgaModel
from simulations.core.devices.gpu import GpuModel
from simulations.core.errors import SpecError
from simulations.core.spec import DevicePlacement, ModelSpec

CAT = builtin_catalog()
LLAMA = CAT.model("llama2-7b")


def test_every_built_in_kind_has_its_family_discovered() -> None:
    assert set(device_kinds()) == {"gpu", "fpga", "npu", "cpu", "memory-accel", "soc"}
    assert device_family("gpu") is GpuModel
    with pytest.raises(SpecError, match="no cost model for toaster devices"):
        device_family("toaster")


def test_the_roofline_kinds_are_the_families_that_declare_one_device_roofline() -> None:
    from tests.core.toy import device_family as toy

    # H2M2's board has one accelerator per memory (no single roof); a SoC is a container.
    assert roofline_kinds() == {"gpu", "fpga", "npu", "cpu"}
    with toy.registered():
        assert toy.KIND in roofline_kinds()
    assert toy.KIND not in roofline_kinds()


def test_the_parallel_and_calibrated_kinds_are_the_families_that_declare_them() -> None:
    from tests.core.toy import device_family as toy

    # vLLM's tensor/pipeline/expert parallelism and the kernel-class fit are the GPU's
    assert model_parallel_kinds() == {"gpu"}
    assert calibrated_kinds() == {"gpu"}
    with toy.registered():
        assert toy.KIND not in model_parallel_kinds()
    with toy.registered(toy.ShardedToyAccelModel):
        assert toy.KIND in model_parallel_kinds()
        assert toy.KIND not in calibrated_kinds()
    assert toy.KIND not in model_parallel_kinds()


@pytest.mark.parametrize("slug", sorted(s for s, d in CAT.devices.items() if d.kind != "soc"))
def test_every_catalog_device_answers_the_planners_questions(slug: str) -> None:
    device = CAT.device(slug)
    runtime = CAT.default_runtime(device)
    if device.tdp_w is None:
        # No published power (TPUs, Alveo V80): a placement's quote stands in, as in a scenario.
        device = DevicePlacement(device, 1, runtime, quoted_tdp_w=300.0).device
    dm = build_device_model(device, runtime)
    rate = dm.compute_rate_bound()
    assert rate is None or rate > 0
    assert dm.floor_power_w() >= 0
    assert dm.floor_power_w() <= max(dm.idle_power_w, device.tdp_w)
    floor = dm.decode_stream_floor(LLAMA)
    if floor is not None:
        assert floor.shared_weight_bytes > 0 and floor.bw_bytes_per_s > 0


def test_the_gpu_family_bounds_what_it_charges() -> None:
    gpu = CAT.device("a100-80gb")
    dm = build_device_model(gpu, CAT.default_runtime(gpu))
    assert isinstance(dm, GpuModel)
    step = dm.decode_step(LLAMA, 8, 8 * 1024)
    floor = dm.decode_stream_floor(LLAMA)
    assert floor is not None
    streamed = floor.shared_weight_bytes + 8 * 1024 * floor.kv_bytes_per_token
    assert step.seconds >= streamed / floor.bw_bytes_per_s
    rate = dm.compute_rate_bound()
    assert rate is not None and step.seconds >= step.flops / rate


def test_the_fpga_prefetch_ratio_is_a_setting_of_its_model() -> None:
    u280 = CAT.device("u280")
    fm = build_device_model(u280, CAT.default_runtime(u280))
    assert isinstance(fm, FpgaModel)
    assert fm.with_settings({"prefetch_ratio": 8}) is fm.with_prefetch(8)
    assert fm.with_settings({"gpu_decode": True}) is fm  # not an FPGA setting
    with pytest.raises(SpecError, match="at least 1"):
        fm.with_settings({"prefetch_ratio": 0})
    gpu = CAT.device("a100-80gb")
    dm = build_device_model(gpu, CAT.default_runtime(gpu))
    assert dm.with_settings({"prefetch_ratio": 8}) is dm  # GPUs have no prefetch ratio


def test_only_a_family_that_samples_on_the_host_pays_the_round_trip() -> None:
    u280, a100 = CAT.device("u280"), CAT.device("a100-80gb")
    fm = build_device_model(u280, CAT.default_runtime(u280))
    assert fm.host_sampling_s(LLAMA) == host_round_trip_s(u280, LLAMA) > 0
    assert build_device_model(a100, CAT.default_runtime(a100)).host_sampling_s(LLAMA) == 0.0


def test_a_family_checks_the_params_of_its_devices() -> None:
    assert [p["name"] for p in describe_family("fpga")["params"]] == [
        "clock_mhz",
        "hbm_channels",
        "issue_cycles",
    ]
    assert describe_family("fpga")["settings"][0]["name"] == "prefetch_ratio"
    u280 = CAT.device("u280")
    with pytest.raises(SpecError) as exc:
        check_device(replace(u280, params={"hbm_channels": 32}))
    assert exc.value.field == "u280.params.clock_mhz"
    gpu = CAT.device("a100-80gb")
    with pytest.raises(SpecError) as exc:
        check_device(replace(gpu, params={"cores": 8}))
    assert exc.value.field == "a100-80gb.params.cores"
    soc = CAT.device("snapdragon-8-gen-3")
    with pytest.raises(SpecError) as exc:
        check_device(replace(soc, params={"cores": 8}))
    assert exc.value.field == "snapdragon-8-gen-3.params.cores"


def test_a_family_must_answer_the_planners_questions() -> None:
    """The three questions are abstract: a family that forgets one cannot be built, rather
    than silently giving the planner weaker bounds."""

    class Forgetful(DeviceModel):
        def prefill(self, model: ModelSpec, seq_lens: Sequence[int]) -> PhaseCost:
            raise NotImplementedError

        def decode_step(self, model: ModelSpec, batch: int, kv_tokens: int) -> PhaseCost:
            raise NotImplementedError

        def weights_bytes(self, model: ModelSpec) -> float:
            return 0.0

        def compute_rate_bound(self) -> float | None:
            return None

    gpu = CAT.device("a100-80gb")
    with pytest.raises(TypeError, match="decode_stream_floor"):
        Forgetful(gpu, CAT.default_runtime(gpu))  # type: ignore[abstract]


def test_a_family_says_how_many_sequences_one_pass_holds() -> None:
    """Schedulers cap their batches by the family's design, not by the device's kind: the
    FPGA's FlightLLM-style decode holds one sequence per pass, the others are memory-bound."""
    from simulations.core.devices import device_family, device_kinds

    caps = {
        kind: device_family(kind).max_sequences_per_pass
        for kind in device_kinds()
        if kind != "soc"  # a container of components, without a cost model of its own
    }
    assert caps["fpga"] == 1
    assert caps["gpu"] is None and caps["cpu"] is None
