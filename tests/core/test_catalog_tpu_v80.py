"""Google Cloud TPU v5e / v6e and the AMD Alveo V80 in the built-in catalog: only their
published figures (each with its source), no made-up power (``tdp_w`` is null and a
scenario quotes it per placement), the TPUs costed by the GPU family over their ICI link,
FP8 refused on them, and the V80 decoding behind a GPU prefill."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simulations.core.catalog import DATA_DIR, builtin_catalog
from simulations.core.errors import ScenarioValidationError
from simulations.core.scenario import parse_scenario
from simulations.core.simulate import simulate
from simulations.core.spec import DeviceKind, LinkKind
from tests.core.test_catalog_data import numeric_leaves, source_for

CAT = builtin_catalog()
NEW = ("tpu-v5e", "tpu-v6e", "alveo-v80")


def raw_record(slug: str) -> dict[str, Any]:
    """The record of ``slug`` as the data file holds it."""
    for path in sorted((DATA_DIR / "devices").glob("*.json")):
        for rec in json.loads(path.read_text()):
            if rec["slug"] == slug:
                return dict(rec)
    raise AssertionError(f"{slug} is not in data/devices")


@pytest.mark.parametrize(
    ("slug", "capacity_gb", "bw_gbps", "bf16", "int8"),
    [
        ("tpu-v5e", 16, 819, 197, 393),
        ("tpu-v6e", 32, 1638, 918, 1836),
        ("alveo-v80", 32, 819.2, None, None),
    ],
)
def test_the_new_devices_carry_the_published_figures(
    slug: str, capacity_gb: float, bw_gbps: float, bf16: float | None, int8: float | None
) -> None:
    dev = CAT.device(slug)
    assert dev.primary_memory.capacity_gb == capacity_gb and dev.mem_bw_gbps == bw_gbps
    assert (dev.bf16_tflops, dev.int8_tops) == (bf16, int8)


@pytest.mark.parametrize("slug", NEW)
def test_every_number_of_the_new_records_has_a_source(slug: str) -> None:
    rec = raw_record(slug)
    body = {k: v for k, v in rec.items() if k not in ("sources", "notes")}
    leaves = list(numeric_leaves(body, ""))
    assert "memory[0].bw_gbps" in leaves
    assert [leaf for leaf in leaves if not source_for(rec["sources"], leaf)] == []


@pytest.mark.parametrize("slug", NEW)
def test_unpublished_power_is_null_with_a_source_asking_for_a_quote(slug: str) -> None:
    dev = CAT.device(slug)
    assert dev.tdp_w is None
    source = dev.sources["tdp_w"]
    assert source.startswith("NOT PUBLISHED") and "systems[i].devices[j].tdp_w" in source


@pytest.mark.parametrize("slug", NEW)
def test_no_price_and_no_fp8_or_fp16_peak_without_a_public_figure(slug: str) -> None:
    dev = CAT.device(slug)
    assert dev.price_usd is None and dev.fp8_tflops is None and dev.fp16_tflops is None


@pytest.mark.parametrize(("slug", "link"), [("tpu-v5e", "ici-v5e"), ("tpu-v6e", "ici-v6e")])
def test_a_tpu_is_costed_by_the_gpu_family_and_its_peer_link_is_its_ici(
    slug: str, link: str
) -> None:
    dev = CAT.device(slug)
    assert dev.kind is DeviceKind.GPU and dev.vendor == "Google"
    assert "GPU family's model" in raw_record(slug)["notes"]
    assert "no calibrated TPU stack" in raw_record(slug)["notes"]
    ici = CAT.link(link)
    assert dev.peer_link is not None and dev.peer_link.kind is LinkKind.ICI
    assert (dev.peer_link.bw_gbps, dev.peer_link.latency_us) == (ici.bw_gbps, ici.latency_us)


def test_the_v80_is_an_fpga_on_pcie_gen5_x8_with_stand_in_design_parameters() -> None:
    dev = CAT.device("alveo-v80")
    assert dev.kind is DeviceKind.FPGA and dev.host_link is not None
    assert (dev.host_link.pcie_gen, dev.host_link.lanes, dev.host_link.bw_gbps) == (5, 8, 31.5)
    assert dev.params["hbm_channels"] == 32
    assert "stand-in" in dev.sources["params.clock_mhz"]


def tpu_scenario(
    device: str = "tpu-v6e", *, tdp_w: float | None = 300.0, runtime: str = "hf-eager-fp16"
) -> dict[str, Any]:
    placement: dict[str, Any] = {"device": device, "count": 4, "runtime": runtime}
    if tdp_w is not None:
        placement["tdp_w"] = tdp_w  # the operator's power quote (none is published)
    return {
        "name": "tpu",
        "model": "llama3.1-8b",
        "workload": {
            "requests": 12,
            "input_tokens": {"dist": "uniform", "low": 200, "high": 900},
            "output_tokens": {"dist": "uniform", "low": 20, "high": 60},
            "arrival": {"kind": "poisson", "rate_per_s": 4.0},
            "seed": 3,
        },
        "systems": [
            {
                "name": "4x" + device,
                "policy": "homogeneous",
                "devices": [placement],
                "options": {"max_batch": 32, "tensor_parallel": 4, "link": "ici-" + device[4:]},
            }
        ],
    }


def errors(doc: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(ScenarioValidationError) as err:
        parse_scenario(doc, CAT)
    return err.value.errors


@pytest.mark.parametrize("device", ["tpu-v6e", "tpu-v5e"])
def test_llama_8b_on_four_tpus_at_tp4_spends_time_on_the_ici(device: str) -> None:
    system = simulate(parse_scenario(tpu_scenario(device), CAT))["systems"][0]
    dev = system["devices"][0]
    assert (
        dev["parallel"]["tensor_parallel"] == 4 and dev["parallel"]["link"] == "ici-" + device[4:]
    )
    assert dev["parallel"]["comm_share"] > 0
    assert system["tpot_ms"]["mean"] > 0 and system["energy_j"] > 0


@pytest.mark.parametrize("device", ["tpu-v6e", "tpu-v5e"])
def test_a_tpu_group_without_a_link_option_runs_over_its_own_ici(device: str) -> None:
    named = tpu_scenario(device)
    unnamed = tpu_scenario(device)
    del unnamed["systems"][0]["options"]["link"]
    by_name = simulate(parse_scenario(named, CAT))["systems"][0]
    by_default = simulate(parse_scenario(unnamed, CAT))["systems"][0]
    # The record's peer link carries the catalog link's figures, so the run is the same;
    # only its name differs (a device's own link has no slug).
    assert by_default["devices"][0]["parallel"]["link"] == "ici"
    assert by_default["tpot_ms"] == by_name["tpot_ms"]
    assert by_default["ttft_ms"] == by_name["ttft_ms"]


def test_a_gpu_group_without_a_link_option_is_refused_naming_the_option() -> None:
    doc = tpu_scenario("tpu-v6e")
    doc["systems"][0]["devices"] = [{"device": "h100-sxm", "count": 4}]
    del doc["systems"][0]["options"]["link"]
    errs = errors(doc)
    assert list(errs) == ["systems[0].options.link"]
    assert "share no peer link" in errs["systems[0].options.link"][0]


def test_the_power_quote_sets_the_tpus_energy() -> None:
    low = simulate(parse_scenario(tpu_scenario(tdp_w=200.0), CAT))["systems"][0]
    high = simulate(parse_scenario(tpu_scenario(tdp_w=400.0), CAT))["systems"][0]
    assert high["tpot_ms"] == low["tpot_ms"]
    assert high["energy_j"] == pytest.approx(2 * low["energy_j"])


def test_fp8_on_a_tpu_is_refused_naming_the_runtime_and_the_missing_peak() -> None:
    errs = errors(tpu_scenario(runtime="vllm-fp8"))
    assert list(errs) == ["systems[0].devices[0].runtime"]
    assert "fp8_tflops" in errs["systems[0].devices[0].runtime"][0]


@pytest.mark.parametrize("device", ["tpu-v5e", "tpu-v6e"])
def test_a_tpu_without_a_power_quote_is_refused_naming_the_placements_tdp_w(device: str) -> None:
    errs = errors(tpu_scenario(device, tdp_w=None))
    assert "systems[0].devices[0].tdp_w" in errs


def v80_scenario(*, tdp_w: float | None = 190.0, policy: str = "disaggregated") -> dict[str, Any]:
    decode: dict[str, Any] = {"device": "alveo-v80", "count": 2, "role": "decode"}
    if tdp_w is not None:
        decode["tdp_w"] = tdp_w
    return {
        "name": "v80 decode",
        "model": "llama2-7b",
        "workload": {
            "requests": 6,
            "input_tokens": 512,
            "output_tokens": 64,
            "arrival": {"kind": "closed"},
            "seed": 0,
        },
        "systems": [
            {
                "name": "1xA100 prefill + 2xV80 decode",
                "policy": policy,
                "devices": [
                    {"device": "a100-80gb", "count": 1, "role": "prefill"},
                    decode,
                ],
                "options": {"prefetch_ratio": 4}
                | ({"prefill_max_batch": 1} if policy == "disaggregated" else {}),
            }
        ],
    }


@pytest.mark.parametrize("policy", ["disaggregated", "glitches"])
def test_the_v80_decodes_behind_a_gpu_prefill_with_a_power_quote(policy: str) -> None:
    system = simulate(parse_scenario(v80_scenario(policy=policy), CAT))["systems"][0]
    by_slug = {d["device"]: d for d in system["devices"]}
    assert set(by_slug) == {"a100-80gb", "alveo-v80"}
    assert system["requests"] == 6 and system["tpot_ms"]["mean"] > 0
    assert by_slug["alveo-v80"]["energy_j"] > 0


def test_a_v80_without_a_power_quote_is_refused_naming_the_placement() -> None:
    errs = errors(v80_scenario(tdp_w=None))
    assert "systems[0].devices[1].tdp_w" in errs
