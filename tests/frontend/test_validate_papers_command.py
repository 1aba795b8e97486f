"""``manage.py validate_papers``: stores the reports and prints the predictions headline."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from frontend.models import ValidationReport

pytestmark = pytest.mark.django_db


def test_it_prints_the_predictions_headline_of_each_paper() -> None:
    out = io.StringIO()
    call_command("validate_papers", "glitches", stdout=out)
    checks = ValidationReport.objects.get(paper="glitches").document["checks"]
    predictions = [c for c in checks if c["basis"] == "prediction" and c["discriminating"]]
    ok = sum(1 for c in predictions if c["ok"])
    assert f"glitches: predictions within tolerance: {ok} of {len(predictions)}" in out.getvalue()
    assert f"{sum(1 for c in checks if c['ok'])}/{len(checks)} checks in all" in out.getvalue()
