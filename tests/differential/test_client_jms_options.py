"""The connection factory's ``jms.*`` options the client acts on as the Java client does,
side by side: each scenario returns what the application observed; the test compares it
across ActiveMQ and dovecote (docs/client-options.md)."""

from __future__ import annotations

import re
import time

from differ import Target
from dovecote.client import AckMode, ConnectionFactory


def client_id_from_the_prefix(target: Target) -> dict[str, object]:
    """jms.clientIDPrefix: two connections of one factory get IdGenerator's ids, in sequence;
    the broker takes both (a durable subscription still needs a client id set by hand)."""
    factory = ConnectionFactory(target.url + "?jms.clientIDPrefix=svc")
    with factory.create_connection() as one, factory.create_connection() as two:
        one.start()
        session = one.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send("hi")
        got = session.create_consumer(queue).receive(5)
        ids = [one.client_id, two.client_id]
        return {
            "shape": [re.sub(r"-\d+-\d+-\d+:", "-P-T-N:", i) for i in ids],
            "same_generator": ids[0].rsplit(":", 1)[0] == ids[1].rsplit(":", 1)[0],
            "got": got.body if got else None,
        }


def test_client_id_from_the_prefix(differ) -> None:
    differ(
        client_id_from_the_prefix,
        {"shape": ["svc-P-T-N:1", "svc-P-T-N:2"], "same_generator": True, "got": "hi"},
    )


def exclusive_consumer_from_the_url(target: Target) -> dict[str, object]:
    """jms.exclusiveConsumer=true: the queue's first consumer takes every message, the
    second (prefetch 1 both) none; a destination saying consumer.exclusive=false for both
    shares them again."""
    url = target.url + "?jms.exclusiveConsumer=true&jms.prefetchPolicy.all=1"
    counts = {}
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        for label, suffix in (("exclusive", ""), ("overridden", "?consumer.exclusive=false")):
            name = f"{target.name}.{label}"
            first = session.create_consumer(session.queue(name + suffix))
            second = session.create_consumer(session.queue(name + suffix))
            producer = session.create_producer(session.queue(name))
            for i in range(6):
                producer.send(f"m{i}")
            got = [0, 0]
            for index, consumer in enumerate((second, first)):
                while consumer.receive(1.0) is not None:
                    got[index] += 1
            counts[label] = {"total": sum(got), "second_got_some": got[0] > 0}
    return counts


def test_exclusive_consumer_from_the_url(differ) -> None:
    differ(
        exclusive_consumer_from_the_url,
        {
            "exclusive": {"total": 6, "second_got_some": False},
            "overridden": {"total": 6, "second_got_some": True},
        },
    )


def timestamps_disabled(target: Target) -> dict[str, object]:
    """jms.disableTimeStampsByDefault=true: the receiver sees timestamp 0 and no expiration,
    though the message was sent with a time to live."""
    with ConnectionFactory(
        target.url + "?jms.disableTimeStampsByDefault=true"
    ).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send("untimed", time_to_live=60_000)
        got = session.create_consumer(queue).receive(5)
        return {"got": got.body if got else None,
                "header": (got.timestamp, got.expiration) if got else None}  # fmt: skip


def test_timestamps_disabled(differ) -> None:
    differ(timestamps_disabled, {"got": "untimed", "header": (0, 0)})


def expired_in_the_buffer_handed_out(target: Target) -> dict[str, object]:
    """jms.consumerExpiryCheckEnabled=false: a message that expired while prefetched is
    still handed to the application (and, acked as consumed, gone from the queue)."""
    url = target.url + "?jms.consumerExpiryCheckEnabled=false"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        before = time.time()
        session.create_producer(queue).send("short", time_to_live=300)
        deadline = time.monotonic() + 10
        while len(consumer._buffer) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        while time.time() < before + 0.5:  # past its expiration by the client's clock
            time.sleep(0.02)
        got = consumer.receive(1)
        consumer.close()
        left = session.create_consumer(queue).receive(0.5)
        return {"got": got.body if got else None, "left": left.body if left else None}


def test_expired_in_the_buffer_handed_out(differ) -> None:
    differ(expired_in_the_buffer_handed_out, {"got": "short", "left": None})


def acks_wait_for_the_broker(target: Target) -> dict[str, object]:
    """jms.sendAcksAsync=false: once receive() has returned (AUTO), the broker has the ack,
    so a browser at once finds the queue without the message. (One-way acks usually get
    there first too: the wire test in test_python_client_jms_options.py is the one that
    shows the difference; this one shows both brokers answer the acks alike.)"""
    url = target.url + "?jms.sendAcksAsync=false"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session(ack_mode=AckMode.AUTO_ACKNOWLEDGE)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        producer.send("a")
        producer.send("b")
        consumer = session.create_consumer(session.queue(target.name + "?consumer.prefetchSize=1"))
        got = consumer.receive(5)
        consumer.close()
        browsed = [m.body for m in session.browse(queue)]
        return {"got": got.body if got else None, "browsed": browsed}


def test_acks_wait_for_the_broker(differ) -> None:
    differ(acks_wait_for_the_broker, {"got": "a", "browsed": ["b"]})
