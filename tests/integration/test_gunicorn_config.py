"""The web service's gunicorn configuration: threaded workers sized for a
2-core machine, used by the Dockerfile and compose, and persistent database connections."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent.parent
CONFIG = ROOT / "hetplanner" / "gunicorn.py"


def _config(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GUNICORN_")}
    with mock.patch.dict(os.environ, {**clean, **env}, clear=True):
        return runpy.run_path(str(CONFIG))


def test_gunicorn_runs_threaded_workers_one_per_core_with_keepalive() -> None:
    with mock.patch("os.cpu_count", return_value=2):
        conf = _config()
    assert conf["worker_class"] == "gthread"
    assert conf["workers"] == 2
    assert conf["threads"] == 4
    assert int(str(conf["keepalive"])) > 0


def test_gunicorn_settings_can_be_overridden_from_the_environment() -> None:
    conf = _config(GUNICORN_WORKERS="5", GUNICORN_THREADS="2", GUNICORN_ACCESSLOG="")
    assert (conf["workers"], conf["threads"], conf["accesslog"]) == (5, 2, None)


def test_the_image_and_compose_serve_with_the_gunicorn_config() -> None:
    assert "--config hetplanner/gunicorn.py" in (ROOT / "docker-compose.yml").read_text()
    assert '"--config", "hetplanner/gunicorn.py"' in (ROOT / "Dockerfile").read_text()


def test_web_processes_keep_their_database_connections() -> None:
    # the deployed settings in a fresh interpreter (the test settings turn it off)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_CONN_MAX_AGE"}
    env["DJANGO_SETTINGS_MODULE"] = "hetplanner.settings.local"
    code = (
        "from django.conf import settings; d = settings.DATABASES['default']; "
        "print(d['CONN_MAX_AGE'], d['CONN_HEALTH_CHECKS'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["60", "True"]
