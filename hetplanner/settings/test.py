"""Test settings: fast password hashing; the same env switches (CI points at PostgreSQL/Redis)."""

from .base import *  # noqa: F403
from .base import env

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
HETPLANNER_HEARTBEAT_STALE_S = env.int("HETPLANNER_HEARTBEAT_STALE_S", default=5)
