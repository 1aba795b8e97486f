"""Settings shared by every environment, read from the process environment (12-factor).

Defaults need no server: SQLite under ``var/`` and Celery's filesystem broker. Set
``DATABASE_URL`` (e.g. ``postgres://user@127.0.0.1:5432/hetplanner``) and ``REDIS_URL``
(e.g. ``redis://127.0.0.1:6379/0``) to use PostgreSQL and Redis instead.
"""

from pathlib import Path
from typing import Any

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

SECRET_KEY = env("DJANGO_SECRET_KEY", default="insecure-local-only-key-change-me")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "simulations",
    "api",
    "frontend",
    "ops",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "hetplanner.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hetplanner.urls"
WSGI_APPLICATION = "hetplanner.wsgi.application"
ASGI_APPLICATION = "hetplanner.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'hetplanner.sqlite3'}"),
}
DATABASES["default"].setdefault("ATOMIC_REQUESTS", False)
# Persistent connections: opening a PostgreSQL connection per request costs
# a server backend and Django's connection setup on every page. Each web thread keeps its
# connection for a minute, checked before reuse so a restarted database does not fail the
# next request.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A worker process and the web server write the same file: wait for the lock instead of
    # failing, take the write lock when a transaction starts (no lock-upgrade deadlocks), and
    # let readers proceed while one process writes (WAL).
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    _sqlite_options = DATABASES["default"].setdefault("OPTIONS", {})
    _sqlite_options.setdefault("timeout", 30)
    _sqlite_options.setdefault("transaction_mode", "IMMEDIATE")
    _sqlite_options.setdefault("init_command", "PRAGMA journal_mode=WAL;")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # plotly.py's own plotly.min.js as frontend/vendor/plotly.min.js (no CDN).
    "frontend.staticfinders.PlotlyJsFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
MEDIA_ROOT = env.path("DJANGO_MEDIA_ROOT", default=str(VAR_DIR / "media"))

# --- Mail (password reset) -------------------------------------------------------------
# Without a mail server the default prints every message on the server's console (the
# terminal of `make run`, the web container's log), and the reset pages say so; Django's
# SMTP default made them say "we've emailed you" while nothing could be sent.
# EMAIL_URL (e.g. smtp+tls://user:password@mail.example.com:587) configures real mail;
# EMAIL_BACKEND alone picks another backend (e.g. the file backend, into EMAIL_FILE_PATH).
if env("EMAIL_URL", default=""):
    vars().update(env.email_url("EMAIL_URL"))
else:
    EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_FILE_PATH = env("EMAIL_FILE_PATH", default=str(VAR_DIR / "mail"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="hetplanner@localhost")

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

# --- Celery -------------------------------------------------------------------------------
REDIS_URL = env("REDIS_URL", default="")
BROKER_DIR = Path(env("HETPLANNER_BROKER_DIR", default=str(VAR_DIR / "broker")))


def filesystem_broker_options(folder: Path) -> dict:
    """Options of kombu's filesystem transport rooted at ``folder`` (created if missing).

    The transport does not create its folders, and its control folder (used for remote
    control and fan-out) would otherwise land in the current directory.

    It has no push: an idle worker lists the queue folder every ``polling_interval``
    seconds, so a message waits half of it on average. kombu's default (1 s) made each step
    of a capacity search's confirmation rounds (chunk → next chunk → decide stage → next
    round's chunks) wait about 0.5 s, and 0.2 s still cost the capacity-search benchmark's
    10,912-configuration search 4 s of its 20 s on two workers. At 0.1 s an idle worker
    uses about 0.25 % of a core (measured).
    """
    options: dict[str, Any] = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        # hetplanner.broker's: a message is written here, then renamed into the queue.
        "staging_folder": str(folder / "staging"),
        "rejected_folder": str(folder / "rejected"),
        "store_processed": False,
        "polling_interval": 0.1,
    }
    for key in ("data_folder_in", "processed_folder", "control_folder", "staging_folder"):
        Path(options[key]).mkdir(parents=True, exist_ok=True)
    return options


# Seconds to wait for Redis (connect, then each reply) before taking it for down: a Redis
# that drops packets must not hold a request or a send for long.
REDIS_CONNECT_TIMEOUT_S = env.float("HETPLANNER_REDIS_CONNECT_TIMEOUT_S", default=1.0)
REDIS_SOCKET_TIMEOUT_S = env.float("HETPLANNER_REDIS_SOCKET_TIMEOUT_S", default=2.0)

if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {
        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_S,
        # Above the worker's blocking-pop timeout (1 s), which must not count as a failure.
        "socket_timeout": max(5.0, REDIS_SOCKET_TIMEOUT_S),
    }
