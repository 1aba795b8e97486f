"""Project-level checks: migrations in sync, deploy checks clean, compose file valid."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simulations.core import scenario as limits

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


# Test-session switches that must not reach a production check (the browser tests lift
# Django's async-safety check for their own process; production never does).
_TEST_ONLY_ENV = ("DJANGO_ALLOW_ASYNC_UNSAFE",)


def manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in _TEST_ONLY_ENV}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_makemigrations_check_is_clean() -> None:
    result = manage("makemigrations", "--check", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No changes detected" in result.stdout


def test_check_deploy_on_production_settings_has_no_warnings() -> None:
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={
            "DJANGO_SETTINGS_MODULE": "hetplanner.settings.production",
            "DJANGO_SECRET_KEY": "k" * 20 + "-deploy-check-only-" + "q" * 30,
            "DJANGO_ALLOWED_HOSTS": "planner.example.com",
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_compose_file_runs_web_worker_redis_and_postgres_from_one_image() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"web", "worker", "redis", "postgres"} <= set(services)
    app_services = [name for name, svc in services.items() if "build" in svc]
    assert {"web", "worker", "housekeeping", "beat", "migrate"} <= set(app_services)
    assert {services[n]["build"] for n in app_services} == {"."}
    assert len({services[n]["image"] for n in app_services}) == 1
    assert "gunicorn" in services["web"]["command"]
    assert "celery -A hetplanner worker" in services["worker"]["command"]
    for name in app_services:
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert env["DJANGO_SETTINGS_MODULE"] == "hetplanner.settings.production"
        assert {"postgres", "redis"} <= set(services[name]["depends_on"])
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")


def test_dockerfile_serves_with_gunicorn_and_collects_static_files() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "collectstatic" in dockerfile
    assert 'CMD ["gunicorn", "hetplanner.wsgi:application"' in dockerfile
    assert (
        "whitenoise.middleware.WhiteNoiseMiddleware"
        in (ROOT / "hetplanner/settings/base.py").read_text()
    )


def test_readme_documents_the_two_commands_and_the_input_limits() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    for name in (
        "MAX_REQUESTS",
        "MAX_SYSTEMS",
        "MAX_PLACEMENTS_PER_SYSTEM",
        "MAX_DEVICES_PER_SYSTEM",
        "MAX_TOKENS",
        "MAX_TRACE_ROWS",
    ):
        value = getattr(limits, name)
        assert f"{value:,}" in readme, f"README does not state {name} = {value:,}"


def app_services(compose: dict) -> dict[str, dict]:
    """The compose services built from this repository's image."""
    return {n: s for n, s in compose["services"].items() if s.get("image") == "hetplanner:latest"}


def test_compose_refuses_to_start_without_a_secret_key() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = app_services(compose)
    assert services
    for name, service in services.items():
        key = service["environment"]["DJANGO_SECRET_KEY"]
        # ${VAR:?message}: compose stops with the message when VAR is unset or empty.
        assert key.startswith("${DJANGO_SECRET_KEY:?") and key.endswith("}"), (name, key)


def test_production_settings_refuse_an_empty_secret_key() -> None:
    env = {
        "DJANGO_SETTINGS_MODULE": "hetplanner.settings.production",
        "DJANGO_ALLOWED_HOSTS": "planner.example.com",
    }
    for key in ("", "   "):
        result = manage("check", env={**env, "DJANGO_SECRET_KEY": key})
        assert result.returncode != 0, result.stdout
        assert "ImproperlyConfigured" in result.stderr
        assert "DJANGO_SECRET_KEY" in result.stderr


def seconds(duration: str) -> int:
    """A compose duration such as ``12m`` or ``1m30s`` in seconds."""
    import re

    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+)([hms])", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


def test_compose_operations_healthchecks_grace_persistence_secrets_and_one_off_migrations() -> None:
    from hetplanner.settings import base

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    roles = {"web": "web", "worker": "worker", "housekeeping": "worker", "beat": "beat"}
    for name, role in roles.items():
        test = services[name]["healthcheck"]["test"]
        assert test[:1] == ["CMD"] and "healthcheck" in test, (name, test)
        assert test[test.index("--role") + 1] == role, (name, test)
        # Migrations and seeding run once, in the migrate service, before anything starts.
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
        assert "migrate" not in str(services[name].get("command", ""))
    # Celery's warm shutdown waits for running tasks up to the hard time limit.
    for name in ("worker", "housekeeping"):
        assert seconds(services[name]["stop_grace_period"]) > base.CELERY_TASK_TIME_LIMIT
    migrate = services["migrate"]
    assert "migrate --noinput" in migrate["command"] and "seed_catalog" in migrate["command"]
    assert migrate["restart"] == "no"
    assert set(migrate["depends_on"]) == {"postgres", "redis"}
    # Redis keeps its data across restarts (append-only file on a volume).
    redis = services["redis"]
    assert "--appendonly" in redis["command"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert any(v.endswith(":/data") for v in redis["volumes"])
    assert redis["volumes"][0].split(":")[0] in compose["volumes"]
    # The PostgreSQL password comes from the environment, required.
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD:?"
    )
    for name in app_services(compose):
        assert "${POSTGRES_PASSWORD:?" in services[name]["environment"]["DATABASE_URL"]
