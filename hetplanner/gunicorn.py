"""gunicorn configuration of the web service (``gunicorn -c hetplanner/gunicorn.py
hetplanner.wsgi:application``); every value can be overridden from the environment.

Until issue 16 the web service ran 3 synchronous workers (``--workers 3``); this file
states that explicitly so the load benchmark (``benchmarks/test_bench_load.py``) measures
the configuration that is deployed.
"""

from __future__ import annotations

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "3"))
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "sync")
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-") or None  # empty: no access log
