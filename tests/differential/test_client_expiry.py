"""A message that expires in the client's buffer: never handed out, acked as expired (the
broker drops it rather than redelivering it)."""

from __future__ import annotations

import time

from clientkit import connected, drain, until

from differ import Target
from dovecote.client import AckMode


def expired_in_the_buffer_is_not_delivered(target: Target) -> tuple[list[object], list[object]]:
    with connected(target) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        producer.send("short", time_to_live=600)
        producer.send("long")
        assert until(lambda: len(consumer._buffer) == 2)  # both prefetched, neither expired
        time.sleep(0.8)  # the first expires while it waits in the buffer
        bodies = [m.body for m in drain(consumer)]
        session.acknowledge()
        consumer.close()
        left = [m.body for m in drain(session.create_consumer(queue))]
        return bodies, left


def test_expired_in_the_buffer_is_not_delivered(differ) -> None:
    differ(expired_in_the_buffer_is_not_delivered, (["long"], []))


def expired_before_a_listener_gets_it(target: Target) -> tuple[list[object], list[object]]:
    """Prefetched on a stopped connection, expired before start: the listener never sees it."""
    received: list[object] = []
    with connected(target, start=False) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        producer.send("short", time_to_live=600)
        producer.send("long")
        assert until(lambda: len(consumer._buffer) == 2)
        consumer.set_message_listener(lambda m: received.append(m.body))
        time.sleep(0.8)
        conn.start()
        until(lambda: len(received) >= 1)
        time.sleep(0.2)
        consumer.close()
        left = [m.body for m in drain(conn.create_session().create_consumer(queue))]
        return list(received), left


def test_expired_before_a_listener_gets_it(differ) -> None:
    differ(expired_before_a_listener_gets_it, (["long"], []))
