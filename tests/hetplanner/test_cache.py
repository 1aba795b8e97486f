"""The failover Redis cache (``hetplanner/cache.py``) against a throwaway Redis server that
is stopped and started again: it serves from process memory during the outage, tries Redis
again after ``RETRY_AFTER_S``, and logs the outage's start and end once each."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest
from redis import Redis

from hetplanner.cache import FailoverRedisCache
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A ``redis-server`` child on ``port`` without persistence."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = Redis(port=self.port, socket_connect_timeout=0.5)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except Exception:
                return False

        wait_for(answers, timeout_s=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(unused_port())
    server.start()
    yield server
    server.stop()


def make_cache(port: int, retry_after_s: float) -> FailoverRedisCache:
    return FailoverRedisCache(
        f"redis://127.0.0.1:{port}/0",
        {
            "OPTIONS": {
                "socket_connect_timeout": 0.5,
                "socket_timeout": 1.0,
                "RETRY_AFTER_S": retry_after_s,
            }
        },
    )


def test_it_serves_locally_while_redis_is_down_and_returns_to_redis_after_it_restarts(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    cache = make_cache(redis_server.port, retry_after_s=0.5)
    cache.set("shared", 1)
    assert Redis(port=redis_server.port).exists(cache.make_and_validate_key("shared"))

    redis_server.stop()
    with caplog.at_level(logging.WARNING, logger="hetplanner.cache"):
        assert cache.get("shared") is None  # Redis' copy is out of reach
        cache.set("counter", 5)
        assert cache.incr("counter") == 6
        assert cache.get_many(["counter"]) == {"counter": 6}
        assert cache.redis_down()
    assert [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]

    redis_server.start()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hetplanner.cache"):
        wait_for(lambda: not cache.redis_down(), timeout_s=30)
        cache.set("after", 2)
    assert Redis(port=redis_server.port).get(cache.make_and_validate_key("after")) is not None
    assert any("reachable again" in r.getMessage() for r in caplog.records)


def test_after_a_failure_redis_is_not_asked_again_until_the_retry_interval(
    redis_server: RedisServer,
) -> None:
    cache = make_cache(redis_server.port, retry_after_s=3600)
    redis_server.stop()
    cache.set("k", 1)  # fails over, Redis is now skipped for an hour
    redis_server.start()
    cache.set("k", 2)
    assert cache.get("k") == 2  # from the local cache
    assert not Redis(port=redis_server.port).exists(cache.make_and_validate_key("k"))


def test_an_outage_is_shared_by_every_thread_of_the_process_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Django builds one cache object per thread (runserver: a thread per request).
    port = unused_port()
    caches: list[FailoverRedisCache] = []

    def request(n: int) -> None:
        cache = make_cache(port, retry_after_s=3600)
        caches.append(cache)
        cache.incr("hits") if cache.get("hits") is not None else cache.add("hits", 0)

    with caplog.at_level(logging.WARNING, logger="hetplanner.cache"):
        for n in range(5):
            thread = threading.Thread(target=request, args=(n,))
            thread.start()
            thread.join()
    assert len([r for r in caplog.records if "unreachable" in r.getMessage()]) == 1
    assert all(cache.redis_down() for cache in caches)
    assert caches[-1].get("hits") == 4  # one count per thread, in the shared local cache
