"""The prefetch window and the acks that move it: DELIVERED acks let a CLIENT-ack or
transacted consumer at prefetch 1 receive one message after another before it acks, and
destination options set the consumer's prefetch."""

from __future__ import annotations

from clientkit import connected, drain

from differ import Target
from dovecote.client import AckMode, JMSError


def five_one_by_one_before_any_ack(target: Target) -> tuple[list[object], list[object]]:
    """Prefetch 1, CLIENT ack: five messages arrive one by one, then one ack for all."""
    with connected(target, "jms.prefetchPolicy.queuePrefetch=1") as conn:
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(5):
            producer.send(f"m{i}")
        consumer = session.create_consumer(queue)
        bodies = [m.body if (m := consumer.receive(3)) else None for _ in range(5)]
        session.acknowledge()
        consumer.close()
        left = [m.body for m in drain(session.create_consumer(queue))]
        return bodies, left


def test_five_one_by_one_before_any_ack(differ) -> None:
    differ(five_one_by_one_before_any_ack, ([f"m{i}" for i in range(5)], []))


def transacted_five_one_by_one_then_commit(target: Target) -> tuple[list[object], list[object]]:
    with connected(target, "jms.prefetchPolicy.queuePrefetch=1") as conn:
        session = conn.create_session(transacted=True)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(5):
            producer.send(f"m{i}")
        session.commit()
        consumer = session.create_consumer(queue)
        bodies = [m.body if (m := consumer.receive(3)) else None for _ in range(5)]
        session.commit()
        consumer.close()
        left = [m.body for m in drain(session.create_consumer(queue))]
        return bodies, left


def test_transacted_five_one_by_one_then_commit(differ) -> None:
    differ(transacted_five_one_by_one_then_commit, ([f"m{i}" for i in range(5)], []))


def prefetch_option_in_the_name(target: Target) -> tuple[object, int, list[str]]:
    """``?consumer.prefetchSize=0`` on the first consumer: it holds nothing, so a second one
    created after it gets every message; the broker sees the name without the options."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        puller = session.create_consumer(session.queue(target.name + "?consumer.prefetchSize=0"))
        other = conn.create_session().create_consumer(queue)
        producer = session.create_producer(session.queue(target.name + "?consumer.priority=1"))
        for i in range(4):
            producer.send(f"m{i}")
        got = drain(other)
        pulled = puller.receive(0.5)
        names = {m.destination.name.removeprefix(target.name) for m in got if m.destination}
        return pulled, len(got), sorted(names)


def test_prefetch_option_in_the_name(differ) -> None:
    differ(prefetch_option_in_the_name, (None, 4, [""]))


def unknown_consumer_option_is_refused(target: Target) -> str:
    with connected(target) as conn:
        session = conn.create_session()
        try:
            session.create_consumer(session.queue(target.name + "?consumer.bogus=1"))
        except JMSError as refused:
            return refused.class_name
        return "accepted"


def test_unknown_consumer_option_is_refused(differ) -> None:
    differ(unknown_consumer_option_is_refused, "org.apache.activemq.ConfigurationException")
