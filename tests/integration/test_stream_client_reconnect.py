"""A StreamClient whose broker is gone keeps trying to reconnect until the broker is back
(the Spark source's plans and commits ride over a broker restart). A reconnect that failed
once (the broker still down) left the client on its closed session: every later try failed
with "The Session is closed" until the client gave up, though the broker was back."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.client.streams import StreamClient
from dovecote.core.destinations import queue
from ports import free_port


def test_a_stream_client_reconnects_after_a_failed_reconnect(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "dovecote.client.streams")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    name = queue("reconnecting")
    with running_broker(workdir=tmp_path, openwire_port=port):
        with ConnectionFactory(url).create_connection() as connection:
            connection.create_session().create_producer(name).send(Message("kept"))
        stream = StreamClient(url, name)
        stream.retry_for_s = 20
    planned: list[int] = []
    asking = threading.Thread(target=lambda: planned.append(stream.plan(after=0).count))
    asking.start()
    deadline = time.monotonic() + 10
    while caplog.text.count("stream request failed") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # tried, and failed to reconnect, while the broker is down
    with running_broker(workdir=tmp_path, openwire_port=port):
        asking.join(30)
        assert planned == [1]
        assert "Session is closed" not in caplog.text
    stream.close()
