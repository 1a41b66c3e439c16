"""Message listeners in every kind of session: what each received, and what its session's
acknowledgement left on the queue for a later consumer."""

from __future__ import annotations

import threading

import pytest
from clientkit import connected, drain, seen, until

from differ import Target
from dovecote.client import AckMode, Message


def _listen(target: Target, mode: AckMode) -> tuple[list[object], list[tuple[object, bool, int]]]:
    received: list[object] = []
    done = threading.Event()
    with connected(target) as conn:
        session = conn.create_session(transacted=mode is AckMode.SESSION_TRANSACTED, ack_mode=mode)
        queue = session.queue(target.name)
        producer = conn.create_session().create_producer(queue)
        for i in range(3):
            producer.send(f"m{i}")
        consumer = session.create_consumer(queue)

        def on_message(message: Message) -> None:
            received.append(message.body)
            if mode is AckMode.CLIENT_ACKNOWLEDGE and message.body == "m1":
                message.acknowledge()  # m0 and m1: everything delivered so far
            if mode is AckMode.INDIVIDUAL_ACKNOWLEDGE and message.body == "m1":
                message.acknowledge()  # m1 only
            if mode is AckMode.SESSION_TRANSACTED and message.body == "m1":
                session.commit()
            if len(received) == 3:
                done.set()

        consumer.set_message_listener(on_message)
        assert done.wait(10)
        session.close()  # a transacted one rolls back what it had not committed
        after = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        left = drain(after.create_consumer(queue))
        after.acknowledge()
        return list(received), seen(left)


ALL = ["m0", "m1", "m2"]


@pytest.mark.parametrize(
    ("mode", "left"),
    [
        (AckMode.AUTO_ACKNOWLEDGE, []),
        (AckMode.DUPS_OK_ACKNOWLEDGE, []),
        (AckMode.CLIENT_ACKNOWLEDGE, [("m2", True, 2)]),
        (AckMode.INDIVIDUAL_ACKNOWLEDGE, [("m0", True, 2), ("m2", True, 2)]),
        (AckMode.SESSION_TRANSACTED, [("m2", True, 2)]),
    ],
    ids=lambda v: v.name if isinstance(v, AckMode) else None,
)
def test_listener_per_session_kind(differ, mode: AckMode, left: list[object]) -> None:
    differ(lambda target: _listen(target, mode), (ALL, left))


def session_close_waits_for_the_listener_call(target: Target) -> list[tuple[object, bool, int]]:
    """A CLIENT-ack session closed while its listener is busy with m0: the close waits for
    the call, whose acknowledge() still goes out, so only m1 (prefetched, never handed out)
    is left, not redelivered."""
    entered, release = threading.Event(), threading.Event()
    with connected(target) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        producer = conn.create_session().create_producer(queue)
        for i in range(2):
            producer.send(f"m{i}")

        def on_message(message: Message) -> None:
            entered.set()
            release.wait(5)
            message.acknowledge()

        session.create_consumer(queue).set_message_listener(on_message)
        assert entered.wait(10)
        threading.Timer(0.3, release.set).start()
        session.close()
        after = conn.create_session()
        return seen(drain(after.create_consumer(queue)))


def test_session_close_waits_for_the_listener_call(differ) -> None:
    differ(session_close_waits_for_the_listener_call, [("m1", False, 1)])


def listener_removed_then_receive(target: Target) -> tuple[list[object], object, list[object]]:
    """A listener set, then removed: the next message waits for receive(), and a listener
    set again gets the one after."""
    got: list[object] = []
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = conn.create_session().create_producer(queue)
        consumer = session.create_consumer(queue)
        consumer.set_message_listener(lambda m: got.append(m.body))
        producer.send("m0")
        assert until(lambda: len(got) == 1)
        consumer.set_message_listener(None)
        producer.send("m1")
        received = consumer.receive(5)
        consumer.set_message_listener(lambda m: got.append(m.body))
        producer.send("m2")
        assert until(lambda: len(got) == 2)
        return got[:1], received and received.body, got[1:]


def test_listener_removed_then_receive(differ) -> None:
    differ(listener_removed_then_receive, (["m0"], "m1", ["m2"]))
