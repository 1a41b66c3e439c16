"""Session.recover(), rollback and the client's redelivery policy, side by side: what comes
back, marked how, after how long, and where it goes once the policy is exhausted."""

from __future__ import annotations

import time

from clientkit import NO_DELAY, connected, drain, seen, until

from differ import Target
from dovecote.client import AckMode, JMSError, Message


def recover_redelivers_with_counts(target: Target) -> list[list[tuple[object, bool, int]]]:
    """Client ack: three received, recovered twice, then acknowledged."""
    with connected(target, NO_DELAY) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(3):
            producer.send(f"m{i}")
        consumer = session.create_consumer(queue)
        rounds = [seen(drain(consumer))]
        for _ in range(2):
            session.recover()
            rounds.append(seen(drain(consumer)))
        session.acknowledge()
        consumer.close()
        rounds.append(seen(drain(session.create_consumer(queue))))
        return rounds


def test_recover_redelivers_with_counts(differ) -> None:
    first = [("m0", False, 1), ("m1", False, 1), ("m2", False, 1)]
    second = [("m0", True, 2), ("m1", True, 2), ("m2", True, 2)]
    third = [("m0", True, 3), ("m1", True, 3), ("m2", True, 3)]
    differ(recover_redelivers_with_counts, [first, second, third, []])


def recover_waits_the_redelivery_delay(target: Target) -> tuple[object, ...]:
    """initialRedeliveryDelay=700: nothing before it has passed, the message after."""
    options = "jms.redeliveryPolicy.initialRedeliveryDelay=700"
    with connected(target, options) as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        session.create_producer(queue).send("m0")
        consumer = session.create_consumer(queue)
        first = consumer.receive(5)
        started = time.monotonic()
        session.recover()
        early = consumer.receive(0.3)
        again = consumer.receive(5)
        waited = time.monotonic() - started
        assert again is not None
        again.acknowledge()
        return (first and first.body, early, again.body, again.redelivered, waited >= 0.6)


def test_recover_waits_the_redelivery_delay(differ) -> None:
    differ(recover_waits_the_redelivery_delay, ("m0", None, "m0", True, True))


def recover_in_a_transacted_session_is_refused(target: Target) -> str:
    with connected(target) as conn:
        session = conn.create_session(transacted=True)
        try:
            session.recover()
        except JMSError as refused:
            return refused.class_name
        return "accepted"


def test_recover_in_a_transacted_session_is_refused(differ) -> None:
    differ(recover_in_a_transacted_session_is_refused, "javax.jms.IllegalStateException")


def rollback_counts_then_commit(target: Target) -> list[list[tuple[object, bool, int]]]:
    with connected(target, NO_DELAY) as conn:
        session = conn.create_session(transacted=True)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        producer.send("m0")
        producer.send("m1")
        session.commit()
        consumer = session.create_consumer(queue)
        rounds = []
        for _ in range(2):
            rounds.append(seen(drain(consumer)))
            session.rollback()
        rounds.append(seen(drain(consumer)))
        session.commit()
        consumer.close()
        rounds.append(seen(drain(session.create_consumer(queue))))
        return rounds


def test_rollback_counts_then_commit(differ) -> None:
    differ(rollback_counts_then_commit, [
        [("m0", False, 1), ("m1", False, 1)], [("m0", True, 2), ("m1", True, 2)],
        [("m0", True, 3), ("m1", True, 3)], [],
    ])  # fmt: skip


def exhausted_redelivery_goes_to_the_dead_letter_queue(target: Target) -> tuple[object, ...]:
    """maximumRedeliveries=1: the second recover poison-acks; the broker dead-letters it."""
    body = f"poison {target.name}"
    with connected(target, NO_DELAY + "&jms.redeliveryPolicy.maximumRedeliveries=1") as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        session.create_producer(queue).send(body)
        consumer = session.create_consumer(queue)
        counts = []
        for _ in range(3):
            message = consumer.receive(2)
            counts.append(None if message is None else message.delivery_count)
            session.recover()
        dlq = session.queue("ActiveMQ.DLQ")
        dead = until(lambda: any(m.body == body for m in session.browse(dlq)), 10)
        return counts, dead


def test_exhausted_redelivery_goes_to_the_dead_letter_queue(differ) -> None:
    differ(exhausted_redelivery_goes_to_the_dead_letter_queue, ([1, 2, None], True))


def listener_exception_redelivers_in_auto_mode(target: Target) -> list[tuple[object, int]]:
    """An AUTO listener that raises gets the message again (the Java consumer's rollback)."""
    calls: list[tuple[object, int]] = []

    def on_message(message: Message) -> None:
        calls.append((message.body, message.delivery_count))
        if len(calls) == 1:
            raise RuntimeError("first delivery fails")

    with connected(target, NO_DELAY) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send("m0")
        session.create_consumer(queue).set_message_listener(on_message)
        until(lambda: len(calls) >= 2, 10)
        time.sleep(0.2)  # a third call would be a bug: give it the chance to show
        return list(calls)


def test_listener_exception_redelivers_in_auto_mode(differ) -> None:
    differ(listener_exception_redelivers_in_auto_mode, [("m0", 1), ("m0", 2)])


def transacted_consumer_poisons_what_the_broker_redelivered_too_often(
    target: Target,
) -> tuple[list[int], object, bool]:
    """maximumRedeliveries=1: a message the broker has redelivered twice (two CLIENT-ack
    consumers closed after receiving it) reaches a transacted consumer, which poison-acks it
    before handing it out (the pre-dispatch check); the broker dead-letters it."""
    body = f"too often {target.name}"
    with connected(target, "jms.redeliveryPolicy.maximumRedeliveries=1") as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        session.create_producer(queue).send(body)
        counts = []
        for _ in range(3):
            consumer = session.create_consumer(queue)
            message = consumer.receive(5)
            counts.append(-1 if message is None else message.delivery_count)
            consumer.close()
        tx = conn.create_session(transacted=True)
        consumer = tx.create_consumer(queue)
        handed_out = consumer.receive(1)
        tx.commit()
        dlq = session.queue("ActiveMQ.DLQ")
        dead = until(lambda: any(m.body == body for m in session.browse(dlq)), 10)
        return counts, handed_out, dead


def test_transacted_consumer_poisons_what_the_broker_redelivered_too_often(differ) -> None:
    differ(
        transacted_consumer_poisons_what_the_broker_redelivered_too_often, ([1, 2, 3], None, True)
    )
