"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import os

from celery import Celery

from hetplanner import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hetplanner.settings.local")
broker.register()

app = Celery("hetplanner")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The simulations app keeps its tasks in its capability sub-packages.
app.autodiscover_tasks(
    [
        "simulations.runs",
        "simulations.scenarios",
        "simulations.sweeps",
        "simulations.plans",
    ]
)
