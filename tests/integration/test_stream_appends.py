"""The broker's Append stream request (many messages in one frame, docs/streams.md) over the
Python client and a real broker process: the messages join the sender's transaction (nothing
before its commit, nothing after a rollback or a client killed with kill -9), keep their
order, bodies and properties, survive a broker restart, and a block the broker cannot read or
a destination the sender may not write to is refused with nothing taken."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.broker.security.users import hash_password
from dovecote.client import ConnectionFactory, JMSError, Session
from dovecote.client.streams import PERSISTENT, StreamAppender, StreamClient, is_dovecote
from dovecote.core.destinations import Destination, queue
from dovecote.core.message import BodyType, Message
from dovecote.core.stream_blocks import encode_block


def block(first: int, count: int, tag: str = "m") -> bytes:
    """Messages ``tag{first}``... as an Append block (core's block writer, no pyarrow), with
    message ids as a client's producer gives them (its id, then the producer's sequence)."""
    messages = [
        Message(
            f"ID:append-{tag}:1:1:{i + 1}",
            queue("ignored"),
            f"{tag}{i}".encode(),
            BodyType.TEXT,
            priority=4 + i % 3,
            timestamp=1_700_000_000_000,
            correlation_id=f"c{i}",
            properties={"n": str(i)},
        )
        for i in range(first, first + count)
    ]
    return encode_block(messages)


@contextmanager
def appending(url: str, name: Destination) -> Iterator[tuple[Session, StreamAppender]]:
    """A transacted session on a connection of its own, and Append requests to ``name`` in
    its transactions."""
    with ConnectionFactory(url).create_connection() as connection:
        session = connection.create_session(transacted=True)
        yield session, StreamAppender(session, name)


def held(url: str, name: Destination) -> list[tuple[object, ...]]:
    with StreamClient(url, name) as stream:
        return [
            (
                m.body,
                m.priority,
                m.correlation_id,
                m.properties.get("n"),
                m.properties.get(PERSISTENT),
            )
            for m in stream.read(0, 2**62)
        ]


def test_appended_messages_arrive_at_commit_in_order_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    name = queue(f"append.{uuid.uuid4().hex[:8]}")
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with appending(url, name) as (session, appender):
            assert is_dovecote(session.connection)
            blocks = [block(0, 300), block(300, 200)]
            for each in blocks:
                appender.append(each)
            assert appender.finish() == 500
            assert held(url, name) == []  # nothing before the commit
            session.commit()
            appender.close()
        got = held(url, name)
        assert [g[0] for g in got] == [f"m{i}" for i in range(500)]
        assert got[7] == ("m7", 4 + 7 % 3, "c7", "7", True)
    # The journal keeps each block as the request brought it (store/journal/FORMAT.md, B).
    journal = b"".join(path.read_bytes() for path in tmp_path.rglob("db-*.log"))
    assert all(each in journal for each in blocks)
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        assert [g[0] for g in held(url, name)] == [f"m{i}" for i in range(500)]


def test_a_rollback_leaves_nothing_and_the_transaction_goes_on(tmp_path: Path) -> None:
    name = queue(f"append.{uuid.uuid4().hex[:8]}")
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with appending(url, name) as (session, appender):
            appender.append(block(0, 50))
            appender.finish()
            session.rollback()
            assert held(url, name) == []
            appender.append(block(50, 5))  # the next transaction
            appender.finish()
            session.commit()
        assert [g[0] for g in held(url, name)] == [f"m{i}" for i in range(50, 55)]


def test_a_block_that_does_not_read_is_refused_and_takes_nothing(tmp_path: Path) -> None:
    name = queue(f"append.{uuid.uuid4().hex[:8]}")
    good = block(0, 10)
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with appending(url, name) as (session, appender):
            for bad, why in (
                (good[: len(good) // 2], "cut short"),
                (b"nonsense", "not a stream block"),
                (good.replace(b"ID:append-m:1:1:3", b"ID:append-m:1:1:4"), "repeats a message id"),
            ):
                appender.append(bad)
                with pytest.raises(JMSError, match=why):
                    appender.finish()
            appender.append(good)
            assert appender.finish() == 10
            session.commit()
        assert len(held(url, name)) == 10  # only the good block


def test_a_destination_the_sender_may_not_write_to_is_refused(tmp_path: Path) -> None:
    config = (
        '[security]\nallow_anonymous = false\n[[security.users]]\nname = "app"\n'
        f'password = "{hash_password("pw")}"\ngroups = ["apps"]\n'
    )
    for kind, pattern in (("queue", "ok.>"), ("queue", "dovecote.Stream.>"),
                          ("topic", "ActiveMQ.Advisory.>")):  # fmt: skip
        config += (
            f'[[security.authorization]]\n{kind} = "{pattern}"\n'
            'read = ["apps"]\nwrite = ["apps"]\nadmin = ["apps"]\n'
        )
    config += '[security.temp_destinations]\nread = ["apps"]\nwrite = ["apps"]\nadmin = ["apps"]\n'
    with running_broker(config, workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with ConnectionFactory(url).create_connection("app", "pw") as connection:
            session = connection.create_session(transacted=True)
            refused = StreamAppender(session, queue("secret.orders"))
            refused.append(block(0, 3))
            with pytest.raises(JMSError, match=r"secret\.orders"):
                refused.finish()
            allowed = StreamAppender(session, queue("ok.orders"))
            allowed.append(block(0, 3))
            assert allowed.finish() == 3
            session.commit()


APPEND_THEN_WAIT = """
import sys, time
from dovecote.client import ConnectionFactory
from dovecote.client.streams import StreamAppender
from dovecote.core.destinations import queue
sys.path[:0] = [sys.argv[3], sys.argv[3] + "/.."]
from test_stream_appends import block
connection = ConnectionFactory(sys.argv[1]).create_connection()
session = connection.create_session(transacted=True)
appender = StreamAppender(session, queue(sys.argv[2]))
appender.append(block(0, 1000))
appender.finish()
print("appended", flush=True)
time.sleep(600)
"""


def test_a_client_killed_before_its_commit_leaves_nothing(tmp_path: Path) -> None:
    name = f"append.{uuid.uuid4().hex[:8]}"
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        here = str(Path(__file__).parent)
        child = subprocess.Popen([sys.executable, "-c", APPEND_THEN_WAIT, url, name, here],
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "appended"
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
        assert held(url, queue(name)) == []
    with running_broker(workdir=tmp_path) as broker:
        assert held(f"tcp://127.0.0.1:{broker.openwire_port}", queue(name)) == []


def test_the_spark_writer_appends_string_properties_and_sends_typed_ones(tmp_path: Path) -> None:
    """The Spark writer outside Spark: string property columns (one named but absent) go
    as Append blocks; an integer property column goes a send per row, its type kept."""
    pa = pytest.importorskip("pyarrow")
    from dovecote.spark.source import TransactionalWriter

    rows = range(30)
    batch = pa.record_batch(
        {"text": [f"t{i}" for i in rows], "region": [f"r{i}" for i in rows], "n": list(rows)}
    )
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        for name, columns in (("strings", "region,absent"), ("typed", "n")):
            options = {"url": url, "destination": name, "propertyColumns": columns}
            assert TransactionalWriter(options).write(iter([batch])).count == 30
        with StreamClient(url, queue("strings")) as stream:
            got = list(stream.read(0, 2**62))
            assert [(m.body, m.properties["region"]) for m in got] == [
                (f"t{i}", f"r{i}") for i in range(30)
            ]
            assert all(m.message_id.split(":")[-3] == "0" for m in got)  # Append's ids
        with StreamClient(url, queue("typed")) as stream:
            assert [m.properties["n"] for m in stream.read(0, 2**62)] == list(range(30))


def test_a_bulk_load_consumed_before_the_index_caught_up_never_reaches_it(
    tmp_path: Path,
) -> None:
    """As a Spark write and stream read go: 12,000 messages appended in one transaction by a
    connection that then closes (its temporary reply queue removed), then all removed by one
    stream Commit. The journal's index held the bulk load back, and its adds and removals
    cancel out: once the broker has stopped (the index then up to date), its file has not
    grown by the pages their entries take when applied."""
    name = queue(f"append.{uuid.uuid4().hex[:8]}")
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with appending(url, name) as (session, appender):
            for first in range(0, 12_000, 3_000):
                appender.append(block(first, 3_000))
            assert appender.finish() == 12_000
            session.commit()
            appender.close()
        (index,) = tmp_path.rglob("index/data.mdb")
        before = index.stat().st_size
        with StreamClient(url, name) as stream:
            plan = stream.plan(after=0)
            assert plan.count == 12_000
            assert stream.commit(plan.end) == 12_000
    grown = index.stat().st_size - before
    assert grown < 64 * 4096, f"the index grew by {grown} bytes"
