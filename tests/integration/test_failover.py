"""The client's failover transport across a broker killed with SIGKILL and restarted on the
same store and port (SPEC K2, N2's client side): no persistent message lost, none handed to
the application twice, and an open transaction in doubt is rolled back with a clear error."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from activemq import running_activemq
from brokers import running_broker
from dovecote.client import ConnectionFactory, JMSError, Message
from ports import free_port


@contextmanager
def broker_on(kind: str, workdir: Path, port: int) -> Iterator[subprocess.Popen[Any]]:
    """dovecote or ActiveMQ on a fixed port and a store that outlives it."""
    if kind == "dovecote":
        with running_broker(workdir=workdir, openwire_port=port) as broker:
            yield broker.process
    else:
        with running_activemq(base=workdir, openwire_port=port) as amq:
            yield amq.process


def failover_url(port: int) -> str:
    return (
        f"failover:(tcp://127.0.0.1:{port})?randomize=false&initialReconnectDelay=50"
        "&maxReconnectDelay=500&timeout=90000"
    )


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_failover_across_a_killed_broker_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, kind: str
) -> None:
    port = free_port()
    total = 300
    with broker_on(kind, tmp_path, port) as first:
        conn = ConnectionFactory(failover_url(port)).create_connection()
        session = conn.create_session()
        q = session.queue("failover.orders")
        producer = session.create_producer(q)
        consumer = conn.create_session().create_consumer(q, prefetch=10)
        sent: list[int] = []
        errors: list[Exception] = []

        def produce() -> None:
            try:
                for i in range(total):
                    producer.send(Message(f"m{i}", properties={"n": i}), persistent=True)
                    sent.append(i)
            except Exception as exc:  # reported by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=produce)
        thread.start()
        received: list[int] = []
        while len(received) < 50:
            message = consumer.receive(10)
            assert message is not None
            received.append(message.properties["n"])
        first.send_signal(signal.SIGKILL)
        first.wait()
        with broker_on(kind, tmp_path, port):
            while len(set(received)) < total:
                message = consumer.receive(30)
                assert message is not None, (
                    f"stalled at {len(received)} of {total}: sent {len(sent)}, "
                    f"reconnects {conn.reconnects}, failure {conn.failure}, errors {errors}"
                )
                received.append(message.properties["n"])
            thread.join(30)
            assert errors == []
            assert sorted(received) == list(range(total))  # all of them, each exactly once
            assert conn.reconnects == 1
            conn.close()


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_a_transaction_open_at_failover_is_rolled_back_with_an_error(
    tmp_path: Path, kind: str
) -> None:
    port = free_port()
    with broker_on(kind, tmp_path, port) as first:
        conn = ConnectionFactory(failover_url(port)).create_connection()
        session = conn.create_session(transacted=True)
        q = session.queue("failover.tx")
        producer = session.create_producer(q)
        producer.send("in doubt")
        first.send_signal(signal.SIGKILL)
        first.wait()
        with broker_on(kind, tmp_path, port):
            producer.send("after")  # waits for the reconnect, then goes on
            with pytest.raises(JMSError, match="TransactionRolledBackException"):
                session.commit()
            producer.send("again")
            session.commit()
            consumer = conn.create_session().create_consumer(q)
            got = consumer.receive(5)
            assert got is not None and got.body == "again"
            assert consumer.receive(0.5) is None
            conn.close()
