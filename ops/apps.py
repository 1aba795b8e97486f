"""Operations: process heartbeats, ``/healthz`` and ``manage.py healthcheck``."""

from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Connects the Celery signals that start the worker's and beat's heartbeat threads."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        from ops import signals  # noqa: F401  (connects the receivers)
