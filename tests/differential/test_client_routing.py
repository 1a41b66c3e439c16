"""Which consumer gets what: message groups (JMSXGroupID in the message's group fields),
exclusive consumers, consumer priority, noLocal topic subscribers."""

from __future__ import annotations

from clientkit import connected, drain

from differ import Target
from dovecote.client import Message, MessageConsumer


def _counts(*consumers: MessageConsumer) -> list[int]:
    return [len(drain(c, 0.5)) for c in consumers]


def a_group_goes_to_one_consumer(target: Target) -> tuple[list[int], list[tuple[object, ...]]]:
    """Six messages of group g between two consumers: one gets them all, with their group
    fields; without a group the two would share them."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        first = session.create_consumer(queue)
        second = conn.create_session().create_consumer(queue)
        producer = session.create_producer(queue)
        for i in range(6):
            producer.send(Message(f"m{i}", properties={"JMSXGroupID": "g", "JMSXGroupSeq": i + 1}))
        got = [drain(first, 0.5), drain(second, 0.5)]
        props = [
            (
                m.properties["JMSXGroupID"],
                m.properties["JMSXGroupSeq"],
                type(m.properties["JMSXGroupSeq"]).__name__,
            )
            for m in got[0] + got[1]
        ]
        return sorted(len(g) for g in got), props


def test_a_group_goes_to_one_consumer(differ) -> None:
    differ(a_group_goes_to_one_consumer, ([0, 6], [("g", i, "JavaInt") for i in range(1, 7)]))


def without_a_group_consumers_share(target: Target) -> list[int]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        first = session.create_consumer(queue)
        second = conn.create_session().create_consumer(queue)
        producer = session.create_producer(queue)
        for i in range(6):
            producer.send(f"m{i}")
        return _counts(first, second)


def test_without_a_group_consumers_share(differ) -> None:
    differ(without_a_group_consumers_share, [3, 3])


def exclusive_consumer_takes_everything(target: Target) -> list[int]:
    """A plain consumer first, then an exclusive one (by option in the name, and by the
    keyword): the exclusive ones get every message."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        plain = session.create_consumer(queue)
        exclusive = conn.create_session().create_consumer(
            session.queue(target.name + "?consumer.exclusive=true")
        )
        producer = session.create_producer(queue)
        for i in range(6):
            producer.send(f"m{i}")
        counts = _counts(plain, exclusive)
        exclusive.close()
        keyword = conn.create_session().create_consumer(queue, exclusive=True)
        for i in range(4):
            producer.send(f"n{i}")
        return counts + _counts(plain, keyword)


def test_exclusive_consumer_takes_everything(differ) -> None:
    differ(exclusive_consumer_takes_everything, [0, 6, 0, 4])


def higher_priority_consumer_first(target: Target) -> list[int]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        low = session.create_consumer(queue, priority=1)
        high = conn.create_session().create_consumer(
            session.queue(target.name + "?consumer.priority=5")
        )
        producer = session.create_producer(queue)
        for i in range(6):
            producer.send(f"m{i}")
        return _counts(low, high)


def test_higher_priority_consumer_first(differ) -> None:
    differ(higher_priority_consumer_first, [0, 6])


def no_local_skips_the_connections_own(target: Target) -> tuple[list[object], list[object]]:
    with connected(target) as mine, connected(target) as theirs:
        session = mine.create_session()
        topic = session.topic(target.name)
        no_local = session.create_consumer(topic, no_local=True)
        every = session.create_consumer(topic)
        session.create_producer(topic).send("mine")
        theirs.create_session().create_producer(topic).send("theirs")
        return [m.body for m in drain(no_local)], sorted(m.body for m in drain(every))


def test_no_local_skips_the_connections_own(differ) -> None:
    differ(no_local_skips_the_connections_own, (["theirs"], ["mine", "theirs"]))


def two_groups_two_consumers(target: Target) -> list[list[str]]:
    """Groups a and b, interleaved, between two consumers: each group sticks to one
    consumer, and the two new groups go to different consumers."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        first = session.create_consumer(queue)
        second = conn.create_session().create_consumer(queue)
        producer = session.create_producer(queue)
        for i in range(6):
            group = "ab"[i % 2]
            producer.send(Message(f"{group}{i}", properties={"JMSXGroupID": group}))
        got = [
            sorted({str(m.properties["JMSXGroupID"]) for m in drain(c, 0.5)})
            for c in (first, second)
        ]
        return sorted(got)


def test_two_groups_two_consumers(differ) -> None:
    differ(two_groups_two_consumers, [["a"], ["b"]])
