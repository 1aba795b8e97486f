"""The embedded broker's channel (``hetplanner/broker.py``) between concurrent senders and
consumers: a message is seen whole or not at all, an undecodable file is set aside instead
of stopping the consumer, and each message is taken by exactly one consumer."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from kombu import Connection

from hetplanner import broker
from hetplanner.settings.base import filesystem_broker_options

QUEUE = "jobs"


@pytest.fixture(name="options")
def options_fixture(tmp_path: Path) -> dict[str, Any]:
    return filesystem_broker_options(tmp_path / "broker")


@pytest.fixture(name="connect")
def connect_fixture(options: dict[str, Any]) -> Iterator[Any]:
    opened: list[Connection] = []

    def connect() -> Any:
        conn = Connection("hetplanner-fs://", transport_options=options)
        opened.append(conn)
        return conn.default_channel

    yield connect
    for conn in opened:
        conn.release()


def queue_files(options: dict[str, Any]) -> list[str]:
    return sorted(os.listdir(options["data_folder_in"]))


def test_its_url_selects_this_transport_and_a_redis_url_still_selects_redis() -> None:
    from hetplanner.celery import app

    assert app.connection_for_write("hetplanner-fs://").transport_cls == broker.SCHEME
    with Connection("hetplanner-fs://") as conn:
        assert type(conn.transport) is broker.Transport
    with Connection("redis://127.0.0.1:1/0") as conn:
        assert type(conn.transport).__module__ == "kombu.transport.redis"


def test_the_settings_select_this_transport_for_the_embedded_broker() -> None:
    from hetplanner.settings import base

    if base.REDIS_URL:
        pytest.skip("the embedded broker is used only without REDIS_URL")
    assert base.CELERY_BROKER_URL == "hetplanner-fs://"


def test_it_delivers_messages_in_the_order_they_were_sent(connect: Any) -> None:
    sender, consumer = connect(), connect()
    for i in range(5):
        sender._put(QUEUE, {"n": i})
    assert [consumer._get(QUEUE)["n"] for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(Empty):
        consumer._get(QUEUE)


def test_a_consumer_never_takes_a_message_that_is_still_being_written(
    connect: Any, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sender, consumer = connect(), connect()
    encoding, release = threading.Event(), threading.Event()
    real_dumps = broker.dumps

    def slow_dumps(payload: Any) -> str:
        # The sender has started writing this message and is descheduled here.
        encoding.set()
        assert release.wait(10)
        return str(real_dumps(payload))

    monkeypatch.setattr(broker, "dumps", slow_dumps)
    thread = threading.Thread(target=sender._put, args=(QUEUE, {"job": 7}))
    thread.start()
    try:
        assert encoding.wait(10)
        with pytest.raises(Empty):
            consumer._get(QUEUE)
        assert queue_files(options) == []
    finally:
        release.set()
        thread.join(10)
    assert consumer._get(QUEUE) == {"job": 7}


def test_an_undecodable_file_is_set_aside_and_the_next_message_is_delivered(
    connect: Any, options: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    sender, consumer = connect(), connect()
    # First in line, an empty file (what kombu's own sender leaves while it writes) and a
    # torn one.
    empty, torn = f"{0:020d}_empty.{QUEUE}.msg", f"{1:020d}_torn.{QUEUE}.msg"
    Path(options["data_folder_in"], empty).write_bytes(b"")
    Path(options["data_folder_in"], torn).write_bytes(b'{"body": "ab')
    sender._put(QUEUE, {"job": 1})
    with caplog.at_level(logging.ERROR, logger="hetplanner.broker"):
        assert consumer._get(QUEUE) == {"job": 1}
    assert sorted(os.listdir(options["rejected_folder"])) == [empty, torn]
    assert f"{empty} (0 bytes) in the queue folder is not a message" in caplog.text
    assert queue_files(options) == []


def test_two_consumers_take_each_message_exactly_once(
    connect: Any, options: dict[str, Any]
) -> None:
    sender = connect()
    for i in range(300):
        sender._put(QUEUE, {"n": i})
    taken: list[list[int]] = [[], []]
    start = threading.Barrier(2)

    def consume(into: list[int]) -> None:
        channel = connect()
        start.wait(10)
        while True:
            try:
                into.append(channel._get(QUEUE)["n"])
            except Empty:
                return

    threads = [threading.Thread(target=consume, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(taken[0] + taken[1]) == list(range(300))
    assert os.listdir(options["processed_folder"]) == []


def test_a_failed_send_leaves_nothing_staged_or_queued(
    connect: Any, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sender = connect()

    def no_space(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(broker.os, "replace", no_space)
    with pytest.raises(broker.ChannelError, match="Cannot add file"):
        sender._put(QUEUE, {"job": 1})
    assert os.listdir(options["staging_folder"]) == []
    assert queue_files(options) == []
