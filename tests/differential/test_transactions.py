"""Transactions and redelivery, side by side: commit and rollback of sends and receives, the
redelivery policy from the URL (counts, delay, the dead-letter queue). Each scenario returns
what the client observed; the test compares it across ActiveMQ and dovecote."""

from __future__ import annotations

import time

from differ import Target
from dovecote.broker.transactions import LARGE_COMMIT_SENDS
from dovecote.client import ConnectionFactory, Message

DLQ = "ActiveMQ.DLQ"
"""Both brokers' shared dead-letter queue: a scenario reads only its own messages from it
(a selector on the property ``scenario``), since the whole suite shares one of each broker."""
NO_DELAY = "?jms.redeliveryPolicy.initialRedeliveryDelay=0"


def bodies(consumer, wait: float = 1) -> list[object]:  # type: ignore[no-untyped-def]
    return [m.body for m in iter(lambda: consumer.receive(wait), None)]


def sends_are_seen_only_once_committed(target: Target) -> dict[str, list[object]]:
    with ConnectionFactory(target.url).create_connection() as conn:
        conn.start()
        tx = conn.create_session(transacted=True)
        queue = tx.queue(target.name)
        producer = tx.create_producer(queue)
        consumer = conn.create_session().create_consumer(queue)
        producer.send("kept")
        before = bodies(consumer, 0.5)
        tx.commit()
        committed = bodies(consumer)
        producer.send("dropped")
        tx.rollback()
        rolled_back = bodies(consumer, 0.5)
        return {"before": before, "committed": committed, "rolled_back": rolled_back}


def test_sends_are_seen_only_once_committed(differ) -> None:
    differ(
        sends_are_seen_only_once_committed,
        {"before": [], "committed": ["kept"], "rolled_back": []},
    )


def a_rolled_back_receive_comes_again_redelivered(target: Target) -> list[tuple[object, ...]]:
    with ConnectionFactory(target.url + NO_DELAY).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send("m")
        tx = conn.create_session(transacted=True)
        consumer = tx.create_consumer(queue)
        seen = []
        for decision in ("rollback", "rollback", "commit"):
            message = consumer.receive(5)
            assert message is not None
            seen.append((message.body, message.redelivered, message.redelivery_counter))
            getattr(tx, decision)()
        seen.append((consumer.receive(0.5),))
        return seen


def test_a_rolled_back_receive_comes_again_redelivered(differ) -> None:
    differ(
        a_rolled_back_receive_comes_again_redelivered,
        [("m", False, 0), ("m", True, 1), ("m", True, 2), (None,)],
    )


def redelivery_policy_from_the_url_sends_to_the_dlq(target: Target) -> dict[str, object]:
    """maximumRedeliveries=2: the third rollback sends the message to the dead-letter queue."""
    url = (
        target.url + "?jms.redeliveryPolicy.maximumRedeliveries=2"
        "&jms.redeliveryPolicy.initialRedeliveryDelay=0&jms.redeliveryPolicy.redeliveryDelay=0"
    )
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send(
            Message("poison", properties={"scenario": target.name}), persistent=True
        )
        tx = conn.create_session(transacted=True)
        consumer = tx.create_consumer(queue)
        counters = []
        while (message := consumer.receive(2)) is not None:
            counters.append(message.redelivery_counter)
            tx.rollback()
        consumer.close()
        dead = session.create_consumer(session.queue(DLQ), selector=f"scenario = '{target.name}'")
        return {
            "counters": counters,
            "dlq": bodies(dead, 2),
            "left": bodies(session.create_consumer(queue), 0.5),
        }


def test_redelivery_policy_from_the_url_sends_to_the_dlq(differ) -> None:
    differ(
        redelivery_policy_from_the_url_sends_to_the_dlq,
        {"counters": [0, 1, 2], "dlq": ["poison"], "left": []},
    )


def no_redeliveries_allowed_goes_to_the_dlq_at_once(target: Target) -> dict[str, object]:
    url = target.url + "?jms.redeliveryPolicy.maximumRedeliveries=0"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send(
            Message("once", properties={"scenario": target.name}), persistent=True
        )
        tx = conn.create_session(transacted=True)
        consumer = tx.create_consumer(queue)
        first = consumer.receive(5)
        tx.rollback()
        again = consumer.receive(1)
        dead = session.create_consumer(session.queue(DLQ), selector=f"scenario = '{target.name}'")
        return {
            "first": first.body if first else None,
            "again": again.body if again else None,
            "dlq": bodies(dead, 2),
        }


def test_no_redeliveries_allowed_goes_to_the_dlq_at_once(differ) -> None:
    differ(
        no_redeliveries_allowed_goes_to_the_dlq_at_once,
        {"first": "once", "again": None, "dlq": ["once"]},
    )


