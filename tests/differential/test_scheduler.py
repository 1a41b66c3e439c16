"""Scheduled delivery (compatibility D5), side by side with ActiveMQ's scheduler (schedulerSupport
on both): what a client sees of delays, repeats, transactions, bad values, expiry and the
ActiveMQ.Scheduler.Management destination. Delays are short; outcomes are what arrived, in
what order, with which properties, never timings to the millisecond."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from differ import Target
from dovecote.client import Connection, ConnectionFactory, Message
from dovecote.client.consumer import MessageConsumer
from dovecote.client.transport import JMSError
from dovecote.protocol.openwire.primitives import JavaInt
from stompclient import Client

DELAY, PERIOD, REPEAT = "AMQ_SCHEDULED_DELAY", "AMQ_SCHEDULED_PERIOD", "AMQ_SCHEDULED_REPEAT"
JOB_ID = "scheduledJobId"
MANAGEMENT = "ActiveMQ.Scheduler.Management"


@contextmanager
def connected(target: Target) -> Iterator[Connection]:
    connection = ConnectionFactory(target.url).create_connection()
    try:
        connection.start()
        yield connection
    finally:
        connection.close()


def drain(consumer: MessageConsumer, timeout: float = 1.5) -> list[Message]:
    received = []
    while (message := consumer.receive(timeout)) is not None:
        received.append(message)
    return received


def schedule_keys(message: Message) -> list[str]:
    """The scheduling properties a delivered message still carries."""
    return sorted(k for k in message.properties if k.startswith("AMQ_SCHEDULED") or k == JOB_ID)


def delay_holds_back_then_delivers_as_sent(target: Target) -> dict[str, Any]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        sent = Message("later", properties={DELAY: 800, "k": "v"})
        session.create_producer(queue).send(sent)
        early = consumer.receive(0.3)
        [got] = drain(consumer)
        return {
            "early": early is not None,
            "body": got.body,
            "same id": got.message_id == sent.message_id,
            "keys": schedule_keys(got),
            "k": got.properties["k"],
            "persistent": got.persistent,
        }


def test_delay_holds_back_then_delivers_as_sent(differ: Any) -> None:
    differ(delay_holds_back_then_delivers_as_sent, {
        "early": False, "body": "later", "same id": True, "keys": [JOB_ID], "k": "v",
        "persistent": True,
    })  # fmt: skip


def repeat_gives_n_plus_one_copies_with_new_ids(target: Target) -> dict[str, Any]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        sent = Message("tick", properties={DELAY: 100, PERIOD: 200, REPEAT: JavaInt(2)})
        session.create_producer(queue).send(sent)
        copies = drain(consumer)
        return {
            "bodies": [m.body for m in copies],
            "distinct ids": len({m.message_id for m in copies}),
            "sent id among them": sent.message_id in {m.message_id for m in copies},
            "job ids": len({m.properties[JOB_ID] for m in copies}),
            "keys": sorted({k for m in copies for k in schedule_keys(m)}),
        }


def test_repeat_gives_n_plus_one_copies_with_new_ids(differ: Any) -> None:
    differ(repeat_gives_n_plus_one_copies_with_new_ids, {
        "bodies": ["tick"] * 3, "distinct ids": 3, "sent id among them": False, "job ids": 1,
        "keys": [JOB_ID],
    })  # fmt: skip


def repeat_alone_is_not_a_schedule(target: Target) -> list[tuple[str, list[str]]]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        session.create_producer(queue).send(Message("now", properties={REPEAT: JavaInt(3)}))
        got = consumer.receive(0.4)  # at once: no delay, period or cron
        assert got is not None
        return [(str(got.body), schedule_keys(got))]


def test_repeat_alone_is_not_a_schedule(differ: Any) -> None:
    differ(repeat_alone_is_not_a_schedule, [("now", [REPEAT])])


def transacted_schedule_starts_at_commit(target: Target) -> list[str]:
    with connected(target) as conn:
        session = conn.create_session(transacted=True)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        producer.send(Message("rolled back", properties={DELAY: 100}))
        session.rollback()
        producer.send(Message("committed", properties={DELAY: 100}))
        time.sleep(0.8)  # its delay is over: only the commit schedules it
        reader = conn.create_session()
        consumer = reader.create_consumer(queue)
        before = [str(m.body) for m in drain(consumer, 0.3)]
        session.commit()
        return before + [str(m.body) for m in drain(consumer)]


def test_transacted_schedule_starts_at_commit(differ: Any) -> None:
    differ(transacted_schedule_starts_at_commit, ["committed"])


def bad_values_fail_the_send(target: Target) -> list[tuple[str, bool]]:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("text", {DELAY: "soon"}),
        ("double", {DELAY: 1.5}),
        ("long repeat", {PERIOD: 100, REPEAT: 1}),
        ("repeat over 1000", {PERIOD: 100, REPEAT: JavaInt(1001)}),
        ("cron of four fields", {"AMQ_SCHEDULED_CRON": "* * * *"}),
        ("text numbers", {DELAY: "150", PERIOD: "100", REPEAT: "1"}),
    ]
    outcome = []
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        consumer = session.create_consumer(queue)
        for label, props in cases:
            try:
                producer.send(Message(label, properties=props))
                failed = False
            except JMSError:
                failed = True
            outcome.append((label, failed))
        outcome += [(f"got {m.body}", False) for m in drain(consumer)]
    return outcome


def test_bad_values_fail_the_send(differ: Any) -> None:
    differ(bad_values_fail_the_send, [
        ("text", True), ("double", True), ("long repeat", True), ("repeat over 1000", True),
        ("cron of four fields", True), ("text numbers", False),
        ("got text numbers", False), ("got text numbers", False),
    ])  # fmt: skip


def stomp_headers_schedule(target: Target) -> list[object]:
    """Headers are text: read as Java reads numbers. A repeat over the limit is an ERROR
    frame answering the receipt. (A header that is no number at all differs: ActiveMQ
    drops the connection without a frame, a NumberFormatException escaping; dovecote
    answers with an ERROR naming the header. Not compared here.)"""
    destination = f"/queue/{target.name}"
    with Client(target.stomp_address) as client:
        client.subscribe(destination)
        client.send_raw(destination, "by stomp", {DELAY: "300", "persistent": "true"})
        got = client.receive()
        keys = sorted(k for k in got.headers if k.startswith("AMQ_") or k == JOB_ID)
        client.conn.send(destination, "too many", headers={
            PERIOD: "100", REPEAT: "1001", "receipt": "too-many"})  # fmt: skip
        error = client.listener.errors.get(timeout=10)
        return [got.body, keys, error.headers.get("receipt-id"), error.headers["message"]]


def test_stomp_headers_schedule(differ: Any) -> None:
    differ(stomp_headers_schedule, [
        "by stomp", [JOB_ID], "too-many", "The scheduled repeat value is too large",
    ])  # fmt: skip


def expiry_counts_from_delivery(target: Target) -> list[object]:
    """A message whose time to live is shorter than its delay still arrives: the
    scheduler gives the copy a new timestamp and moves the expiration with it."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        before = int(time.time() * 1000)
        session.create_producer(queue).send(
            Message("fresh", properties={DELAY: 700}), time_to_live=300
        )
        got = drain(consumer)
        return [m.body for m in got] + [
            m.timestamp - before >= 500 and m.expiration - m.timestamp == 300 for m in got
        ]


