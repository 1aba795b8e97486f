"""Test settings: fast password hashing; the same env switches (CI points at PostgreSQL/Redis).

Each test session is isolated from others running at the same time on the machine: it gets
its own SQLite test file, filesystem-broker folder and Celery queue, all derived from
``HETPLANNER_TEST_SESSION`` (default: this process's id). The live-worker fixture
(``tests/conftest.py``) starts ``celery -A hetplanner worker`` with the same session id and
``HETPLANNER_DB_NAME`` set to the test database, so the worker sees what the test writes.
"""

import os
import tempfile
from pathlib import Path

from .base import *  # noqa: F403
from .base import DATABASES, HOUSEKEEPING_TASKS, REDIS_URL, env, filesystem_broker_options

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

HETPLANNER_TEST_SESSION = env("HETPLANNER_TEST_SESSION", default=str(os.getpid()))
TEST_TMP_DIR = Path(tempfile.gettempdir()) / f"hetplanner-test-{HETPLANNER_TEST_SESSION}"

# Whitenoise serves the apps' static files straight from their folders (no collectstatic).
STATIC_ROOT = TEST_TMP_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not :memory:, so a worker process can open the same test database.
    TEST_TMP_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["TEST"] = {"NAME": str(TEST_TMP_DIR / "test.sqlite3")}
# Tests close every connection after each request, as before: a worker or server process
# holding an idle connection would keep the test database from being dropped at the end.
# The load benchmark's server sets DATABASE_CONN_MAX_AGE to measure the deployed setting.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=0)
if env("HETPLANNER_DB_NAME", default=""):
    # Set for worker processes started by the tests: use the test database directly.
    DATABASES["default"]["NAME"] = env("HETPLANNER_DB_NAME")

if not REDIS_URL:
    BROKER_DIR = TEST_TMP_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(BROKER_DIR)
CELERY_TASK_DEFAULT_QUEUE = f"hetplanner-test-{HETPLANNER_TEST_SESSION}"
HETPLANNER_HOUSEKEEPING_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}-housekeeping"
CELERY_TASK_ROUTES = {name: {"queue": HETPLANNER_HOUSEKEEPING_QUEUE} for name in HOUSEKEEPING_TASKS}
CELERY_BEAT_SCHEDULE_FILENAME = str(TEST_TMP_DIR / "celerybeat-schedule")
# Modules a test worker imports at start (test doubles registered by integration tests).
CELERY_IMPORTS = env.list("HETPLANNER_WORKER_IMPORTS", default=[])

# Short lifecycle timings so worker-loss tests finish in seconds.
HETPLANNER_HEARTBEAT_STALE_S = env.int("HETPLANNER_HEARTBEAT_STALE_S", default=10)
HETPLANNER_HEARTBEAT_INTERVAL_S = env.float("HETPLANNER_HEARTBEAT_INTERVAL_S", default=0.5)
HETPLANNER_QUEUED_STALE_S = env.int("HETPLANNER_QUEUED_STALE_S", default=30)
HETPLANNER_RECONCILE_INTERVAL_S = env.float("HETPLANNER_RECONCILE_INTERVAL_S", default=1.0)
CELERY_BEAT_SCHEDULE["reconcile-runs"]["schedule"] = HETPLANNER_RECONCILE_INTERVAL_S  # noqa: F405
CELERY_BEAT_SCHEDULE["reconcile-runs"]["options"]["expires"] = HETPLANNER_RECONCILE_INTERVAL_S  # noqa: F405

# ---
# Throttle counters live in this process (tests reset them); never flush the shared Redis.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": f"hetplanner-test-{HETPLANNER_TEST_SESSION}",
    }
}
if REDIS_URL:
    # A worker killed outright leaves its message unacknowledged in Redis: restore it soon
    # after the visibility timeout (2 × the hard limit; workers started by the reliability
    # tests lower the limits through HETPLANNER_TASK_*_TIME_LIMIT_S) instead of 100 s later.
    CELERY_BROKER_TRANSPORT_OPTIONS.update(unacked_restore_interval=1, unacked_restore_throttle=1)
# Test doubles (a policy that kills its worker process, one that spins until the soft time
# limit) registered in every test worker; their names start with "test-double-".
CELERY_IMPORTS = [*CELERY_IMPORTS, "tests.integration.worker_doubles"]
