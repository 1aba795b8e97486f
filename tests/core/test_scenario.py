"""Scenario documents → ScenarioSpec: validation with JSON paths (pure core, no database)."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from simulations.core import scenario as sc
from simulations.core.errors import ScenarioValidationError, UnknownPolicyError
from simulations.core.policies import OptionSpec, Policy, RoleSpec
from simulations.core.spec import (
    ArrivalKind,
    LengthDistKind,
    ModelSpec,
    SloSpec,
    SystemSpec,
    TraceData,
    WorkloadSpec,
)
from tests.catalog_records import make_catalog

CATALOG = make_catalog()
TRACE = TraceData(
    arrival_s=(0.0, 0.5, 2.0, 3.0),
    input_tokens=(100, 200, 300, 400),
    output_tokens=(10, 20, 30, 40),
    name="conv",
)


def doc(**overrides: Any) -> dict[str, Any]:
    """A valid document on the test catalog (policy names are not registered in the core)."""
    base: dict[str, Any] = {
        "name": "FPGA split vs GPUs",
        "model": "t-llama2-7b",
        "workload": {
            "requests": 200,
            "input_tokens": 1536,
            "output_tokens": 512,
            "arrival": {"kind": "closed"},
            "seed": 0,
        },
        "systems": [
            {
                "name": "1xA100+7xU280",
                "policy": "not-registered-split",
                "devices": [
                    {"device": "t-a100-80gb", "count": 1, "role": "prefill"},
                    {"device": "t-u280", "count": 7, "role": "decode"},
                ],
                "options": {"prefetch_ratio": 4},
            },
            {
                "name": "8xA100",
                "policy": "not-registered-homog",
                "devices": [{"device": "t-a100-80gb", "count": 8, "runtime": "t-gpu-int8"}],
            },
        ],
        "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 100},
    }
    base.update(overrides)
    return base


def errors_of(document: Any, **kwargs: Any) -> dict[str, list[str]]:
    with pytest.raises(ScenarioValidationError) as err:
        sc.parse_scenario(document, CATALOG, **kwargs)
    return err.value.errors


def test_it_resolves_a_valid_document() -> None:
    spec = sc.parse_scenario(doc(), CATALOG)
    assert spec.name == "FPGA split vs GPUs"
    assert spec.model.slug == "t-llama2-7b"
    assert spec.workload.requests == 200
    assert spec.workload.input_tokens.kind is LengthDistKind.FIXED
    assert spec.workload.input_tokens.value == 1536
    assert spec.workload.arrival.kind is ArrivalKind.CLOSED
    split, gpus = spec.systems
    assert [p.device.slug for p in split.devices] == ["t-a100-80gb", "t-u280"]
    assert [p.role for p in split.devices] == ["prefill", "decode"]
    assert split.options == {"prefetch_ratio": 4}
    assert spec.slo == SloSpec(ttft_p90_ms=2000.0, tpot_p90_ms=100.0)
    assert gpus.devices[0].count == 8


def test_devices_without_a_runtime_use_their_kinds_default() -> None:
    spec = sc.parse_scenario(doc(), CATALOG)
    split, gpus = spec.systems
    assert split.devices[0].runtime.slug == "t-gpu-fp16"
    assert split.devices[1].runtime.slug == "t-fpga-w4a8"
    assert gpus.devices[0].runtime.slug == "t-gpu-int8"


def test_it_reports_every_error_at_once_keyed_by_json_path() -> None:
    bad = doc()
    bad["model"] = "no-such-model"
    bad["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": math.nan}
    bad["systems"][0]["devices"][0]["count"] = 0
    bad["systems"][0]["devices"][1]["device"] = "no-such-device"
    bad["systems"][1]["devices"][0]["count"] = "8"
    bad["systems"][1]["devices"][0]["runtime"] = "t-fpga-w4a8"
    bad["slo"]["ttft_p90_ms"] = math.inf
    errors = errors_of(bad)
    assert set(errors) == {
        "model",
        "workload.arrival.rate_per_s",
        "systems[0].devices[0].count",
        "systems[0].devices[1].device",
        "systems[1].devices[0].count",
        "systems[1].devices[0].runtime",
        "slo.ttft_p90_ms",
    }
    assert "unknown model 'no-such-model'" in errors["model"]
    assert any("finite" in m for m in errors["workload.arrival.rate_per_s"])
    assert errors["systems[0].devices[0].count"] == ["must be at least 1"]
    assert "unknown device 'no-such-device'" in errors["systems[0].devices[1].device"]
    assert errors["systems[1].devices[0].count"] == ["must be an integer, got string"]
    assert "is for fpga devices, not gpu" in errors["systems[1].devices[0].runtime"][0]
    assert any("finite" in m for m in errors["slo.ttft_p90_ms"])


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("workload", "requests"), True, "must be an integer, got boolean"),
        (("workload", "requests"), -1, "must be at least 1"),
        (("workload", "requests"), 2.5, "must be an integer, got number"),
        (("workload", "seed"), -3, "must be at least 0"),
        (("workload", "input_tokens"), "long", "must be an integer or a distribution object"),
        (("name",), "", "must not be empty"),
        (("name",), 7, "must be a string, got number"),
    ],
)
def test_it_rejects_wrong_types_and_values(
    path: tuple[str, ...], value: Any, expected: str
) -> None:
    bad = doc()
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    errors = errors_of(bad)
    key = ".".join(path)
    assert key in errors
    assert any(m.startswith(expected) for m in errors[key]), errors[key]


def test_it_rejects_unknown_fields_naming_them() -> None:
    bad = doc(colour="blue")
    bad["systems"][0]["devices"][0]["cnt"] = 3
    errors = errors_of(bad)
    assert "colour" in errors
    assert "systems[0].devices[0].cnt" in errors


def test_it_rejects_a_document_that_is_not_an_object() -> None:
    assert errors_of([1, 2]) == {"document": ["must be a JSON object, got array"]}


def test_it_caps_requests_systems_and_devices() -> None:
    bad = doc()
    bad["workload"]["requests"] = sc.MAX_REQUESTS + 1
    bad["systems"][0]["devices"][1]["count"] = sc.MAX_DEVICES_PER_SYSTEM
    errors = errors_of(bad)
    assert errors["workload.requests"] == [f"must be at most {sc.MAX_REQUESTS}"]
    assert "at most 1024 are allowed" in errors["systems[0].devices"][0]

    many = doc(systems=[doc()["systems"][1] | {"name": f"s{i}"} for i in range(sc.MAX_SYSTEMS + 1)])
    assert "systems" in errors_of(many)

    wide = doc()
    wide["systems"][1]["devices"] = [
        {"device": "t-a100-80gb", "count": 1} for _ in range(sc.MAX_PLACEMENTS_PER_SYSTEM + 1)
    ]
    assert errors_of(wide)["systems[1].devices"] == [
        f"must have at most {sc.MAX_PLACEMENTS_PER_SYSTEM} entries"
    ]


def test_it_caps_token_lengths() -> None:
    bad = doc()
    bad["workload"]["output_tokens"] = sc.MAX_TOKENS + 1
    bad["workload"]["input_tokens"] = {"dist": "uniform", "low": 1, "high": 10**9}
    errors = errors_of(bad)
    assert errors["workload.output_tokens"] == [f"must be at most {sc.MAX_TOKENS}"]
    assert errors["workload.input_tokens.high"] == [f"must be at most {sc.MAX_TOKENS}"]


def test_it_rejects_empty_systems_and_devices_lists() -> None:
    bad = doc(systems=[])
    assert errors_of(bad)["systems"] == ["must have at least 1 entry"]
    bad = doc()
    bad["systems"][0]["devices"] = []
    assert errors_of(bad)["systems[0].devices"] == ["must have at least 1 entry"]


def test_it_rejects_duplicate_system_names() -> None:
    bad = doc()
    bad["systems"][1]["name"] = bad["systems"][0]["name"]
    assert "duplicate system name" in errors_of(bad)["systems[1].name"][0]


def test_it_parses_length_distributions() -> None:
    document = doc()
    document["workload"]["input_tokens"] = {"dist": "uniform", "low": 128, "high": 2048}
    document["workload"]["output_tokens"] = {
        "dist": "lognormal",
        "median": 200,
        "sigma": 0.8,
        "high": 4096,
    }
    wl = sc.parse_scenario(document, CATALOG).workload
    assert (wl.input_tokens.kind, wl.input_tokens.low, wl.input_tokens.high) == (
        LengthDistKind.UNIFORM,
        128,
        2048,
    )
    assert wl.output_tokens.kind is LengthDistKind.LOGNORMAL
    assert (wl.output_tokens.median, wl.output_tokens.sigma) == (200.0, 0.8)
    assert (wl.output_tokens.low, wl.output_tokens.high) == (None, 4096)


def test_it_rejects_bad_distributions() -> None:
    bad = doc()
    bad["workload"]["input_tokens"] = {"dist": "uniform", "low": 500, "high": 100}
    bad["workload"]["output_tokens"] = {"dist": "lognormal", "median": -1, "sigma": math.nan}
    errors = errors_of(bad)
    assert errors["workload.input_tokens.high"] == ["must not be below low"]
    assert errors["workload.output_tokens.median"] == ["must be positive"]
    assert "finite" in errors["workload.output_tokens.sigma"][0]
    bad["workload"]["input_tokens"] = {"dist": "zipf"}
    assert "must be one of" in errors_of(bad)["workload.input_tokens.dist"][0]


def test_poisson_arrivals_need_a_positive_rate() -> None:
    document = doc()
    document["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": 2.5}
    assert sc.parse_scenario(document, CATALOG).workload.arrival.rate_per_s == 2.5
    document["workload"]["arrival"] = {"kind": "poisson"}
    assert errors_of(document)["workload.arrival.rate_per_s"] == ["is required"]
    document["workload"]["arrival"] = {"kind": "poisson", "rate_per_s": 0}
    assert errors_of(document)["workload.arrival.rate_per_s"] == ["must be positive"]


def test_trace_arrivals_and_lengths_come_from_the_named_trace() -> None:
    document = doc()
    document["workload"].update(
        requests=4,
        input_tokens={"dist": "trace"},
        output_tokens={"dist": "trace"},
        arrival={"kind": "trace", "trace": "conv", "time_scale": 2.0},
    )
    wl = sc.parse_scenario(document, CATALOG, traces={"conv": TRACE}).workload
    assert wl.trace is not None and wl.trace.input_tokens == TRACE.input_tokens
    assert wl.arrival.kind is ArrivalKind.TRACE
    assert wl.arrival.time_scale == 2.0
    assert wl.input_tokens.kind is LengthDistKind.TRACE


def test_trace_references_must_exist_agree_and_cover_the_requests() -> None:
    document = doc()
    document["workload"].update(
        requests=5, arrival={"kind": "trace", "trace": "conv"}, input_tokens={"dist": "trace"}
    )
    errors = errors_of(document, traces={"conv": TRACE})
    assert errors["workload.requests"] == ["must not exceed the trace's 4 requests"]

    document["workload"]["requests"] = 2
    assert errors_of(document)["workload.arrival.trace"] == ["unknown trace 'conv'"]

    document["workload"]["input_tokens"] = {"dist": "trace", "trace": "code"}
    errors = errors_of(document, traces={"conv": TRACE, "code": TRACE})
    assert "a workload uses one trace" in errors["workload.arrival.trace"][0]

    document["workload"]["arrival"] = {"kind": "closed"}
    document["workload"]["input_tokens"] = {"dist": "trace"}
    assert errors_of(document)["workload.input_tokens.trace"] == [
        "name the trace (here or in workload.arrival.trace)"
    ]


def test_trace_paths_are_read_only_with_a_trace_dir(tmp_path: Path) -> None:
    (tmp_path / "mini.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
        "2023-11-16 18:15:46.6805900,374,44\r\n"
        "2023-11-16 18:15:50.9951690,396,109"
    )
    document = doc()
    document["workload"].update(requests=2, arrival={"kind": "trace", "trace": "mini.csv"})
    assert errors_of(document)["workload.arrival.trace"] == ["unknown trace 'mini.csv'"]
    wl = sc.parse_scenario(document, CATALOG, trace_dir=tmp_path).workload
    assert wl.trace is not None
    assert wl.trace.output_tokens == (44, 109)
    assert wl.trace.arrival_s[1] == pytest.approx(4.314579)


def test_an_unregistered_policy_is_not_a_validation_error() -> None:
    spec = sc.parse_scenario(doc(), CATALOG)
    assert spec.systems[0].policy == "not-registered-split"
    with pytest.raises(UnknownPolicyError):
        from simulations.core.policies import get_policy

        get_policy("not-registered-split")


class _OptionsDouble(Policy):
    """Test double for option/role validation; never registered, never run."""

    name = "options-double"
    roles: ClassVar[tuple[RoleSpec, ...]] = (
        RoleSpec("prefill", "prompt processing", kinds=("gpu",)),
        RoleSpec("decode", "token generation", kinds=("fpga", "gpu")),
        RoleSpec("spare", "optional", required=False),
    )
    options: ClassVar[tuple[OptionSpec, ...]] = (
        OptionSpec("prefetch_ratio", int, 2, "prefetch depth", minimum=1, maximum=64),
        OptionSpec("overlap", bool, True, "overlap phases"),
    )

    def run(
        self,
        system: SystemSpec,
        model: ModelSpec,
        workload: WorkloadSpec,
        slo: SloSpec,
        rng: np.random.Generator,
        progress: Any = None,
    ) -> dict[str, Any]:
        raise AssertionError("validation tests never run a policy")


@pytest.fixture
def options_double(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the parser see ``_OptionsDouble`` as policy ``not-registered-split``."""
    real = sc.get_policy

    def fake(name: str) -> type[Policy]:
        if name == "not-registered-split":
            return _OptionsDouble
        return real(name)

    monkeypatch.setattr(sc, "get_policy", fake)