def test_expiry_counts_from_delivery(differ: Any) -> None:
    differ(expiry_counts_from_delivery, ["fresh", True])


def management_browse_remove_and_remove_all(target: Target) -> dict[str, Any]:
    """Browse, cancel one and cancel all through ActiveMQ.Scheduler.Management."""
    tag = uuid.uuid4().hex
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(3):
            producer.send(Message(f"m{i}", properties={DELAY: 60_000 + i * 1000, "tag": tag}))
        replies = session.create_temporary_queue()
        reply_consumer = session.create_consumer(replies)
        management = session.create_producer(session.queue(MANAGEMENT))

        def browse() -> list[Message]:
            management.send(
                Message(reply_to=replies, properties={"AMQ_SCHEDULER_ACTION": "BROWSE"})
            )
            return [m for m in drain(reply_consumer, 1.0) if m.properties.get("tag") == tag]

        first = browse()
        view = [(m.body, m.type, m.persistent, m.properties[DELAY]) for m in first]
        management.send(Message(properties={"AMQ_SCHEDULER_ACTION": "REMOVE",
                                             JOB_ID: first[1].properties[JOB_ID]}))  # fmt: skip
        after_remove = [m.body for m in browse()]
        management.send(Message(properties={"AMQ_SCHEDULER_ACTION": "REMOVEALL"}))
        after_remove_all = [m.body for m in browse()]
        nothing_routed = session.create_consumer(session.queue(MANAGEMENT)).receive(0.3)
        return {
            "browsed": view,
            "ids distinct": len({m.properties[JOB_ID] for m in first}),
            "after remove": after_remove,
            "after remove all": after_remove_all,
            "management queue holds": nothing_routed,
        }


