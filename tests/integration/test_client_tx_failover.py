"""A transacted consumer's transaction interrupted by a failover (compatibility K2), as ActiveMQ's
Java client 5.17 handles it: the broker is killed with SIGKILL and restarted on the same
store and port; the transaction is rollback-only, so its commit rolls it back and raises
TransactionRolledBackException, the broker redelivers the messages it had received, and by
the end every message is consumed exactly once (none left in flight on the new broker)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from test_failover import broker_on, failover_url

from dovecote.client import (
    Connection,
    ConnectionFactory,
    MessageConsumer,
    Session,
    TransactionRolledBackException,
)
from ports import free_port

TOTAL = 10


def fill_queue(port: int, name: str) -> None:
    conn = ConnectionFactory(f"tcp://127.0.0.1:{port}").create_connection()
    session = conn.create_session()
    producer = session.create_producer(session.queue(name))
    for i in range(TOTAL):
        producer.send(f"m{i}", persistent=True)
    conn.close()


def received_bodies(consumer: MessageConsumer, count: int) -> list[str]:
    bodies = []
    for _ in range(count):
        message = consumer.receive(20)
        assert message is not None, f"stalled after {bodies}"
        bodies.append(message.body)
    return bodies


def kill(process: subprocess.Popen[Any]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def wait_reconnected(conn: Connection, reconnects: int) -> None:
    deadline = time.monotonic() + 30
    while conn.reconnects < reconnects or not conn._connected.is_set():
        assert time.monotonic() < deadline, "the client did not fail over"
        time.sleep(0.02)


def consume_rest(session: Session, consumer: MessageConsumer, first: list[str]) -> list[str]:
    """After the rolled-back commit: everything again, committed, nothing more."""
    again = received_bodies(consumer, TOTAL)
    assert again[: len(first)] == first  # redelivered, in order, before the rest
    session.commit()
    assert consumer.receive(0.5) is None
    return again


def taken_then_killed(
    kind: str, workdir: Path, port: int, queue: str
) -> tuple[Connection, Session, MessageConsumer, list[str]]:
    """A transacted consumer on a failover URL that took 3 of 10 messages in a transaction
    still open, its broker then killed."""
    with broker_on(kind, workdir, port) as broker:
        fill_queue(port, queue)
        conn = ConnectionFactory(failover_url(port)).create_connection()
        conn.start()
        session = conn.create_session(transacted=True)
        consumer = session.create_consumer(session.queue(queue))
        taken = received_bodies(consumer, 3)
        kill(broker)
    return conn, session, consumer, taken


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_commit_after_the_broker_restarted_rolls_back_and_redelivers(
    tmp_path: Path, kind: str
) -> None:
    port = free_port()
    conn, session, consumer, taken = taken_then_killed(kind, tmp_path, port, "txfo.restarted")
    with broker_on(kind, tmp_path, port):
        wait_reconnected(conn, 1)
        with pytest.raises(TransactionRolledBackException):
            session.commit()
        again = consume_rest(session, consumer, taken)
        assert sorted(again) == sorted(f"m{i}" for i in range(TOTAL))
        conn.close()
        check_empty(port, "txfo.restarted")


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_commit_while_the_broker_is_down_rolls_back_at_once(tmp_path: Path, kind: str) -> None:
    port = free_port()
    conn, session, consumer, taken = taken_then_killed(kind, tmp_path, port, "txfo.down")
    started = time.monotonic()
    with pytest.raises(TransactionRolledBackException):
        session.commit()  # the transaction died with its broker: no need to wait for another
    assert time.monotonic() - started < 5
    with broker_on(kind, tmp_path, port):
        again = consume_rest(session, consumer, taken)
        assert sorted(again) == sorted(f"m{i}" for i in range(TOTAL))
        conn.close()
        check_empty(port, "txfo.down")


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_messages_received_after_the_failover_join_the_rolled_back_transaction(
    tmp_path: Path, kind: str
) -> None:
    """Received from the new broker in the interrupted unit of work: rolled back with it,
    handed out again by the client (the new broker counts them as delivered to it)."""
    port = free_port()
    conn, session, consumer, taken = taken_then_killed(kind, tmp_path, port, "txfo.joined")
    with broker_on(kind, tmp_path, port):
        wait_reconnected(conn, 1)
        after = received_bodies(consumer, 5)
        assert after[:3] == taken  # the new broker dispatches them anew
        with pytest.raises(TransactionRolledBackException):
            session.commit()
        again = received_bodies(consumer, TOTAL)
        assert sorted(again) == sorted(f"m{i}" for i in range(TOTAL))
        session.commit()
        assert consumer.receive(0.5) is None
        conn.close()
        check_empty(port, "txfo.joined")


def check_empty(port: int, name: str) -> None:
    """A fresh consumer finds nothing: no message left on the queue, none stuck in flight."""
    conn = ConnectionFactory(f"tcp://127.0.0.1:{port}").create_connection()
    conn.start()
    session = conn.create_session()
    consumer = session.create_consumer(session.queue(name))
    assert consumer.receive(1) is None
    conn.close()


def test_a_commit_racing_the_replay_rolls_back_and_loses_nothing(tmp_path: Path) -> None:
    """The commit goes the moment the client has a new broker, while its sessions and
    consumers are being replayed there (the race that once sent a COMMIT to a broker that
    never saw the BEGIN, and left a message in flight)."""
    port = free_port()
    rounds = 12 if os.environ.get("DOVECOTE_LONG") else 3
    consumed: list[str] = []
    with ExitStack() as brokers:
        broker = brokers.enter_context(broker_on("dovecote", tmp_path, port))
        conn = ConnectionFactory(failover_url(port)).create_connection()
        conn.start()
        session = conn.create_session(transacted=True)
        consumer = session.create_consumer(session.queue("txfo.race"))
        for round_ in range(rounds):
            fill_queue(port, "txfo.race")
            taken = received_bodies(consumer, 3)
            kill(broker)
            with ThreadPoolExecutor(1) as starting:
                # Restarted on another thread: the commit below goes as soon as it is back.
                new = starting.submit(brokers.enter_context, broker_on("dovecote", tmp_path, port))
                deadline = time.monotonic() + 60
                while conn.reconnects <= round_:
                    assert time.monotonic() < deadline, "the client did not fail over"
                    assert not new.done() or new.exception() is None
                    time.sleep(0.001)
                with pytest.raises(TransactionRolledBackException):
                    session.commit()
                broker = new.result(30)
            consumed += consume_rest(session, consumer, taken)
        conn.close()
        check_empty(port, "txfo.race")
    assert sorted(consumed) == sorted(f"m{i}" for i in range(TOTAL) for _ in range(rounds))


def test_the_java_client_does_the_same_against_dovecote(tmp_path: Path) -> None:
    """ActiveMQ's own client (tests/java/TxFailover.java) in the first test's scenario: its
    commit after the restart is rolled back, the messages come again, none twice."""
    from activemq import classpath, java_classes  # Debian's ActiveMQ jars

    classes = java_classes()
    port = free_port()
    store = tmp_path / "store"
    store.mkdir()
    with broker_on("dovecote", store, port) as first:
        fill_queue(port, "txfo.java")
        java = subprocess.Popen(
            ["java", "-cp", f"{classpath()}:{classes}", "TxFailover", failover_url(port),
             "txfo.java", str(TOTAL), "3"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            assert java.stdin is not None and java.stdout is not None
            taken: list[str] = []
            while len(taken) < 3:  # its logger may say something first
                line = java.stdout.readline()
                assert line, "the Java client ended early"
                taken += line.split()[1:] if line.startswith("taken: ") else []
            assert taken == ["m0", "m1", "m2"]
            kill(first)
            with broker_on("dovecote", store, port):
                java.stdin.write("restarted\n")
                java.stdin.flush()
                out, _ = java.communicate(timeout=120)
                check_empty(port, "txfo.java")
        finally:
            if java.poll() is None:
                java.kill()
                java.wait()
    lines = out.splitlines()
    assert "commit: rolled back" in lines, out
    received = [x.split()[1] for x in lines if x.startswith("received: ")]
    assert received[:3] == ["m0", "m1", "m2"], out
    assert sorted(received) == sorted(f"m{i}" for i in range(TOTAL)), out
    assert "left: none" in lines, out
