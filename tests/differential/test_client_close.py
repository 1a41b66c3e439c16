"""Closing a consumer, a session or a connection with messages delivered but not acked: the
client tells the broker the last message it handed to the application (RemoveInfo's
lastDeliveredSequenceId), so those come back redelivered and the prefetched rest as new."""

from __future__ import annotations

from clientkit import connected, drain, seen

from differ import Target
from dovecote.client import AckMode, JMSError, Session
from dovecote.client.destination_options import AnyDestination

FIVE_AFTER_TWO = [("m0", True, 2), ("m1", True, 2), ("m2", False, 1), ("m3", False, 1),
                  ("m4", False, 1)]  # fmt: skip


def _send_five(session: Session, queue: AnyDestination) -> None:
    producer = session.create_producer(queue)
    for i in range(5):
        producer.send(f"m{i}")


def consumer_close_counts_twice(target: Target) -> list[list[tuple[object, bool, int]]]:
    """Two of three received and the consumer closed, then all three and closed again."""
    with connected(target) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(3):
            producer.send(f"m{i}")
        consumer = session.create_consumer(queue)
        assert consumer.receive(5) is not None and consumer.receive(5) is not None
        consumer.close()
        consumer = session.create_consumer(queue)
        first = seen(drain(consumer))
        consumer.close()
        consumer = session.create_consumer(queue)
        second = seen(drain(consumer))
        session.acknowledge()
        return [first, second]


def test_consumer_close_counts_twice(differ) -> None:
    differ(consumer_close_counts_twice, [
        [("m0", True, 2), ("m1", True, 2), ("m2", False, 1)],
        [("m0", True, 3), ("m1", True, 3), ("m2", True, 2)],
    ])  # fmt: skip


def session_close_returns_its_consumers_messages(target: Target) -> list[tuple[object, bool, int]]:
    """A session closed (not its consumer) after two of five: another session gets all five."""
    with connected(target) as conn:
        closing = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = closing.queue(target.name)
        _send_five(closing, queue)
        consumer = closing.create_consumer(queue)
        assert consumer.receive(5) is not None and consumer.receive(5) is not None
        closing.close()
        other = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        got = seen(drain(other.create_consumer(queue)))
        other.acknowledge()
        return got


def test_session_close_returns_its_consumers_messages(differ) -> None:
    differ(session_close_returns_its_consumers_messages, FIVE_AFTER_TWO)


def connection_close_returns_its_consumers_messages(
    target: Target,
) -> list[tuple[object, bool, int]]:
    with connected(target) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        _send_five(session, queue)
        consumer = session.create_consumer(queue)
        assert consumer.receive(5) is not None and consumer.receive(5) is not None
    with connected(target) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        got = seen(drain(session.create_consumer(queue)))
        session.acknowledge()
        return got


def test_connection_close_returns_its_consumers_messages(differ) -> None:
    differ(connection_close_returns_its_consumers_messages, FIVE_AFTER_TWO)


def closed_session_refuses_work(target: Target) -> list[str]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        session.close()
        refused = []
        for action in (lambda: session.create_consumer(queue), lambda: consumer.receive(0.1)):
            try:
                action()
                refused.append("accepted")
            except JMSError as error:
                refused.append(error.class_name)
        return refused


def test_closed_session_refuses_work(differ) -> None:
    differ(closed_session_refuses_work, ["javax.jms.IllegalStateException"] * 2)


def producer_destination_rules(target: Target) -> list[str]:
    """As the Java producer: one made for a destination sends nowhere else, an anonymous
    one needs a destination for each send."""
    with connected(target) as conn:
        session = conn.create_session()
        bound = session.create_producer(session.queue(target.name))
        anonymous = session.create_producer()
        outcomes = []
        for action in (
            lambda: bound.send("elsewhere", session.queue(target.name + ".other")),
            lambda: anonymous.send("nowhere"),
            lambda: bound.send("here", session.queue(target.name)),
        ):
            try:
                action()
                outcomes.append("sent")
            except JMSError as refused:
                outcomes.append(refused.class_name)
        return outcomes


def test_producer_destination_rules(differ) -> None:
    differ(producer_destination_rules, [
        "java.lang.UnsupportedOperationException", "java.lang.UnsupportedOperationException",
        "sent",
    ])  # fmt: skip