def test_management_browse_remove_and_remove_all(differ: Any) -> None:
    differ(management_browse_remove_and_remove_all, {
        "browsed": [("m0", "Advisory", False, 60_000), ("m1", "Advisory", False, 61_000),
                    ("m2", "Advisory", False, 62_000)],
        "ids distinct": 3,
        "after remove": ["m0", "m2"],
        "after remove all": [],
        "management queue holds": None,
    })  # fmt: skip


def period_alone_is_a_delay_and_topics_are_scheduled_too(target: Target) -> list[object]:
    with connected(target) as conn:
        session = conn.create_session()
        topic = session.topic(target.name)
        subscriber = session.create_consumer(topic)
        session.create_producer(topic).send(Message("to all", properties={PERIOD: 600}))
        early = subscriber.receive(0.3)
        return [early] + [(m.body, schedule_keys(m)) for m in drain(subscriber)]


def test_period_alone_is_a_delay_and_topics_are_scheduled_too(differ: Any) -> None:
    differ(period_alone_is_a_delay_and_topics_are_scheduled_too, [None, ("to all", [JOB_ID])])


def endless_repeat_until_removed(target: Target) -> list[object]:
    """A negative repeat goes on until the job is removed through the management queue."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        sent = Message("again", properties={PERIOD: 150, REPEAT: JavaInt(-1)})
        session.create_producer(queue).send(sent)
        copies = [consumer.receive(5) for _ in range(4)]
        job_id = copies[0].properties[JOB_ID] if copies[0] is not None else None
        session.create_producer(session.queue(MANAGEMENT)).send(
            Message(properties={"AMQ_SCHEDULER_ACTION": "REMOVE", JOB_ID: job_id})
        )
        time.sleep(0.2)  # a copy fired while the REMOVE was on its way may still come
        drain(consumer, 0.3)
        return [m.body if m else None for m in copies] + [consumer.receive(1.0)]


def test_endless_repeat_until_removed(differ: Any) -> None:
    differ(endless_repeat_until_removed, ["again"] * 4 + [None])


def management_time_range(target: Target) -> list[object]:
    """ACTION_START_TIME/ACTION_END_TIME limit BROWSE and REMOVEALL to the jobs whose next
    time falls within them."""
    tag = uuid.uuid4().hex
    with connected(target) as conn:
        session = conn.create_session()
        producer = session.create_producer(session.queue(target.name))
        now = int(time.time() * 1000)
        for delay in (60_000, 120_000, 180_000):
            producer.send(Message(f"in {delay // 1000}s", properties={DELAY: delay, "tag": tag}))
        replies = session.create_temporary_queue()
        reply_consumer = session.create_consumer(replies)
        management = session.create_producer(session.queue(MANAGEMENT))

        def act(action: str, start: int | None = None, end: int | None = None) -> list[Any]:
            props: dict[str, Any] = {"AMQ_SCHEDULER_ACTION": action}
            if start is not None:
                props |= {"ACTION_START_TIME": start, "ACTION_END_TIME": end}
            management.send(Message(reply_to=replies, properties=props))
            if action != "BROWSE":
                return []
            return [m.body for m in drain(reply_consumer, 1.0) if m.properties.get("tag") == tag]

        in_range = act("BROWSE", now + 90_000, now + 150_000)
        act("REMOVEALL", now, now + 90_000)
        left = act("BROWSE")
        act("REMOVEALL")
        return [in_range, left, act("BROWSE")]


def test_management_time_range(differ: Any) -> None:
    differ(management_time_range, [["in 120s"], ["in 120s", "in 180s"], []])


def cron_entries_taken_and_refused(target: Target) -> list[tuple[str, bool]]:
    """Which cron entries a send may carry (none is due within the scenario)."""
    entries = ["0 0 1 1 *", "*/5 3 * * *", "0 12 ? * 1-5", "1,2,3 4 5 6 *",
               "0 12 * * MON", "* * * * * *", "* * *", "0 12 * JAN *", "a b c d e"]  # fmt: skip
    outcome = []
    with connected(target) as conn:
        session = conn.create_session()
        producer = session.create_producer(session.queue(target.name))
        for entry in entries:
            try:
                producer.send(Message(entry, properties={"AMQ_SCHEDULED_CRON": entry}))
                outcome.append((entry, True))
            except JMSError:
                outcome.append((entry, False))
        management = session.create_producer(session.queue(MANAGEMENT))
        management.send(Message(properties={"AMQ_SCHEDULER_ACTION": "REMOVEALL"}))
    return outcome


def test_cron_entries_taken_and_refused(differ: Any) -> None:
    differ(cron_entries_taken_and_refused, [
        ("0 0 1 1 *", True), ("*/5 3 * * *", True), ("0 12 ? * 1-5", True),
        ("1,2,3 4 5 6 *", True), ("0 12 * * MON", False), ("* * * * * *", False),
        ("* * *", False), ("0 12 * JAN *", False), ("a b c d e", False),
    ])  # fmt: skip


def bad_schedule_in_a_transaction_fails_the_commit(target: Target) -> list[object]:
    """A transacted scheduled send is read at commit, as ActiveMQ reads it (its
    afterCommit): the send goes through, the commit reports the bad value."""
    with connected(target) as conn:
        session = conn.create_session(transacted=True)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        producer.send(Message("plain"))
        try:
            producer.send(Message("bad", properties={DELAY: "soon"}))
            sent = True
        except JMSError:
            sent = False
        try:
            session.commit()
            committed = True
        except JMSError:
            committed = False
        reader = conn.create_session()
        return [sent, committed, [m.body for m in drain(reader.create_consumer(queue))]]


def test_bad_schedule_in_a_transaction_fails_the_commit(differ: Any) -> None:
    # The commit fails, and the transaction's other sends have gone (as in ActiveMQ, whose
    # afterCommit runs once the store has committed them).
    differ(bad_schedule_in_a_transaction_fails_the_commit, [True, False, ["plain"]])


def due_order_then_send_order(target: Target) -> list[object]:
    """Messages arrive by due time; those due together in the order they were sent."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        for body, delay in [("m0", 1800), ("m1", 200), ("m2", 1000), ("m3", 200)]:
            producer.send(Message(body, properties={DELAY: delay}))
        producer.send(Message("plain"))
        return [m.body for m in drain(consumer)]