def a_non_persistent_poison_message_is_dropped_not_dead_lettered(
    target: Target,
) -> dict[str, object]:
    """The dead-letter strategy's default (processNonPersistent=false): a non-persistent
    message past its redeliveries is discarded, not kept in the DLQ."""
    url = target.url + "?jms.redeliveryPolicy.maximumRedeliveries=0"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send(
            Message("fleeting", properties={"scenario": target.name}), persistent=False
        )
        tx = conn.create_session(transacted=True)
        consumer = tx.create_consumer(queue)
        first = consumer.receive(5)
        tx.rollback()
        dead = session.create_consumer(session.queue(DLQ), selector=f"scenario = '{target.name}'")
        return {
            "first": first.body if first else None,
            "again": bodies(consumer, 1),
            "dlq": bodies(dead, 1),
        }


def test_a_non_persistent_poison_message_is_dropped_not_dead_lettered(differ) -> None:
    differ(
        a_non_persistent_poison_message_is_dropped_not_dead_lettered,
        {"first": "fleeting", "again": [], "dlq": []},
    )


def the_redelivery_delay_from_the_url_holds_the_message_back(target: Target) -> dict[str, object]:
    url = target.url + "?jms.redeliveryPolicy.initialRedeliveryDelay=1500"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send("later")
        tx = conn.create_session(transacted=True)
        consumer = tx.create_consumer(queue)
        assert consumer.receive(5) is not None
        tx.rollback()
        started = time.monotonic()
        soon = consumer.receive(0.3)
        later = consumer.receive(10)
        waited = time.monotonic() - started
        tx.commit()
        return {
            "soon": soon.body if soon else None,
            "later": later.body if later else None,
            "held_back_a_second": waited >= 1.0,
        }


def test_the_redelivery_delay_from_the_url_holds_the_message_back(differ) -> None:
    differ(
        the_redelivery_delay_from_the_url_holds_the_message_back,
        {"soon": None, "later": "later", "held_back_a_second": True},
    )


def request_worker(conn, target: Target):  # type: ignore[no-untyped-def]
    """A request ("job") waiting on ``<name>.in``; a transacted session with its consumer
    there and its producer to ``<name>.out``, and a plain consumer watching ``<name>.out``:
    (session, worker, producer, watcher)."""
    conn.start()
    plain = conn.create_session()
    requests = plain.queue(f"{target.name}.in")
    results = plain.queue(f"{target.name}.out")
    plain.create_producer(requests).send("job")
    tx = conn.create_session(transacted=True)
    watcher = plain.create_consumer(results)
    return tx, tx.create_consumer(requests), tx.create_producer(results), watcher


def a_receive_and_a_send_commit_or_roll_back_together(target: Target) -> dict[str, object]:
    """Consume a request and send its result in one transaction: rolled back, the request
    is back and no result went out; committed, the request is gone and the result out."""
    with ConnectionFactory(target.url + NO_DELAY).create_connection() as conn:
        tx, worker, out, watcher = request_worker(conn, target)
        outcome: dict[str, object] = {}
        for decision in ("rollback", "commit"):
            job = worker.receive(5)
            out.send(f"done {job.body if job else None}")
            getattr(tx, decision)()
            outcome[decision] = {
                "job": (job.body, job.redelivered) if job else None,
                "results": bodies(watcher, 1),
            }
        outcome["left"] = bodies(worker, 0.5)
        return outcome


def test_a_receive_and_a_send_commit_or_roll_back_together(differ) -> None:
    differ(
        a_receive_and_a_send_commit_or_roll_back_together,
        {
            "rollback": {"job": ("job", False), "results": []},
            "commit": {"job": ("job", True), "results": ["done job"]},
            "left": [],
        },
    )


def a_large_transaction_commits_or_rolls_back_whole(target: Target) -> dict[str, object]:
    """A transaction of more sends than LARGE_COMMIT_SENDS (dovecote commits it with the
    collector paused) and a receive: rolled back, nothing of it went out and the request is
    back; committed, every send arrives once, in order, and the request is gone."""
    count = LARGE_COMMIT_SENDS + 200
    with ConnectionFactory(target.url + NO_DELAY).create_connection() as conn:
        tx, worker, out, watcher = request_worker(conn, target)
        outcome: dict[str, object] = {}
        for decision in ("rollback", "commit"):
            job = worker.receive(5)
            for i in range(count):
                out.send(f"r{i}")
            getattr(tx, decision)()
            seen = bodies(watcher, 1)
            outcome[decision] = {
                "job": (job.body, job.redelivered) if job else None,
                "results": len(seen),
                "in order": seen == [f"r{i}" for i in range(len(seen))],
            }
        outcome["left"] = bodies(worker, 0.5)
        return outcome


def test_a_large_transaction_commits_or_rolls_back_whole(differ) -> None:
    differ(
        a_large_transaction_commits_or_rolls_back_whole,
        {
            "rollback": {"job": ("job", False), "results": 0, "in order": True},
            "commit": {"job": ("job", True), "results": LARGE_COMMIT_SENDS + 200, "in order": True},
            "left": [],
        },
    )
