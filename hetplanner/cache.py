"""A Redis cache that keeps serving from process memory while Redis is unreachable.

The API's throttle counters live in the cache. With Django's plain ``RedisCache`` a Redis
outage made every request that touches a counter fail with a 500. This backend
answers from a per-process :class:`~django.core.cache.backends.locmem.LocMemCache` instead:
throttling keeps counting (per web process rather than across them, so a limit is at
worst multiplied by the number of processes for the outage's duration) and nothing else
that uses the cache breaks.

After a failure Redis is left alone for ``RETRY_AFTER_S`` seconds (so a dead Redis costs one
connection attempt per process per interval, not one per request), then tried again. The
outage is logged once when it starts and once when Redis answers again, never per request.
Keep the connection's ``socket_connect_timeout`` and ``socket_timeout`` short (the settings
do) so a Redis that accepts no packets at all does not hold requests either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

#: What counts as "Redis is unreachable" (BusyLoadingError is a ConnectionError too).
UNREACHABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    TimeoutError,
)

T = TypeVar("T")


class _Outage:
    """The state of one Redis location's outage in this process, shared by every thread.

    Django builds one cache object per thread (and runserver a thread per request), so the
    state lives here rather than on the cache object: one warning per outage per process,
    and one attempt per ``retry_after_s`` however many threads serve requests.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.down_until = 0.0
        self.down_since: float | None = None


_outages: dict[str, _Outage] = {}
_outages_lock = threading.Lock()


def _outage_for(location: str) -> _Outage:
    with _outages_lock:
        return _outages.setdefault(location, _Outage())


class FailoverRedisCache(RedisCache):
    """:class:`RedisCache` that falls back to a local in-process cache during an outage.

    ``OPTIONS`` takes, besides redis-py's connection options, ``RETRY_AFTER_S`` (seconds
    between attempts to reach Redis again once it failed; default 5).
    """

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        params = dict(params)
        options = dict(params.get("OPTIONS") or {})
        self.retry_after_s = float(options.pop("RETRY_AFTER_S", 5.0))
        params["OPTIONS"] = options
        super().__init__(server, params)
        # Room for every user's throttle counters (LocMemCache culls past MAX_ENTRIES). Its
        # storage is per process and name, so every thread's cache object shares it.
        local_params = {**params, "OPTIONS": {"MAX_ENTRIES": 100_000}}
        self.local = LocMemCache(f"failover:{server}", local_params)
        self._outage = _outage_for(str(server))

    # --- outage bookkeeping -------------------------------------------------------------

    def redis_down(self) -> bool:
        """True while Redis is being skipped after a failure."""
        return time.monotonic() < self._outage.down_until

    def _failed(self, exc: BaseException) -> None:
        outage = self._outage
        with outage.lock:
            first = outage.down_since is None
            if first:
                outage.down_since = time.monotonic()
            outage.down_until = time.monotonic() + self.retry_after_s
        if first:
            logger.warning(
                "Redis cache unreachable (%s); serving from the local in-process cache, "
                "retrying Redis every %.0f s",
                exc,
                self.retry_after_s,
            )

    def _answered(self) -> None:
        outage = self._outage
        if outage.down_since is None:
            return
        with outage.lock:
            since, outage.down_since = outage.down_since, None
        if since is not None:
            logger.warning(
                "Redis cache reachable again after %.0f s; the local cache is no longer used",
                time.monotonic() - since,
            )

    def _call(self, remote: Callable[[], T], local: Callable[[], T]) -> T:
        if self.redis_down():
            return local()
        try:
            value = remote()
        except UNREACHABLE as exc:
            self._failed(exc)
            return local()
        self._answered()
        return value

    # --- the cache API ------------------------------------------------------------------

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> bool:
        return self._call(
            lambda: super(FailoverRedisCache, self).add(key, value, timeout, version),
            lambda: self.local.add(key, value, timeout, version),
        )

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return self._call(
            lambda: super(FailoverRedisCache, self).get(key, default, version),
            lambda: self.local.get(key, default, version),
        )

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        self._call(
            lambda: super(FailoverRedisCache, self).set(key, value, timeout, version),
            lambda: self.local.set(key, value, timeout, version),
        )

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        return self._call(
            lambda: super(FailoverRedisCache, self).touch(key, timeout, version),
            lambda: self.local.touch(key, timeout, version),
        )

    def delete(self, key: Any, version: Any = None) -> bool:
        return self._call(
            lambda: super(FailoverRedisCache, self).delete(key, version),
            lambda: self.local.delete(key, version),
        )

    def get_many(self, keys: Any, version: Any = None) -> dict[Any, Any]:
        keys = list(keys)
        return self._call(
            lambda: super(FailoverRedisCache, self).get_many(keys, version),
            lambda: self.local.get_many(keys, version),
        )

    def has_key(self, key: Any, version: Any = None) -> bool:
        return self._call(
            lambda: super(FailoverRedisCache, self).has_key(key, version),
            lambda: self.local.has_key(key, version),
        )

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        return self._call(
            lambda: super(FailoverRedisCache, self).incr(key, delta, version),
            lambda: self.local.incr(key, delta, version),
        )

    def set_many(self, data: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> list[Any]:
        return self._call(
            lambda: super(FailoverRedisCache, self).set_many(data, timeout, version),
            lambda: self.local.set_many(data, timeout, version),
        )

    def delete_many(self, keys: Any, version: Any = None) -> None:
        keys = list(keys)
        self._call(
            lambda: super(FailoverRedisCache, self).delete_many(keys, version),
            lambda: self.local.delete_many(keys, version),
        )

    def clear(self) -> None:
        # The local copy is stale once Redis is back: clear both.
        self.local.clear()
        self._call(lambda: super(FailoverRedisCache, self).clear(), lambda: None)
