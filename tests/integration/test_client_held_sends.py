"""Sends in a transaction are written together (issue 32: one socket write per message was
two thirds of the Python client's time per send in the Spark writer): the client holds them
back and writes them with the next frame that is not held (the commit above all), or once
256 KiB wait. Against dovecote and ActiveMQ 5.17 alike: order kept across those writes, a
windowed producer not left waiting for acks of sends it holds, and a failure reported."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.client import ConnectionFactory, JMSError, Message
from dovecote.client.transport import HOLD_BYTES, TransportClosedError
from dovecote.core.destinations import queue

BODY = 1024


def _drain(url: str, name: str, count: int) -> list[str]:
    with ConnectionFactory(url).create_connection() as connection:
        connection.start()
        consumer = connection.create_session().create_consumer(queue(name))
        got = []
        for _ in range(count):
            message = consumer.receive(10)
            assert message is not None, f"{len(got)} of {count} received"
            got.append(str(message.body))
        assert consumer.receive(0.2) is None
        return got


def test_sends_in_a_transaction_share_writes_and_keep_their_order(broker_url: str) -> None:
    name = f"held-{uuid.uuid4().hex[:8]}"
    count = 3 * HOLD_BYTES // BODY  # written in a few writes of HOLD_BYTES, then the commit
    with ConnectionFactory(broker_url).create_connection() as connection:
        session = connection.create_session(transacted=True)
        producer = session.create_producer(queue(name))
        writes = connection.transport.writes
        for i in range(count):
            producer.send(Message(f"{i:06d}".ljust(BODY, ".")), persistent=True)
        session.commit()
        assert connection.transport.writes - writes < count // 50  # was one per send
    assert _drain(broker_url, name, count) == [f"{i:06d}".ljust(BODY, ".") for i in range(count)]


def test_a_windowed_producer_writes_what_it_holds_before_waiting_for_acks(
    broker_url: str,
) -> None:
    name = f"held-window-{uuid.uuid4().hex[:8]}"
    url = f"{broker_url}?jms.producerWindowSize=8192"
    with ConnectionFactory(url).create_connection() as connection:
        session = connection.create_session(transacted=True)
        producer = session.create_producer(queue(name))
        started = time.monotonic()
        for i in range(50):  # far past the window: its acks are needed to go on
            producer.send(Message(f"m{i}".ljust(BODY)), persistent=True)
        session.commit()
        assert time.monotonic() - started < 10
    assert len(_drain(broker_url, name, 50)) == 50


def test_held_sends_to_a_broker_gone_fail_the_commit(tmp_path: Path) -> None:
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with ConnectionFactory(url).create_connection() as connection:
            session = connection.create_session(transacted=True)
            producer = session.create_producer(queue("held-gone"))
            for i in range(20):
                producer.send(Message(f"m{i}"), persistent=True)  # held: nothing written
            broker.process.send_signal(signal.SIGKILL)
            broker.process.wait()
            with pytest.raises((JMSError, TransportClosedError)):
                session.commit()