@pytest.mark.usefixtures("options_double")
def test_options_of_a_registered_policy_are_checked_and_defaulted() -> None:
    spec = sc.parse_scenario(doc(), CATALOG)
    assert spec.systems[0].options == {"prefetch_ratio": 4, "overlap": True}

    bad = doc()
    bad["systems"][0]["options"] = {"prefetch_ratio": 0, "overlapp": False, "overlap": "yes"}
    errors = errors_of(bad)
    assert errors["systems[0].options.prefetch_ratio"] == ["must be at least 1"]
    assert errors["systems[0].options.overlap"] == ["must be true or false"]
    assert errors["systems[0].options.overlapp"][0].startswith(
        "unknown option for policy 'not-registered-split'"
    )


@pytest.mark.usefixtures("options_double")
def test_roles_of_a_registered_policy_are_checked() -> None:
    bad = doc()
    devices = bad["systems"][0]["devices"]
    devices[0]["role"] = "decode"
    devices[1]["role"] = "prefill"  # an FPGA where the policy takes only GPUs
    devices.append({"device": "t-u280", "count": 1, "role": "prefil"})
    devices.append({"device": "t-u280", "count": 1})
    errors = errors_of(bad)
    assert "takes gpu devices, not fpga (t-u280)" in errors["systems[0].devices[1].device"][0]
    assert errors["systems[0].devices[2].role"][0].startswith(
        "unknown role 'prefil' for policy 'not-registered-split'"
    )
    assert errors["systems[0].devices[3].role"][0].startswith("a role is required")

    missing = doc()
    missing["systems"][0]["devices"][0]["role"] = "decode"
    assert errors_of(missing)["systems[0].devices"] == [
        "policy 'not-registered-split' needs a device with role 'prefill'"
    ]


