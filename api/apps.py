"""App config for the REST API."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """REST API app."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "api"

    def ready(self) -> None:
        # Registers the OpenAPI extension of the token authentication.
        from api import schema  # noqa: F401
