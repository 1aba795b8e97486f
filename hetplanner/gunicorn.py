"""gunicorn configuration of the web service (``gunicorn -c hetplanner/gunicorn.py
hetplanner.wsgi:application``); every value can be overridden from the environment.

Sized for the 2-core machines the project runs on (benchmarks/test_bench_load.py measures
it): one process per core
(``GUNICORN_WORKERS``, default the CPU count) with threads (``gthread``), so a slow
request (a run page's figures) no longer holds one of three synchronous workers while
short ones queue behind it, and keep-alive connections are served. The work is mostly
CPU in Python, so more processes than cores would only add contention; the threads cover
the time spent waiting on PostgreSQL and on clients. Database connections persist per
thread (``CONN_MAX_AGE`` in the settings), so ``workers × threads`` bounds them.
"""

from __future__ import annotations

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
workers = int(os.environ.get("GUNICORN_WORKERS", str(max(2, os.cpu_count() or 2))))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
# keep-alive between requests of one browser (gthread supports it; sync workers do not)
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "5"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
# recycle workers now and then (bounded memory growth), staggered so they never all restart
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "5000"))
max_requests_jitter = int(os.environ.get("GUNICORN_MAX_REQUESTS_JITTER", "500"))
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-") or None  # empty: no access log
