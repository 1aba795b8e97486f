"""App config for the simulations app."""

from django.apps import AppConfig


class SimulationsConfig(AppConfig):
    """Catalog, scenarios, runs and the Celery tasks that execute them."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "simulations"
