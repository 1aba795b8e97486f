"""Seeding the catalog and turning rows back into core specs (simulations.adapters)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from simulations import adapters
from simulations.catalog import services
from simulations.catalog.models import Device, LLMModel, MemoryTier, RuntimeProfile
from simulations.core.catalog import Catalog, builtin_catalog
from tests.catalog_records import make_catalog, records

pytestmark = pytest.mark.django_db


def assert_same_catalog(got: Catalog, want: Catalog) -> None:
    """Equal specs (dataclass equality) and equal ``sources``/``params``/``calibration``
    (excluded from it)."""
    assert got.devices.keys() == want.devices.keys()
    assert got.runtimes.keys() == want.runtimes.keys()
    assert got.models.keys() == want.models.keys()
    assert dict(got.default_runtimes) == dict(want.default_runtimes)
    for slug, spec in want.devices.items():
        assert got.devices[slug] == spec, slug
        assert dict(got.devices[slug].sources) == dict(spec.sources), slug
    for slug, rt in want.runtimes.items():
        assert got.runtimes[slug] == rt, slug
        assert dict(got.runtimes[slug].params) == dict(rt.params), slug
        assert dict(got.runtimes[slug].sources) == dict(rt.sources), slug
        assert got.runtimes[slug].calibration == rt.calibration, slug
    for slug, model in want.models.items():
        assert got.models[slug] == model, slug
        assert dict(got.models[slug].sources) == dict(model.sources), slug


def test_the_seeded_builtin_catalog_reads_back_as_the_json_files() -> None:
    call_command("seed_catalog", verbosity=0)
    assert_same_catalog(adapters.catalog_from_db(), builtin_catalog())


def test_every_field_survives_records_to_rows_to_specs() -> None:
    services.catalog_seed(**records())
    assert_same_catalog(adapters.catalog_from_db(), make_catalog())
    npu = Device.objects.get(slug="t-soc-npu")
    assert npu.parent is not None and npu.parent.slug == "t-soc"
    assert list(MemoryTier.objects.filter(device__slug="t-u280").values_list("order", "kind")) == [
        (0, "hbm"),
        (1, "ddr"),
    ]


def test_seeding_is_idempotent_and_updates_in_place() -> None:
    first = services.catalog_seed(**records())
    ids = set(Device.objects.values_list("pk", flat=True))
    recs = records()
    recs["devices"][0]["tdp_w"] = 350.0
    recs["devices"][0]["memory"] = [{"kind": "hbm", "capacity_gb": 40.0, "bw_gbps": 1555.0}]
    again = services.catalog_seed(**recs)
    assert again.devices == first.devices
    assert set(Device.objects.values_list("pk", flat=True)) == ids
    a100 = Device.objects.get(slug="t-a100-80gb")
    assert a100.tdp_w == 350.0
    assert [(t.capacity_gb, t.bw_gbps) for t in a100.memory_tiers.all()] == [(40.0, 1555.0)]


def test_a_bad_record_rolls_the_whole_seed_back() -> None:
    recs = records()
    recs["models"][1]["n_kv_heads"] = 7
    with pytest.raises(ValidationError, match=r"t-llama3\.1-8b"):
        services.catalog_seed(**recs)
    assert not Device.objects.exists()
    assert not LLMModel.objects.exists()


def test_a_record_with_nan_is_rejected_naming_it() -> None:
    recs = records()
    recs["devices"][1]["tdp_w"] = float("nan")
    with pytest.raises(ValidationError, match=r"t-u280.*tdp_w.*finite"):
        services.catalog_seed(**recs)
    assert not Device.objects.exists()


def test_making_another_profile_the_default_moves_the_mark() -> None:
    services.catalog_seed(**records())
    recs = records()["runtimes"]
    int8 = next(r for r in recs if r["slug"] == "t-gpu-int8")
    int8["default_for_kind"] = True
    services.catalog_seed(devices=[], runtimes=[int8], models=[])
    defaults = RuntimeProfile.objects.filter(device_kind="gpu", default_for_kind=True)
    assert list(defaults.values_list("slug", flat=True)) == ["t-gpu-int8"]


def _numbers(values: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    return [
        k
        for k, v in values.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and k not in skip
    ]


def _has_source(sources: dict[str, str], key: str) -> bool:
    """A source for ``key`` itself or for an enclosing object (``memory[0]``, ``host_link``)."""
    parts = key.replace("[", ".[").split(".")
    candidates = {".".join(parts[:i]).replace(".[", "[") for i in range(1, len(parts) + 1)}
    return any(sources.get(c, "").strip() for c in candidates)


def test_every_seeded_number_has_a_non_empty_source() -> None:
    call_command("seed_catalog", verbosity=0)
    missing: list[str] = []
    for spec in adapters.catalog_from_db().devices.values():
        src = dict(spec.sources)
        plain = {f: getattr(spec, f) for f in adapters.DEVICE_PLAIN_FIELDS}
        keys = _numbers(plain)
        for i, tier in enumerate(spec.memory):
            keys += [f"memory[{i}].capacity_gb", f"memory[{i}].bw_gbps"]
            assert tier.capacity_gb > 0
        for link in ("host_link", "peer_link"):
            value = getattr(spec, link)
            if value is not None:
                keys += [f"{link}.bw_gbps"]
        keys += [f"params.{k}" for k in spec.params]
        missing += [f"device {spec.slug}: {k}" for k in keys if not _has_source(src, k)]
    for rt in adapters.catalog_from_db().runtimes.values():
        src = dict(rt.sources)
        values = {f: getattr(rt, f) for f in adapters.RUNTIME_FIELDS}
        keys = _numbers(values) + [f"params.{k}" for k in rt.params]
        missing += [f"runtime {rt.slug}: {k}" for k in keys if not _has_source(src, k)]
    for model in adapters.catalog_from_db().models.values():
        values = {f: getattr(model, f) for f in adapters.MODEL_FIELDS}
        missing += [
            f"model {model.slug}: {k}"
            for k in _numbers(values)
            if not _has_source(dict(model.sources), k)
        ]
    assert not missing, "numbers without a source:\n" + "\n".join(missing)


def test_the_seed_covers_the_slugs_scenarios_rely_on() -> None:
    """The device and model slugs seeded by ``make setup``."""
    report = services.catalog_seed()
    wanted_models = {
        "llama2-7b",
        "llama2-70b",
        "llama3.1-8b",
        "llama3.1-70b",
        "llama3.2-3b",
        "internlm-1.8b",
        "gpt3-175b",
        "chinchilla-70b",
    }
    wanted_devices = {
        "a100-80gb",
        "a100-40gb",
        "v100s",
        "h100-sxm",
        "h100-pcie",
        "t4",
        "a10g",
        "u280",
        "vhk158",
        "snapdragon-8-gen-3",
        "adreno-750",
        "hexagon-npu",
    }
    assert wanted_models <= set(report.models)
    assert wanted_devices <= set(report.devices)
    soc = Device.objects.get(slug="snapdragon-8-gen-3")
    assert {"adreno-750", "hexagon-npu"} <= set(soc.components.values_list("slug", flat=True))
