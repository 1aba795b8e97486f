"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hetplanner.settings.local")

app = Celery("hetplanner")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Sweep tasks (issue 8) live in a sub-package of the simulations app.
app.autodiscover_tasks(["simulations.sweeps"])
# Capacity-search tasks (issue 10) likewise.
app.autodiscover_tasks(["simulations.plans"])
