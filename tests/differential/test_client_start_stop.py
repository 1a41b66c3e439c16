"""Connection.start() and stop() gate delivery: a connection never started delivers
nothing (its consumers' prefetched messages wait), a stopped one calls no listener."""

from __future__ import annotations

import time

from clientkit import connected, until

from differ import Target
from dovecote.client import Message


def never_started_delivers_nothing(target: Target) -> tuple[object, object, object]:
    with connected(target, start=False) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        session.create_producer(queue).send("m0")
        assert until(lambda: len(consumer._buffer) == 1)  # prefetched all the same
        before = consumer.receive(0.5)
        conn.start()
        after = consumer.receive(5)
        return before, after and after.body, [m.body for m in session.browse(queue)]


def test_never_started_delivers_nothing(differ) -> None:
    differ(never_started_delivers_nothing, (None, "m0", []))


def stopped_connection_calls_no_listener(target: Target) -> list[object]:
    received: list[object] = []
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_consumer(queue).set_message_listener(lambda m: received.append(m.body))
        producer = conn.create_session().create_producer(queue)
        producer.send("m0")
        assert until(lambda: len(received) == 1)
        conn.stop()
        producer.send("m1")
        time.sleep(0.5)  # long enough for a listener call that should not happen
        while_stopped = list(received)
        conn.start()
        until(lambda: len(received) == 2)
        return [while_stopped, list(received)]


def test_stopped_connection_calls_no_listener(differ) -> None:
    differ(stopped_connection_calls_no_listener, [["m0"], ["m0", "m1"]])


def browser_on_a_stopped_connection_sees_nothing(target: Target) -> tuple[int, int]:
    with connected(target, start=False) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send(Message("m0"))
        stopped = len(list(session.browse(queue)))
        conn.start()
        return stopped, len(list(session.browse(queue)))


def test_browser_on_a_stopped_connection_sees_nothing(differ) -> None:
    differ(browser_on_a_stopped_connection_sees_nothing, (0, 1))
