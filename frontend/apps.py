"""App config for the dashboard pages."""

from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """Dashboard pages."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "frontend"
