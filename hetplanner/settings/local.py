"""Local development: debug on, embedded defaults unless DATABASE_URL / REDIS_URL are set."""

from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
