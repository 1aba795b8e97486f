"""The page tests' ``store_succeeded_run`` beside a real worker: the helper takes a run through
the services itself, so a worker started earlier in the session (the live worker of the
integration tests) must never get a message for it and claim it first.

Against PostgreSQL and Redis when ``DATABASE_URL``/``REDIS_URL`` are set, against the embedded
defaults otherwise.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from simulations.choices import RunStatus
from simulations.runs import services as run_services
from tests.conftest import WorkerProcess
from tests.frontend.conftest import glitches_document, store_succeeded_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("builtin_catalog_rows")
def test_a_stored_run_is_never_claimed_by_a_live_worker(
    live_worker: WorkerProcess, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    claim = run_services.run_claim

    def late_claim(run_id: int, **kwargs: Any) -> Any:
        # Time for a worker that got a message to claim the run first, as it may on a
        # loaded machine between the helper's create and its claim.
        time.sleep(3)
        return claim(run_id, **kwargs)

    monkeypatch.setattr(run_services, "run_claim", late_claim)
    run = store_succeeded_run(user, glitches_document(4))
    assert run.status == RunStatus.SUCCEEDED
    assert run.worker == "test:1"
