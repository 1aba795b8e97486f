"""Benchmark session hooks: remove the test session's scratch folder (SQLite test file,
broker queue) that benchmarks with a database and live workers leave, as
``tests/conftest.py`` does for the test suite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        tmp = getattr(settings, "TEST_TMP_DIR", None)
    except ImproperlyConfigured:
        return
    if tmp is not None and Path(tmp).name.startswith("hetplanner-test-"):
        shutil.rmtree(tmp, ignore_errors=True)
