"""Provenance on the pages: the run page's per-device entries, the
builder (as soon as a device and stack are chosen) and the plan's recommendation say how
far the figures can be trusted, in words a planner understands."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from frontend.provenance import plan_provenance
from simulations.measurements import services as msvc
from tests.factories import MeasurementSetFactory

from .conftest import glitches_document, store_succeeded_run

pytestmark = pytest.mark.django_db


def _h100_vs_a100() -> dict[str, Any]:
    doc = glitches_document(requests=20)
    doc["systems"] = [
        {
            "name": "8xH100",
            "policy": "homogeneous",
            "devices": [{"device": "h100-sxm", "count": 8, "runtime": "vllm-fp16"}],
        },
        {
            "name": "8xA100",
            "policy": "homogeneous",
            "devices": [{"device": "a100-80gb", "count": 8, "runtime": "vllm-fp16"}],
        },
    ]
    return doc


def test_the_run_page_says_which_devices_were_measured(
    alice_client: Client, user: Any, seeded: Any
) -> None:
    run = store_succeeded_run(user, _h100_vs_a100())
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    table = html[html.index('id="provenance"') :]
    assert "vllm-fp16: predicted from a100-80gb measurements; not measured on h100-sxm." in table
    assert "vllm-fp16: fitted to measurements on a100-80gb." in table
    labels = re.findall(r'<tr data-calibration="(\w+)">', table)
    assert labels == ["transferred", "measured"]
    assert "predicted from other devices" in table
    assert "measured on this device" in table


def test_the_builder_says_it_for_the_chosen_device_and_stack(
    alice_client: Client, user: Any, other_user: Any, seeded: Any
) -> None:
    # a private profile of another user is neither offered nor described
    cal = msvc.calibration_run(
        owner=other_user, measurement_set=MeasurementSetFactory(owner=other_user)
    )
    msvc.calibration_save_profile(calibration=cal, user=other_user, slug="bobs-vllm")
    html = alice_client.get("/scenarios/new/").content.decode()
    registry = json.loads(
        re.search(r'<script[^>]*id="builder-registry"[^>]*>(.*?)</script>', html, re.S).group(1)
    )
    entry = registry["provenance"]["h100-sxm|vllm-fp16"]
    assert entry["label"] == "transferred"
    assert entry["note"] == (
        "vllm-fp16: predicted from a100-80gb measurements; not measured on h100-sxm."
    )
    assert registry["provenance"]["a100-80gb|vllm-fp16"]["label"] == "measured"
    assert "a100-80gb|" in registry["provenance"]  # the kind's default profile
    assert not any(k.endswith("|bobs-vllm") for k in registry["provenance"])
    assert "bobs-vllm" not in html


def test_a_plan_recommendation_lists_its_placements_provenance() -> None:
    entry = {
        "description": "2 x h100-sxm",
        "calibration": [
            {
                "device": "h100-sxm",
                "runtime": "vllm-fp16",
                "calibration": "transferred",
                "calibrated_on": ["a100-80gb"],
                "calibration_note": "vllm-fp16: predicted from a100-80gb measurements; "
                "not measured on h100-sxm.",
            }
        ],
    }
    (p,) = plan_provenance(entry)
    assert (p.label, p.badge) == ("transferred", "predicted from other devices")
    assert p.note.endswith("not measured on h100-sxm.")
    assert plan_provenance(None) == []


def test_the_api_result_and_the_csv_carry_the_words(
    alice_client: Client, user: Any, seeded: Any
) -> None:
    from rest_framework.test import APIClient

    run = store_succeeded_run(user, _h100_vs_a100())
    api = APIClient()
    api.force_authenticate(user)
    body = api.get(f"/api/runs/{run.pk}/result/").json()
    (h100,) = body["result"]["systems"][0]["devices"]
    assert (h100["calibration"], h100["calibrated_on"]) == ("transferred", ["a100-80gb"])
    assert h100["calibration_note"].endswith("not measured on h100-sxm.")
    csv_text = alice_client.get(f"/runs/{run.pk}/result.csv").content.decode()
    assert "calibration,calibration_note" in csv_text
    assert "not measured on h100-sxm." in csv_text


def test_the_plan_page_says_it_under_the_recommendation(
    alice_client: Client, user: Any, seeded: Any
) -> None:
    from django.utils import timezone

    from simulations.choices import RunStatus
    from simulations.core.catalog import builtin_catalog
    from simulations.core.planner import parse_plan, plan_search
    from simulations.plans import services as plan_services
    from simulations.plans.models import Plan
    from tests.core.planner.helpers import small_doc

    result = plan_search(parse_plan(small_doc(), builtin_catalog()))
    plan = plan_services.plan_create(spec=small_doc(), owner=user)
    Plan.objects.filter(pk=plan.pk).update(
        status=RunStatus.SUCCEEDED, result=result, progress=100, finished_at=timezone.now()
    )
    html = alice_client.get(f"/plans/{plan.pk}/").content.decode()
    section = html[html.index('id="recommendation-provenance"') :]
    for placement in result["recommendation"]["calibration"]:
        assert f'data-calibration="{placement["calibration"]}"' in section
        assert placement["calibration_note"] in section
