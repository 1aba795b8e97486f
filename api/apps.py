"""App config for the REST API."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """REST API app."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "api"

    # The OpenAPI extension of the token authentication registers itself when the URLconf
    # imports api.schema (not in ready(): drf-spectacular costs 0.25 s to import, which
    # every management command's start-up would pay).
