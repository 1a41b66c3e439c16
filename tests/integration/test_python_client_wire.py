"""What the Python client sends, command by command, where ActiveMQ's Java client 5.17 has a
rule for it (ActiveMQSession, ActiveMQMessageConsumer, ActiveMQConnection): RemoveInfo's
lastDeliveredSequenceId on close, DELIVERED acks that move the prefetch window, expired,
redelivered and transacted acks. Run against dovecote and a real ActiveMQ."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from dovecote.client import AckMode, Connection, ConnectionFactory, JMSError, Message
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t

DELIVERED, STANDARD, REDELIVERED, EXPIRED = 0, 2, 3, 6


@pytest.fixture
def name() -> str:
    return f"wire.{uuid.uuid4().hex[:10]}"


class Sent:
    """Every command the connection sends from now on (the real ones, still sent)."""

    def __init__(self, conn: Connection) -> None:
        self.commands: list[Structure] = []
        transport = conn.transport
        oneway, request = transport.oneway, transport.request

        def record_oneway(s: Structure, flush: bool = True) -> None:
            self.commands.append(s)
            oneway(s, flush)

        def record_request(s: Structure, timeout: float | None = None) -> Structure:
            self.commands.append(s)
            return request(s, timeout)

        transport.oneway = record_oneway  # type: ignore[method-assign]
        transport.request = record_request  # type: ignore[method-assign]

    def of(self, kind: int) -> list[Structure]:
        return [s for s in self.commands if s.type == kind]

    def acks(self) -> list[tuple[Any, ...]]:
        return [
            (a["ackType"], a["messageCount"], a["transactionId"] is not None)
            for a in self.of(t.MESSAGE_ACK)
        ]

    def clear(self) -> None:
        self.commands.clear()


def _sequence(message: Message | None) -> int:
    assert message is not None and message._dispatch is not None
    return int(message._dispatch["message"]["messageId"]["brokerSequenceId"])


def _started(url: str) -> Connection:
    conn = ConnectionFactory(url).create_connection()
    conn.start()
    return conn


def test_session_close_sends_one_remove_info_with_the_last_delivered(
    broker_url: str, name: str
) -> None:
    with _started(broker_url) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(5):
            producer.send(f"m{i}")
        first = session.create_consumer(q)
        session.create_consumer(session.queue(name + ".empty"))
        first.receive(5)
        last = _sequence(first.receive(5))
        sent = Sent(conn)
        session.close()
        removes = sent.of(t.REMOVE_INFO)
        assert [(r["objectId"].type, r["lastDeliveredSequenceId"]) for r in removes] == [
            (t.SESSION_ID, last)
        ]
        assert sent.acks() == []  # CLIENT mode: nothing acked on close


def test_connection_close_sends_the_max_over_its_sessions(broker_url: str, name: str) -> None:
    conn = _started(broker_url)
    one, two = conn.create_session(), conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    producer = one.create_producer()
    for i in range(3):
        producer.send(f"a{i}", one.queue(name + ".a"))
        producer.send(f"b{i}", one.queue(name + ".b"))
    a = one.create_consumer(one.queue(name + ".a"))
    b = two.create_consumer(two.queue(name + ".b"))
    sequences = [_sequence(a.receive(5)), _sequence(b.receive(5)), _sequence(b.receive(5))]
    conn.create_session()  # no consumer: below every sequence (-2), never the max
    sent = Sent(conn)
    conn.close()
    removes = sent.of(t.REMOVE_INFO)
    # First the advisory consumer's own (as Java's AdvisoryConsumer), then the connection's.
    assert [(r["objectId"].type, r["lastDeliveredSequenceId"]) for r in removes] == [
        (t.CONSUMER_ID, -2),
        (t.CONNECTION_ID, max(sequences)),
    ]


def test_connection_close_with_nothing_delivered_sends_minus_one(broker_url: str) -> None:
    conn = _started(broker_url)
    conn.create_session()
    sent = Sent(conn)
    conn.close()
    assert [r["lastDeliveredSequenceId"] for r in sent.of(t.REMOVE_INFO)] == [-2, -1]


def test_consumer_close_sends_its_own_last_delivered(broker_url: str, name: str) -> None:
    with _started(broker_url) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        q = session.queue(name)
        session.create_producer(q).send("m0")
        consumer = session.create_consumer(q)
        last = _sequence(consumer.receive(5))
        sent = Sent(conn)
        consumer.close()
        removes = sent.of(t.REMOVE_INFO)
        assert [(r["objectId"].type, r["lastDeliveredSequenceId"]) for r in removes] == [
            (t.CONSUMER_ID, last)
        ]


@pytest.mark.parametrize(("prefetch", "every"), [(1, 1), (10, 5)])
def test_delivered_acks_every_half_prefetch_then_one_standard_ack(
    broker_url: str, name: str, prefetch: int, every: int
) -> None:
    with _started(f"{broker_url}?jms.prefetchPolicy.queuePrefetch={prefetch}") as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(10):
            producer.send(f"m{i}")
        consumer = session.create_consumer(q)
        sent = Sent(conn)
        assert all(consumer.receive(5) is not None for _ in range(10))
        assert sent.acks() == [(DELIVERED, every, False)] * (10 // every)
        sent.clear()
        session.acknowledge()
        acks = sent.of(t.MESSAGE_ACK)
        assert [(a["ackType"], a["messageCount"]) for a in acks] == [(STANDARD, 10)]
        assert acks[0]["firstMessageId"]["producerSequenceId"] == 1
        assert acks[0]["lastMessageId"]["producerSequenceId"] == 10


def test_transacted_consumption_acks_in_the_transaction(broker_url: str, name: str) -> None:
    with _started(f"{broker_url}?jms.prefetchPolicy.queuePrefetch=2") as conn:
        session = conn.create_session(transacted=True)
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(2):
            producer.send(f"m{i}")
        session.commit()
        consumer = session.create_consumer(q)
        sent = Sent(conn)
        assert consumer.receive(5) is not None and consumer.receive(5) is not None
        session.commit()
        names = {0: "begin", 2: "commit"}
        kinds = [
            names[c["type"]] if c.type == t.TRANSACTION_INFO else c["ackType"]
            for c in sent.commands
            if c.type in (t.TRANSACTION_INFO, t.MESSAGE_ACK)
        ]
        # Prefetch 2: a DELIVERED ack every message (half the window), then at commit one
        # standard ack of both, all in the transaction.
        assert kinds == ["begin", DELIVERED, DELIVERED, STANDARD, "commit"]
        assert sent.acks() == [(DELIVERED, 1, True), (DELIVERED, 1, True), (STANDARD, 2, True)]


def test_a_message_expired_in_the_buffer_is_acked_expired(broker_url: str, name: str) -> None:
    with _started(broker_url) as conn:
        session = conn.create_session()
        q = session.queue(name)
        consumer = session.create_consumer(q)
        session.create_producer(q).send("short", time_to_live=300)
        deadline = time.monotonic() + 10
        while len(consumer._buffer) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.4)
        sent = Sent(conn)
        assert consumer.receive(0.3) is None
        assert sent.acks() == [(EXPIRED, 1, False)]


def test_recover_sends_redelivered_acks_from_the_second_time(broker_url: str, name: str) -> None:
    options = "jms.redeliveryPolicy.initialRedeliveryDelay=0&jms.redeliveryPolicy.redeliveryDelay=0"
    with _started(f"{broker_url}?{options}") as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        q = session.queue(name)
        session.create_producer(q).send("m0")
        consumer = session.create_consumer(q, prefetch=10)
        sent = Sent(conn)
        for _ in range(3):
            assert consumer.receive(5) is not None
            session.recover()
        # The first recover redelivers locally; later ones tell the broker (REDELIVERED).
        assert sent.acks() == [(REDELIVERED, 1, False)] * 2


def test_group_fields_not_properties_on_the_wire(
    broker_url: str, name: str, tmp_path: Path
) -> None:
    with _started(broker_url) as conn:
        session = conn.create_session()
        q = session.queue(name)
        sent = Sent(conn)
        session.create_producer(q).send(
            Message("g", properties={"JMSXGroupID": "orders", "JMSXGroupSeq": 3, "k": 1})
        )
        message = next(s for s in sent.commands if s.type == t.TEXT_MESSAGE)
        assert (message["groupID"], message["groupSequence"]) == ("orders", 3)
        got = session.create_consumer(q).receive(5)
        assert got is not None
        assert got.properties == {"JMSXGroupID": "orders", "JMSXGroupSeq": 3, "k": 1}


def test_producer_close_sends_its_remove_info(broker_url: str, name: str) -> None:
    with _started(broker_url) as conn:
        producer = conn.create_session().create_producer(conn.create_session().queue(name))
        sent = Sent(conn)
        producer.close()
        removes = sent.of(t.REMOVE_INFO)
        # RemoveInfo's own default (LAST_DELIVERED_UNKNOWN): a producer delivers nothing.
        assert [(r["objectId"].type, r["lastDeliveredSequenceId"]) for r in removes] == [
            (t.PRODUCER_ID, -2)
        ]
        with pytest.raises(JMSError, match="closed"):
            producer.send("late")


def test_browsing_acks_as_the_session_does_and_commits_a_transaction(
    broker_url: str, name: str
) -> None:
    """As the Java QueueBrowser: its consumer acks each message it reads (AUTO: a standard
    ack each, which the broker ignores for browsers), and a transacted session's browse
    ends with a commit; the messages stay on the queue."""
    with _started(broker_url) as conn:
        session = conn.create_session()
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(2):
            producer.send(f"m{i}")
        sent = Sent(conn)
        assert [m.body for m in session.browse(q)] == ["m0", "m1"]
        assert sent.acks() == [(STANDARD, 1, False)] * 2
        tx = conn.create_session(transacted=True)
        sent.clear()
        assert [m.body for m in tx.browse(q)] == ["m0", "m1"]
        kinds = [c["type"] for c in sent.of(t.TRANSACTION_INFO)]
        assert kinds == [0, 2]  # begun by the first message read, committed at the end
        assert [m.body for m in session.browse(q)] == ["m0", "m1"]