def test_unknown_runtime_and_missing_default_are_reported() -> None:
    bad = doc()
    bad["systems"][1]["devices"][0]["runtime"] = "no-such-stack"
    bad["systems"][0]["devices"].append({"device": "t-xeon", "count": 1})
    errors = errors_of(bad)
    assert errors["systems[1].devices[0].runtime"] == ["unknown runtime profile 'no-such-stack'"]
    assert errors["systems[0].devices[2].runtime"] == [
        "no default runtime profile for cpu devices; name one"
    ]


def test_a_document_round_trips_through_scenario_to_document() -> None:
    document = doc()
    document["workload"].update(
        requests=3,
        input_tokens={"dist": "lognormal", "median": 300, "sigma": 0.5, "low": 8, "high": 4000},
        output_tokens={"dist": "trace"},
        arrival={"kind": "trace", "trace": "conv", "time_scale": 0.5},
        seed=42,
    )
    spec = sc.parse_scenario(document, CATALOG, traces={"conv": TRACE})
    again = sc.parse_scenario(sc.scenario_to_document(spec), CATALOG, traces={"conv": TRACE})
    assert again == spec
    assert again.systems[0].options == spec.systems[0].options
    assert again.workload.trace == spec.workload.trace


def test_parsing_does_not_modify_the_document() -> None:
    document = doc()
    before = copy.deepcopy(document)
    sc.parse_scenario(document, CATALOG)
    assert document == before


def test_parse_workload_reports_workload_paths() -> None:
    with pytest.raises(ScenarioValidationError) as err:
        sc.parse_workload({"requests": 0, "input_tokens": 10, "output_tokens": 10})
    assert err.value.errors == {"workload.requests": ["must be at least 1"]}


def test_trace_names_lists_the_traces_a_document_mentions() -> None:
    document = doc()
    document["workload"]["arrival"] = {"kind": "trace", "trace": "conv"}
    document["workload"]["input_tokens"] = {"dist": "trace", "trace": "code"}
    assert sc.trace_names(document) == {"conv", "code"}
    assert sc.trace_names("not a document") == set()
