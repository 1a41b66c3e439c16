"""dovecote's Python client, the first slice (compatibility K1, S1), run identically against
dovecote and against a real ActiveMQ 5.17 (K3)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.client import (
    AckMode,
    ConnectionFactory,
    JMSError,
    Message,
    OptionError,
    parse_broker_url,
)
from dovecote.client.aio import AsyncConnectionFactory


@pytest.fixture
def name() -> str:
    return f"pyclient.{uuid.uuid4().hex[:10]}"


def test_text_and_bytes_with_properties(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        q = session.queue(name)
        producer = session.create_producer(q)
        producer.send(
            Message("h\u00e9llo", properties={"color": "red", "n": 5}, correlation_id="c1")
        )
        producer.send(b"\x00\x01\x02")
        consumer = session.create_consumer(q)
        text = consumer.receive(5)
        assert text is not None and text.body == "h\u00e9llo"
        assert text.properties == {"color": "red", "n": 5} and text.correlation_id == "c1"
        raw = consumer.receive(5)
        assert raw is not None and raw.body == b"\x00\x01\x02"


def test_persistent_sends_wait_for_the_broker_and_async_ones_do_not(
    broker_url: str, name: str
) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        producer = session.create_producer(session.queue(name))
        before = conn.transport.round_trips
        for _ in range(5):
            producer.send("sync", persistent=True)
        assert conn.transport.round_trips - before == 5  # one Response per persistent send
        before = conn.transport.round_trips
        for _ in range(5):
            producer.send("async", persistent=False)
        assert conn.transport.round_trips == before  # non-persistent: no round trip (S1)
    url = broker_url + "?jms.useAsyncSend=true"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        producer = session.create_producer(session.queue(name))
        before = conn.transport.round_trips
        producer.send("async persistent", persistent=True)
        assert conn.transport.round_trips == before


def test_client_acknowledge_acks_everything_delivered(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(3):
            producer.send(f"m{i}")
        consumer = session.create_consumer(q)
        consumer.receive(5)
        second = consumer.receive(5)
        assert second is not None
        second.acknowledge()
        consumer.close()
        again = session.create_consumer(q)
        rest = again.receive(5)
        # m2 was prefetched but never given to the application: not redelivered (R1).
        assert rest is not None and rest.body == "m2" and not rest.redelivered
        rest.acknowledge()


def test_transaction_rollback_redelivers_and_commit_consumes(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session(transacted=True)
        q = session.queue(name)
        producer = session.create_producer(q)
        producer.send("work")
        session.commit()
        consumer = session.create_consumer(q)
        first = consumer.receive(5)
        assert first is not None and not first.redelivered
        session.rollback()
        again = consumer.receive(5)
        assert again is not None and again.body == "work" and again.redelivered
        session.commit()
        assert consumer.receive(0.5) is None


def test_prefetch_zero_pulls(broker_url: str, name: str) -> None:
    with ConnectionFactory(
        broker_url + "?jms.prefetchPolicy.queuePrefetch=0"
    ).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        q = session.queue(name)
        consumer = session.create_consumer(q)
        assert consumer.receive(0.3) is None
        session.create_producer(q).send("pulled")
        got = consumer.receive(5)
        assert got is not None and got.body == "pulled"


def test_broker_errors_surface_with_their_jms_class(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        with pytest.raises(Exception, match="InvalidSelectorException"):
            session.create_consumer(session.queue(name), selector="a = = 1")


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("tcp://h:1?jms.useAsyncSnd=true", "jms.useAsyncSnd"),
        ("tcp://h:1?jms.prefetchPolicy.queuePrefetch=ten", "integer"),
        ("tcp://h:1?color=red", "color"),
        ("mqtt://h:1", "unsupported transport"),
        ("failover:(tcp://a:1,tcp://b:2?jms.bogus=1)", "jms.bogus"),
    ],
)
def test_unknown_or_bad_options_are_errors_naming_them(url: str, words: str) -> None:
    with pytest.raises(OptionError, match=words):
        parse_broker_url(url)


def test_options_apply_to_the_object_they_name() -> None:
    url = parse_broker_url(
        "failover:(tcp://a:61616,tcp://b:61617)?randomize=false&jms.useAsyncSend=true"
        "&jms.prefetchPolicy.all=5&jms.redeliveryPolicy.maximumRedeliveries=2"
        "&nested.wireFormat.maxInactivityDuration=5000"  # failover takes no wireFormat.*
    )
    assert url.endpoints == [("tcp", "a", 61616), ("tcp", "b", 61617)]
    assert url.failover is not None and url.failover.randomize is False
    assert url.connection.useAsyncSend and url.connection.prefetchPolicy.topicPrefetch == 5
    assert url.connection.redeliveryPolicy.maximumRedeliveries == 2
    assert [m.wire_format.maxInactivityDuration for m in url.members] == [5000, 5000]


def test_map_messages(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        q = session.queue(name)
        session.create_producer(q).send(Message({"sku": "A1", "qty": 3, "ok": True}))
        got = session.create_consumer(q).receive(5)
        assert got is not None and got.body == {"sku": "A1", "qty": 3, "ok": True}


def test_individual_acknowledge_acks_one(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session(ack_mode=AckMode.INDIVIDUAL_ACKNOWLEDGE)
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(3):
            producer.send(f"m{i}")
        consumer = session.create_consumer(q)
        got = [consumer.receive(5) for _ in range(3)]
        assert all(m is not None for m in got)
        got[1].acknowledge()  # type: ignore[union-attr]
        consumer.close()
        again = conn.create_session().create_consumer(q)
        left = sorted(m.body for m in iter(lambda: again.receive(1), None))  # type: ignore[union-attr]
        assert left == ["m0", "m2"]


def test_listener_and_the_receive_rule(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        q = session.queue(name)
        seen: list[str] = []
        done = threading.Event()

        def on_message(message: Message) -> None:
            seen.append(message.text)
            if len(seen) == 3:
                done.set()

        consumer = session.create_consumer(q)
        consumer.set_message_listener(on_message)
        other = session.create_consumer(session.queue(name + ".other"))
        with pytest.raises(Exception, match="IllegalStateException"):
            other.receive(0.1)
        producer = conn.create_session().create_producer(q)
        for i in range(3):
            producer.send(f"l{i}")
        assert done.wait(10)
        assert seen == ["l0", "l1", "l2"]


def test_temporary_queue_request_reply(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        replies = session.create_temporary_queue()
        assert replies.is_temporary
        service = session.queue(name)
        producer = session.create_producer()
        producer.send(Message("ping", reply_to=replies), destination=service)
        request = session.create_consumer(service).receive(5)
        assert request is not None and request.reply_to == replies
        producer.send(
            Message("pong", correlation_id=request.message_id), destination=request.reply_to
        )
        reply = session.create_consumer(replies).receive(5)
        assert reply is not None and reply.body == "pong"
        assert reply.correlation_id == request.message_id


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_advisories_tell_which_temporary_destinations_exist(broker_url: str) -> None:
    """watchTopicAdvisories (default on): another connection learns of a temporary queue and
    topic from the advisories, and once they are deleted it refuses to use them."""
    with (
        ConnectionFactory(broker_url).create_connection() as owner,
        ConnectionFactory(broker_url).create_connection() as other,
        ConnectionFactory(
            broker_url + "?jms.watchTopicAdvisories=false"
        ).create_connection() as blind,
    ):
        owner.start()
        owner_session = owner.create_session()
        temp_queue = owner_session.create_temporary_queue()
        temp_topic = owner_session.create_temporary_topic()
        watcher = other.temp_watcher
        assert watcher is not None and blind.temp_watcher is None
        assert _until(lambda: {temp_queue, temp_topic} <= watcher.active)
        session = other.create_session()
        session.create_producer(temp_queue).send(Message("to the owner"), persistent=False)
        got = owner_session.create_consumer(temp_queue).receive(5)
        assert got is not None and got.body == "to the owner"
        owner_session.delete_temporary(temp_topic)
        assert _until(lambda: temp_topic not in watcher.active)
        with pytest.raises(JMSError) as refused:
            session.create_consumer(temp_topic)
        assert refused.value.class_name == "javax.jms.InvalidDestinationException"
        owner.close()
        assert _until(lambda: temp_queue not in watcher.active)
        with pytest.raises(JMSError, match="has been deleted"):
            session.create_producer().send(Message("late"), temp_queue, persistent=False)
        # Without advisories the client cannot know; the (async) send goes to the broker.
        blind.create_session().create_producer().send(Message("x"), temp_queue, persistent=False)


def _acks_sent(conn: object) -> int:
    return conn.transport.sent[22]  # type: ignore[attr-defined]  # MessageAck


def test_optimize_acknowledge_batches_acks_on_the_wire(broker_url: str, name: str) -> None:
    counts = {}
    for optimize in (False, True):
        flag = str(optimize).lower()
        url = f"{broker_url}?jms.prefetchPolicy.queuePrefetch=10&jms.optimizeAcknowledge={flag}"
        with ConnectionFactory(url).create_connection() as conn:
            conn.start()
            session = conn.create_session()
            q = session.queue(f"{name}.{optimize}")
            producer = session.create_producer(q)
            for i in range(20):
                producer.send(f"m{i}", persistent=False)
            consumer = session.create_consumer(q)
            before = _acks_sent(conn)
            for _ in range(20):
                assert consumer.receive(5) is not None
            consumer.close()
            counts[optimize] = _acks_sent(conn) - before
    assert counts[False] == 20  # one standard ack per message
    assert counts[True] <= 4  # one per 0.65 x prefetch (6 of 10), and the rest at close


def test_redelivery_policy_exhaustion_sends_a_poison_ack_to_the_dlq(
    broker_url: str, name: str
) -> None:
    url = (
        f"{broker_url}?jms.redeliveryPolicy.maximumRedeliveries=2"
        "&jms.redeliveryPolicy.initialRedeliveryDelay=0&jms.redeliveryPolicy.redeliveryDelay=0"
    )
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session(transacted=True)
        q = session.queue(name)
        session.create_producer(q).send(Message("poison", properties={"test": name}))
        session.commit()
        consumer = session.create_consumer(q)
        deliveries = 0
        while consumer.receive(1) is not None:
            deliveries += 1
            session.rollback()
        assert deliveries == 3  # the first delivery and 2 redeliveries
        dlq = session.create_consumer(session.queue("ActiveMQ.DLQ"), selector=f"test = '{name}'")
        dead = dlq.receive(5)
        assert dead is not None and dead.body == "poison"
        session.commit()


def test_queue_browser_sees_without_consuming(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(3):
            producer.send(f"b{i}")
        assert [m.body for m in session.browse(q)] == ["b0", "b1", "b2"]
        consumer = session.create_consumer(q)
        assert [consumer.receive(5).body for _ in range(3)] == ["b0", "b1", "b2"]  # type: ignore[union-attr]


def test_producer_window_is_refilled_by_producer_acks(broker_url: str, name: str) -> None:
    url = f"{broker_url}?jms.producerWindowSize=4096&jms.useAsyncSend=true"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        q = session.queue(name)
        producer = session.create_producer(q)
        for i in range(50):  # 50 x ~2 KiB through a 4 KiB window: only ProducerAcks let it on
            producer.send("w" * 1000 + str(i))
        assert conn.transport.round_trips < 10  # async: no Response per send
        consumer = session.create_consumer(q)
        assert all(consumer.receive(5) is not None for _ in range(50))


def test_late_consumer_starved_at_prefetch_1000_and_fed_at_prefetch_1(
    broker_url: str, name: str
) -> None:
    for prefetch, late_gets_some in ((1000, False), (1, True)):
        q_name = f"{name}.{prefetch}"
        url = f"{broker_url}?jms.prefetchPolicy.queuePrefetch={prefetch}"
        with (
            ConnectionFactory(url).create_connection() as first,
            ConnectionFactory(url).create_connection() as second,
        ):
            first.start()
            second.start()
            s1 = first.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
            q = s1.queue(q_name)
            producer = s1.create_producer(q)
            for i in range(20):
                producer.send(f"m{i}", persistent=False)
            early = s1.create_consumer(q)
            held = early.receive(5)  # its window now holds the backlog (or one message)
            assert held is not None
            # ActiveMQ fills the window from another thread, a few messages at a time: wait
            # until the backlog has reached the early consumer before the late one asks.
            deadline = time.monotonic() + 10
            while prefetch > 1 and len(early._buffer) < 19 and time.monotonic() < deadline:
                time.sleep(0.01)
            late = second.create_session().create_consumer(q)
            got = late.receive(1)
            assert (got is not None) == late_gets_some


async def test_asyncio_api_over_the_same_engine(broker_url: str, name: str) -> None:
    async with await AsyncConnectionFactory(broker_url).create_connection() as conn:
        await conn.start()
        session = await conn.create_session()
        q = session.queue(name)
        consumer = await session.create_consumer(q)
        # The receive waits without blocking the event loop: the send below runs meanwhile.
        waiting = asyncio.create_task(consumer.receive(10))
        producer = await session.create_producer(q)
        await producer.send("async hello")
        got = await waiting
        assert got is not None and got.body == "async hello"


def test_stream_and_object_messages(broker_url: str, name: str) -> None:
    with ConnectionFactory(broker_url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        q = session.queue(name)
        producer = session.create_producer(q)
        producer.send(Message(["a", 3, True, b"\x01"]))
        serialized = b"\xac\xed\x00\x05t\x00\x02hi"  # a Java-serialized String "hi"
        producer.send(Message(serialized, object_body=True))
        consumer = session.create_consumer(q)
        stream = consumer.receive(5)
        assert stream is not None and stream.body == ["a", 3, True, b"\x01"]
        obj = consumer.receive(5)
        # Object bodies stay opaque bytes: never deserialized by the client.
        assert obj is not None and obj.object_body and obj.body == serialized


def test_send_timeout_fails_a_send_the_broker_holds_back(tmp_path: Path) -> None:
    config = '[usage]\nmemory_limit = 65536\n[[policy.entries]]\npending_queue_cursor = "vm"\n'
    with running_broker(config, workdir=tmp_path) as broker:
        # The held send also holds the close: a short closeTimeout keeps the test quick.
        url = f"tcp://127.0.0.1:{broker.openwire_port}?jms.sendTimeout=500&jms.closeTimeout=500"
        with ConnectionFactory(url).create_connection() as conn:
            conn.start()
            session = conn.create_session()
            producer = session.create_producer(session.queue("full"))
            with pytest.raises(JMSError, match="sendTimeout"):
                for _ in range(200):  # flow control holds a send once 64 KiB are queued
                    producer.send("x" * 2048, persistent=True)
