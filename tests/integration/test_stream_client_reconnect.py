"""A StreamClient whose broker is gone keeps trying to reconnect until the broker is back
(the Spark source's plans, reads and commits ride over a broker restart). A reconnect that
failed once (the broker still down) left the client on its closed session: every later try
failed with "The Session is closed" until the client gave up, though the broker was back."""

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

pyspark = pytest.importorskip("pyspark")
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402

from dovecote.spark.blocks import record_batch  # noqa: E402
from dovecote.spark.source import SCHEMA  # noqa: E402

ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")


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


def test_blocks_handed_out_as_they_come_go_on_after_a_broker_restart(tmp_path: Path) -> None:
    """iter_blocks yields each block as it arrives; when the broker goes away in the middle
    of a range, the reconnected read goes on after the last message handed out: every
    message once, none twice."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    name = queue("blocks-restart")
    with running_broker(workdir=tmp_path, openwire_port=port) as broker:
        with ConnectionFactory(url).create_connection() as connection:
            session = connection.create_session(transacted=True)
            producer = session.create_producer(name)
            for i in range(300):
                producer.send(Message(f"{i:04d}".ljust(1000)), persistent=True)
            session.commit()
        stream = StreamClient(url, name)
        end = stream.plan(after=0).end
        blocks = stream.iter_blocks(0, end, block_bytes=20_000)  # about 20 blocks
        got = [record_batch(next(blocks), ARROW_SCHEMA)]
        broker.process.kill()
        broker.process.wait()
    with running_broker(workdir=tmp_path, openwire_port=port):
        got += [record_batch(block, ARROW_SCHEMA) for block in blocks]
        stream.close()
    assert len(got) > 2
    texts = [text for batch in got for text in batch.column("text").to_pylist()]
    assert texts == [f"{i:04d}".ljust(1000) for i in range(300)]
