"""The advisory plugin on a real broker (memory store): which advisories each event sends,
on which topic, carrying what, and what a new advisory consumer is replayed. The wire form
and ActiveMQ's own are compared in tests/differential/test_advisories.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dovecote.broker.advisories import AdvisoryPlugin
from dovecote.broker.broker import Broker
from dovecote.broker.plugins import BrokerPlugin
from dovecote.broker.policy import BrokerSettings
from dovecote.core.commands import (
    AckType,
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    MessageAck,
    MessageDispatch,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SendMessage,
    SessionInfo,
)
from dovecote.core.destinations import Destination, DestinationType, queue, topic
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId
from dovecote.core.message import Message
from dovecote.store.memory import MemoryPersistenceAdapter

WATCHER = ConnectionId("ID:watcher")
WATCH_SESSION = SessionId(WATCHER, 1)
CLIENT = ConnectionId("ID:client")
SESSION = SessionId(CLIENT, 1)


class Broker_:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.got: list[MessageDispatch] = []
        self._ids = iter(range(1, 1000))

    async def watch(self, name: str) -> ConsumerId:
        consumer_id = ConsumerId(WATCH_SESSION, next(self._ids))
        await self.broker.process(WATCHER, ConsumerInfo(consumer_id, topic(name)))
        return consumer_id

    def seen(self) -> list[tuple[str, object]]:
        """(advisory topic, data structure) of what the watcher got, and forget it."""
        seen = [
            (d.message.destination.name, d.message.data_structure)
            for d in self.got
            if d.message is not None
        ]
        self.got.clear()
        return seen

    def properties(self) -> list[dict[str, object]]:
        return [dict(d.message.properties) for d in self.got if d.message is not None]


async def make(plugins: list[BrokerPlugin]) -> Broker_:
    b = Broker(
        BrokerSettings(broker_name="b1", expire_messages_period_ms=0),
        MemoryPersistenceAdapter(),
        plugins=plugins,
    )
    await b.start()
    harness = Broker_(b)
    await b.add_connection(ConnectionInfo(WATCHER, "watcher"), harness.got.append)
    await b.process(WATCHER, SessionInfo(WATCH_SESSION))
    return harness


@pytest.fixture
async def b() -> AsyncIterator[Broker_]:
    harness = await make([AdvisoryPlugin("tcp://127.0.0.1:61616")])
    yield harness
    await harness.broker.stop()


async def connect(b: Broker_) -> None:
    await b.broker.add_connection(ConnectionInfo(CLIENT, "cid", "user", "secret"), lambda d: None)
    await b.broker.process(CLIENT, SessionInfo(SESSION))


def send(name: Destination, n: int = 1, expiration: int = 0) -> SendMessage:
    return SendMessage(
        Message(f"ID:p:1:1:{n}", name, b"body", persistent=True, expiration=expiration)
    )


async def test_connections_are_told_of_and_replayed_without_passwords(b: Broker_) -> None:
    await connect(b)
    await b.watch("ActiveMQ.Advisory.Connection")
    replayed = b.seen()
    # The watcher's own connection and the client's, as ConnectionInfo, password blanked.
    assert [(t, s.client_id, s.password) for t, s in replayed] == [  # type: ignore[attr-defined]
        ("ActiveMQ.Advisory.Connection", "watcher", ""),
        ("ActiveMQ.Advisory.Connection", "cid", ""),
    ]
    await b.broker.remove_connection(CLIENT)
    assert b.seen() == [("ActiveMQ.Advisory.Connection", RemoveInfo(CLIENT, 0))]


async def test_consumers_are_told_of_with_their_count(b: Broker_) -> None:
    await b.watch("ActiveMQ.Advisory.Consumer.Queue.q")
    await connect(b)
    first = ConsumerInfo(ConsumerId(SESSION, 1), queue("q"))
    second = ConsumerInfo(ConsumerId(SESSION, 2), queue("q"))
    await b.broker.process(CLIENT, first)
    await b.broker.process(CLIENT, second)
    await b.broker.process(CLIENT, ConsumerInfo(ConsumerId(SESSION, 3), queue("other")))
    counts = [p["consumerCount"] for p in b.properties()]
    assert b.seen() == [
        ("ActiveMQ.Advisory.Consumer.Queue.q", first),
        ("ActiveMQ.Advisory.Consumer.Queue.q", second),
    ]
    assert counts == [1, 2]
    await b.broker.process(CLIENT, RemoveInfo(first.consumer_id))
    counts = [p["consumerCount"] for p in b.properties()]
    assert b.seen() == [("ActiveMQ.Advisory.Consumer.Queue.q", RemoveInfo(first.consumer_id, 0))]
    assert counts == [1]


async def test_a_new_consumer_advisory_watcher_gets_the_existing_consumers(b: Broker_) -> None:
    await connect(b)
    on_queue = ConsumerInfo(ConsumerId(SESSION, 1), queue("a"))
    on_topic = ConsumerInfo(ConsumerId(SESSION, 2), topic("t"))
    await b.broker.process(CLIENT, on_queue)
    await b.broker.process(CLIENT, on_topic)
    await b.watch("ActiveMQ.Advisory.Consumer.>")
    assert b.seen() == [
        ("ActiveMQ.Advisory.Consumer.Queue.a", on_queue),
        ("ActiveMQ.Advisory.Consumer.Topic.t", on_topic),
    ]
    # Only the new consumer is replayed to: an earlier watcher gets nothing twice.
    await b.watch("ActiveMQ.Advisory.Consumer.Queue.a")
    assert b.seen() == [("ActiveMQ.Advisory.Consumer.Queue.a", on_queue)]


async def test_a_deleted_durable_subscription_is_told_of(b: Broker_) -> None:
    await b.watch("ActiveMQ.Advisory.Consumer.Topic.t")
    await connect(b)
    durable = ConsumerInfo(ConsumerId(SESSION, 1), topic("t"), subscription_name="s")
    await b.broker.process(CLIENT, durable)
    await b.broker.process(CLIENT, RemoveInfo(durable.consumer_id))
    await b.broker.process(CLIENT, RemoveSubscriptionInfo("cid", "s"))
    # The inactive subscription counts until it is deleted, as in ActiveMQ.
    assert [p["consumerCount"] for p in b.properties()] == [1, 1, 0]
    assert [type(s).__name__ for _, s in b.seen()] == [
        "ConsumerInfo",
        "RemoveInfo",
        "RemoveSubscriptionInfo",
    ]


async def test_a_durable_subscription_deleted_by_an_operator_is_told_of(b: Broker_) -> None:
    await b.watch("ActiveMQ.Advisory.Consumer.Topic.t")
    await connect(b)
    durable = ConsumerInfo(ConsumerId(SESSION, 1), topic("t"), subscription_name="s")
    await b.broker.process(CLIENT, durable)
    await b.broker.process(CLIENT, RemoveInfo(durable.consumer_id))
    b.seen()
    await b.broker.contents.remove_subscription("cid", "s")  # the admin API's DELETE
    assert b.seen() == [("ActiveMQ.Advisory.Consumer.Topic.t", RemoveSubscriptionInfo("cid", "s"))]


async def test_producers_are_told_of_but_not_anonymous_ones(b: Broker_) -> None:
    await b.watch("ActiveMQ.Advisory.Producer.>")
    await connect(b)
    named = ProducerInfo(ProducerId(SESSION, 1), topic("t"))
    await b.broker.process(CLIENT, named)
    await b.broker.process(CLIENT, ProducerInfo(ProducerId(SESSION, 2)))
    assert [p["producerCount"] for p in b.properties()] == [1]
    assert b.seen() == [("ActiveMQ.Advisory.Producer.Topic.t", named)]
    await b.broker.process(CLIENT, RemoveInfo(named.producer_id))
    assert [p["producerCount"] for p in b.properties()] == [0]
    assert b.seen() == [("ActiveMQ.Advisory.Producer.Topic.t", RemoveInfo(named.producer_id, 0))]


async def test_destinations_made_by_sending_consuming_and_producing(b: Broker_) -> None:
    await b.watch("ActiveMQ.Advisory.Queue")
    await b.watch("ActiveMQ.Advisory.Topic")
    await connect(b)
    await b.broker.process(CLIENT, send(queue("sent")))
    await b.broker.process(CLIENT, send(queue("sent"), 2))  # once only
    await b.broker.process(CLIENT, ConsumerInfo(ConsumerId(SESSION, 1), topic("consumed")))
    await b.broker.process(CLIENT, ProducerInfo(ProducerId(SESSION, 1), queue("produced")))
    seen = b.seen()
    assert [(t, s.destination.name, s.add) for t, s in seen] == [  # type: ignore[attr-defined]
        ("ActiveMQ.Advisory.Queue", "sent", True),
        ("ActiveMQ.Advisory.Topic", "consumed", True),
        ("ActiveMQ.Advisory.Queue", "produced", True),
    ]
    assert await b.broker.delete_destination(queue("sent"))
    assert [(t, s.add) for t, s in b.seen()] == [  # type: ignore[attr-defined]
        ("ActiveMQ.Advisory.Queue", False)
    ]


async def test_temporary_destinations_and_their_replay(b: Broker_) -> None:
    await connect(b)
    temp = Destination(DestinationType.TEMP_QUEUE, "ID:client:1:1")
    await b.broker.process(CLIENT, DestinationInfo(CLIENT, temp))
    await b.broker.process(CLIENT, send(queue("plain")))
    # The Java client's watch: the temporary destinations only, not the queue.
    await b.watch("ActiveMQ.Advisory.TempQueue,ActiveMQ.Advisory.TempTopic")
    assert b.seen() == [("ActiveMQ.Advisory.TempQueue", DestinationInfo(CLIENT, temp))]
    # Consumers on it are told of; its advisory topics go with it.
    await b.broker.process(CLIENT, ConsumerInfo(ConsumerId(SESSION, 1), temp))
    assert b.broker.query.destination_exists(topic("ActiveMQ.Advisory.Consumer.Queue." + temp.name))
    await b.broker.remove_connection(CLIENT)
    assert b.seen() == [("ActiveMQ.Advisory.TempQueue", DestinationInfo(CLIENT, temp, add=False))]
    assert not b.broker.query.destination_exists(
        topic("ActiveMQ.Advisory.Consumer.Queue." + temp.name)
    )


async def test_expired_and_dead_lettered_messages(b: Broker_) -> None:
    await b.watch("ActiveMQ.Advisory.Expired.Queue.q")
    await b.watch("ActiveMQ.Advisory.MessageDLQd.Queue.q")
    await connect(b)
    await b.broker.process(CLIENT, send(queue("q"), 1, expiration=1))
    await b.broker.process(CLIENT, ConsumerInfo(ConsumerId(SESSION, 1), queue("q")))
    properties = b.properties()
    seen = b.seen()
    assert sorted(t for t, _ in seen) == [
        "ActiveMQ.Advisory.Expired.Queue.q",
        "ActiveMQ.Advisory.MessageDLQd.Queue.q",
    ]
    for _, payload in seen:
        assert isinstance(payload, Message)
        assert payload.message_id == "ID:p:1:1:1"
        assert payload.body == b""
    expired = [p for p in properties if "orignalMessageId" in p]
    assert [p["orignalMessageId"] for p in expired] == ["ID:p:1:1:1"]
    # A poisoned message: dead-lettered only.
    await b.broker.process(CLIENT, send(queue("q"), 2))
    await b.broker.process(CLIENT, MessageAck(ConsumerId(SESSION, 1), AckType.POISON, "ID:p:1:1:2"))
    assert [t for t, _ in b.seen()] == ["ActiveMQ.Advisory.MessageDLQd.Queue.q"]


async def test_every_advisory_names_its_broker_and_is_non_persistent(b: Broker_) -> None:
    await b.watch("ActiveMQ.Advisory.Connection")
    for dispatch in b.got:
        assert dispatch.message is not None
        assert dispatch.message.type == "Advisory"
        assert not dispatch.message.persistent
        assert dispatch.message.properties["originBrokerName"] == "b1"
        assert dispatch.message.properties["originBrokerId"] == "ID:b1"
        assert dispatch.message.properties["originBrokerURL"] == "tcp://127.0.0.1:61616"
    assert b.got


async def test_without_the_plugin_nothing_is_sent() -> None:
    harness = await make([])
    try:
        await harness.watch("ActiveMQ.Advisory.>")
        await harness.broker.process(WATCHER, send(queue("q")))
        await harness.broker.process(
            WATCHER, ConsumerInfo(ConsumerId(WATCH_SESSION, 99), queue("q"))
        )
        assert [t for t, _ in harness.seen() if t.startswith("ActiveMQ.Advisory.")] == []
    finally:
        await harness.broker.stop()