def test_due_order_then_send_order(differ: Any) -> None:
    differ(due_order_then_send_order, ["plain", "m1", "m3", "m2", "m0"])


def a_copy_with_a_job_id_is_not_scheduled_again(target: Target) -> list[object]:
    """A message that already has scheduledJobId (a delivered copy sent on, say) goes at
    once, whatever AMQ_SCHEDULED_* it still has."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        session.create_producer(queue).send(
            Message("again", properties={DELAY: 60_000, JOB_ID: "ID:elsewhere:1:1:1"})
        )
        got = consumer.receive(0.5)
        return [got.body, schedule_keys(got)] if got is not None else [None]


def test_a_copy_with_a_job_id_is_not_scheduled_again(differ: Any) -> None:
    differ(a_copy_with_a_job_id_is_not_scheduled_again, ["again", [DELAY, JOB_ID]])


def cron_delivers_at_the_top_of_the_minute(target: Target) -> list[object]:
    """A real cron firing (up to a minute away): the long form only."""
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        consumer = session.create_consumer(queue)
        sent = Message("cron", properties={"AMQ_SCHEDULED_CRON": "* * * * *"})
        session.create_producer(queue).send(sent)
        got = consumer.receive(75)
        management = session.create_producer(session.queue(MANAGEMENT))
        management.send(Message(properties={"AMQ_SCHEDULER_ACTION": "REMOVEALL"}))
        if got is None:
            return [None]
        second_of_minute = time.localtime().tm_sec  # received just now
        return [got.body, schedule_keys(got), got.message_id != sent.message_id,
                second_of_minute <= 2]  # fmt: skip


@pytest.mark.skipif(not os.environ.get("DOVECOTE_LONG"), reason="long form: DOVECOTE_LONG=1")
def test_cron_delivers_at_the_top_of_the_minute(differ: Any) -> None:
    differ(cron_delivers_at_the_top_of_the_minute, ["cron", [JOB_ID], True, True])