else:
    # kombu's filesystem transport, with atomic sends and claims between processes
    # (hetplanner/broker.py): a real broker between processes that needs no server.
    CELERY_BROKER_URL = "hetplanner-fs://"
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(BROKER_DIR)
CELERY_TASK_DEFAULT_QUEUE = env("HETPLANNER_QUEUE", default="hetplanner")
# The reconcilers' own queue, consumed by a worker of its own (`-Q housekeeping`): on the
# jobs' queue they waited behind every queued chunk and expired there unexecuted, so the
# recovery of a lost job grew with the backlog.
HETPLANNER_HOUSEKEEPING_QUEUE = env("HETPLANNER_HOUSEKEEPING_QUEUE", default="housekeeping")
HOUSEKEEPING_TASKS = ("simulations.reconcile_*",)
CELERY_TASK_ROUTES = {name: {"queue": HETPLANNER_HOUSEKEEPING_QUEUE} for name in HOUSEKEEPING_TASKS}
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SOFT_TIME_LIMIT = env.int("HETPLANNER_TASK_SOFT_TIME_LIMIT_S", default=600)
CELERY_TASK_TIME_LIMIT = env.int("HETPLANNER_TASK_HARD_TIME_LIMIT_S", default=660)
# Redis redelivers an unacknowledged message after this; keep it above the hard limit.
CELERY_BROKER_TRANSPORT_OPTIONS.setdefault("visibility_timeout", 2 * CELERY_TASK_TIME_LIMIT)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A send from the web process while the broker is down fails within a few seconds (the job
# is stored queued and marked unsent; the reconciler sends it later) instead of hanging.
CELERY_BROKER_CONNECTION_TIMEOUT = env.float("HETPLANNER_BROKER_CONNECTION_TIMEOUT_S", default=2.0)
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}

# Runs: how many times a run may be delivered to a worker before it is failed for good, and
# after how many seconds without a heartbeat a running run counts as abandoned.
HETPLANNER_MAX_ATTEMPTS = env.int("HETPLANNER_MAX_ATTEMPTS", default=3)
# Trace uploads larger than this (bytes) are parsed by a worker, not in the web request
#: the bundled Azure traces (0.3 and 0.7 MB) stay synchronous.
HETPLANNER_TRACE_ASYNC_BYTES = env.int("HETPLANNER_TRACE_ASYNC_BYTES", default=2 * 1024 * 1024)
HETPLANNER_HEARTBEAT_STALE_S = env.int("HETPLANNER_HEARTBEAT_STALE_S", default=120)
# How often a running task writes its progress and heartbeat (well below the stale limit).
HETPLANNER_HEARTBEAT_INTERVAL_S = env.float("HETPLANNER_HEARTBEAT_INTERVAL_S", default=10.0)
# A queued run whose message was sent longer ago than this is re-sent by the reconciler.
HETPLANNER_QUEUED_STALE_S = env.int("HETPLANNER_QUEUED_STALE_S", default=900)
# The reconciler runs periodically from celery beat (`celery -A hetplanner beat`, or a
# housekeeping worker started with --beat as `make run` does; the reconcilers run on the
# housekeeping queue, see HETPLANNER_HOUSEKEEPING_QUEUE).
HETPLANNER_RECONCILE_INTERVAL_S = env.float("HETPLANNER_RECONCILE_INTERVAL_S", default=60.0)
CELERY_BEAT_SCHEDULE = {
    "reconcile-runs": {
        "task": "simulations.reconcile_runs",
        "schedule": HETPLANNER_RECONCILE_INTERVAL_S,
        "options": {"expires": HETPLANNER_RECONCILE_INTERVAL_S},
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- REST framework -----------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "hetplanner API",
    "DESCRIPTION": "Capacity planning for LLM inference on heterogeneous hardware.",
    "VERSION": "0.1.0",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("DJANGO_LOG_LEVEL", default="INFO")},
}

# --- REST API, quotas and sweeps (README "REST API" lists these) -----------------
INSTALLED_APPS += ["drf_spectacular_sidecar"]  # Swagger UI served from our own static files

# Per-user request rates (DRF rate strings: N/second|minute|hour|day). ``run_submit`` and
# ``sweep_submit`` limit POSTs that queue work; ``upload`` trace uploads and HF imports;
# ``token`` token creation; ``user`` every authenticated request; ``anon`` the rest.
HETPLANNER_API_THROTTLE_RATES = {
    "user": env("HETPLANNER_THROTTLE_USER", default="3000/min"),
    "anon": env("HETPLANNER_THROTTLE_ANON", default="60/min"),
    "run_submit": env("HETPLANNER_THROTTLE_RUN_SUBMIT", default="30/min"),
    "sweep_submit": env("HETPLANNER_THROTTLE_SWEEP_SUBMIT", default="10/min"),
    "plan_submit": env("HETPLANNER_THROTTLE_PLAN_SUBMIT", default="10/min"),
    "upload": env("HETPLANNER_THROTTLE_UPLOAD", default="30/min"),
    "token": env("HETPLANNER_THROTTLE_TOKEN", default="10/min"),
    "token_exchange": env("HETPLANNER_THROTTLE_TOKEN_EXCHANGE", default="5/min"),
}
# Quotas: runs and sweeps a user may have queued or running at once.
HETPLANNER_MAX_ACTIVE_RUNS_PER_USER = env.int("HETPLANNER_MAX_ACTIVE_RUNS_PER_USER", default=20)
HETPLANNER_MAX_ACTIVE_SWEEPS_PER_USER = env.int("HETPLANNER_MAX_ACTIVE_SWEEPS_PER_USER", default=3)
# Configurations one sweep may expand to (checked before anything is queued), and how many
# configurations one chunk task simulates.
HETPLANNER_SWEEP_MAX_CONFIGS = env.int("HETPLANNER_SWEEP_MAX_CONFIGS", default=10_000)
HETPLANNER_SWEEP_CHUNK_SIZE = env.int("HETPLANNER_SWEEP_CHUNK_SIZE", default=25)
# API tokens a user may hold at once.
HETPLANNER_MAX_TOKENS_PER_USER = env.int("HETPLANNER_MAX_TOKENS_PER_USER", default=20)
# Largest request body (JSON or form) Django reads, bytes; trace files upload as multipart
# files and are capped by MAX_TRACE_BYTES in the services instead.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("HETPLANNER_MAX_BODY_BYTES", default=2 * 1024 * 1024)

