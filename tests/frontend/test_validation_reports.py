"""The validation page's report rows take any registered paper: ``ValidationReport.paper``
has no fixed choices (a new paper's package needs no migration) and is checked against the
paper registry by the model and by the service that stores reports."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from frontend import validation
from frontend.models import ValidationReport
from simulations.core.policies import base

pytestmark = pytest.mark.django_db


@pytest.fixture
def new_paper(monkeypatch: pytest.MonkeyPatch) -> str:
    """A paper registered from a test (a copy of the registry; the real one is put back)."""
    monkeypatch.setattr(base, "_PAPERS", dict(base._PAPERS))
    base.register_paper("toy-paper", "A toy paper — registered by a test", __name__)
    return "toy-paper"


def test_a_newly_registered_paper_is_stored_without_a_migration(
    new_paper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = ValidationReport(paper=new_paper, status=ValidationReport.Status.COMPUTING)
    row.full_clean()
    monkeypatch.setattr(
        "simulations.core.reproduce.reproduce", lambda paper: {"paper": paper, "checks": []}
    )
    stored = validation.compute(new_paper)
    assert (stored.paper, stored.status) == (new_paper, ValidationReport.Status.READY)
    listed = {r["paper"]: r for r in validation.reports()}
    assert listed[new_paper]["title"] == "A toy paper — registered by a test"


def test_an_unknown_paper_is_refused_by_the_model_and_the_service() -> None:
    with pytest.raises(ValidationError) as exc:
        ValidationReport(paper="no-such-paper").full_clean()
    assert "paper" in exc.value.message_dict
    for service in (validation.compute, validation.request):
        with pytest.raises(ValueError, match="unknown paper"):
            service("no-such-paper")
    assert not ValidationReport.objects.exists()


def test_the_paper_field_has_no_fixed_choices() -> None:
    field: Any = ValidationReport._meta.get_field("paper")
    assert not field.choices