CELERY_BEAT_SCHEDULE["reconcile-traces"] = {
    "task": "simulations.reconcile_traces",
    "schedule": HETPLANNER_RECONCILE_INTERVAL_S,
    "options": {"expires": HETPLANNER_RECONCILE_INTERVAL_S},
}
CELERY_BEAT_SCHEDULE["reconcile-sweeps"] = {
    "task": "simulations.reconcile_sweeps",
    "schedule": HETPLANNER_RECONCILE_INTERVAL_S,
    "options": {"expires": HETPLANNER_RECONCILE_INTERVAL_S},
}

REST_FRAMEWORK.update(
    {
        # Token first: an anonymous request then gets 401 with "WWW-Authenticate: Token".
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "api.authentication.ApiTokenAuthentication",
            "rest_framework.authentication.SessionAuthentication",
        ],
        "DEFAULT_PAGINATION_CLASS": "api.pagination.Pagination",
        "DEFAULT_FILTER_BACKENDS": [
            "api.filters.StrictFilterBackend",
            "api.filters.StrictOrderingFilter",
        ],
        "DEFAULT_THROTTLE_CLASSES": ["api.throttles.UserRateThrottle"],
        "DEFAULT_PARSER_CLASSES": ["api.parsers.BoundedJSONParser"],
        "EXCEPTION_HANDLER": "api.exceptions.exception_handler",
        "NON_FIELD_ERRORS_KEY": "non_field_errors",
    }
)
SPECTACULAR_SETTINGS.update(
    {
        "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
        "SWAGGER_UI_DIST": "SIDECAR",
        "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
        "REDOC_DIST": "SIDECAR",
        "COMPONENT_SPLIT_REQUEST": True,
        "ENUM_NAME_OVERRIDES": {
            "RunStatusEnum": "simulations.choices.RunStatus",
            "DeviceKindEnum": "simulations.choices.DeviceKind",
            "PrecisionBitsEnum": "api.common.PRECISION_CHOICES",
        },
        "POSTPROCESSING_HOOKS": [
            "drf_spectacular.hooks.postprocess_schema_enums",
            "api.schema.align_with_the_server",
            "api.schema.document_error_responses",
        ],
    }
)


# Throttle counters must be shared by every web process: Redis when configured, else a
# file cache under var/ (the default local-memory cache is per process).
def cache_settings(redis_url: str) -> dict:
    """``CACHES`` for ``redis_url`` (a file cache under var/ when it is empty).

    Redis through :class:`hetplanner.cache.FailoverRedisCache`: while Redis is unreachable
    the cache answers from process memory (logged) instead of failing every request.
    """
    return {
        "default": (
            {
                "BACKEND": "hetplanner.cache.FailoverRedisCache",
                "LOCATION": redis_url,
                "OPTIONS": {
                    "socket_connect_timeout": REDIS_CONNECT_TIMEOUT_S,
                    "socket_timeout": REDIS_SOCKET_TIMEOUT_S,
                    "RETRY_AFTER_S": env.float("HETPLANNER_CACHE_RETRY_AFTER_S", default=5.0),
                },
            }
            if redis_url
            else {
                "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                "LOCATION": str(VAR_DIR / "cache"),
            }
        )
    }


CACHES = cache_settings(REDIS_URL)

# Capacity-search plans: the reconciler re-sends lost stage and chunk tasks.
CELERY_BEAT_SCHEDULE["reconcile-plans"] = {
    "task": "simulations.reconcile_plans",
    "schedule": HETPLANNER_RECONCILE_INTERVAL_S,
    "options": {"expires": HETPLANNER_RECONCILE_INTERVAL_S},
}

# --- Operations: /healthz and manage.py healthcheck ---------------------------
# Workers and beat write a heartbeat row this often; /healthz (and the compose healthchecks)
# take a process for dead when its last one is older than the stale limit.
HETPLANNER_PROCESS_HEARTBEAT_S = env.float("HETPLANNER_PROCESS_HEARTBEAT_S", default=15.0)
HETPLANNER_PROCESS_STALE_S = env.float("HETPLANNER_PROCESS_STALE_S", default=60.0)
