"""Advisory messages, as ActiveMQ 5.17's AdvisoryBroker sends them (compatibility D3):
non-persistent messages of type "Advisory" on ``ActiveMQ.Advisory.*`` topics, whose data structure
is the command they tell of, so that clients and network bridges learn what exists on a broker.

- ``ActiveMQ.Advisory.Connection``: a ConnectionInfo (password blanked) as a connection
  opens, a RemoveInfo as it closes;
- ``ActiveMQ.Advisory.Consumer.Queue.X`` / ``.Consumer.Topic.X``: a ConsumerInfo as a consumer
  is made, a RemoveInfo as it goes, with ``consumerCount`` (the consumers left on X); a
  RemoveSubscriptionInfo as a durable subscription on topic X is deleted;
- ``ActiveMQ.Advisory.Producer.Queue.X`` / ``.Producer.Topic.X``: ProducerInfo / RemoveInfo
  with ``producerCount`` (anonymous producers are not told of, as in ActiveMQ by default);
- ``ActiveMQ.Advisory.Queue`` / ``.Topic`` / ``.TempQueue`` / ``.TempTopic``: a DestinationInfo
  as a destination comes to exist (a send, a consumer, a producer, a DestinationInfo, the
  store at start) and as it is removed;
- ``ActiveMQ.Advisory.Expired.Queue.X`` / ``.Expired.Topic.X``: a copy of each expired message
  without its body, with ``orignalMessageId`` (ActiveMQ's spelling);
- ``ActiveMQ.Advisory.MessageDLQd.Queue.X`` (``.Topic.``, ``.TempQueue.``, ``.TempTopic.``): a
  copy, without its body, of each message copied to a dead-letter queue.

Every advisory has ``originBrokerName``, ``originBrokerId`` and ``originBrokerURL``. Nothing is
told of advisory topics themselves. A consumer of advisory topics first gets what exists
(ActiveMQ's replay, sent to it alone): the connections, destinations (only the temporary
ones when it watches only those), producers and consumers its topics cover. Network bridges
rely on that replay of consumers. docs/advisories.md has the details and the differences.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import ClassVar

from dovecote.broker.connection import ConnectionState
from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.broker.regions import now_ms
from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SendMessage,
)
from dovecote.core.destinations import Destination, DestinationType, destination_matches, topic
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId
from dovecote.core.message import BodyType, Message, PropertyValue
from dovecote.protocol.openwire.primitives import JavaInt

PREFIX = "ActiveMQ.Advisory."
CONNECTION = topic(PREFIX + "Connection")
QUEUE = topic(PREFIX + "Queue")
TOPIC = topic(PREFIX + "Topic")
TEMP_QUEUE = topic(PREFIX + "TempQueue")
TEMP_TOPIC = topic(PREFIX + "TempTopic")
DESTINATION_TOPICS = {
    DestinationType.QUEUE: QUEUE,
    DestinationType.TOPIC: TOPIC,
    DestinationType.TEMP_QUEUE: TEMP_QUEUE,
    DestinationType.TEMP_TOPIC: TEMP_TOPIC,
}
TYPE_NAMES = {
    DestinationType.QUEUE: "Queue",
    DestinationType.TOPIC: "Topic",
    DestinationType.TEMP_QUEUE: "TempQueue",
    DestinationType.TEMP_TOPIC: "TempTopic",
}
ADVISORY_TYPE = "Advisory"


def is_advisory(destination: Destination | None) -> bool:
    """An advisory topic, or a composite with one among its parts."""
    if destination is None:
        return False
    return any(p.is_topic and p.name.startswith(PREFIX) for p in destination.components())


def _any_part(destination: Destination, prefix: str) -> bool:
    return any(p.is_topic and p.name.startswith(prefix) for p in destination.components())


def consumer_topic(destination: Destination) -> Destination:
    kind = "Queue." if destination.is_queue else "Topic."
    return topic(PREFIX + "Consumer." + kind + destination.name.replace(",", "&sbquo;"))


def producer_topic(destination: Destination) -> Destination:
    kind = "Queue." if destination.is_queue else "Topic."
    return topic(PREFIX + "Producer." + kind + destination.name.replace(",", "&sbquo;"))


def no_consumer_topic(destination: Destination) -> Destination:
    kind = "Queue." if destination.is_queue else "Topic."
    return topic(PREFIX + "NoConsumer." + kind + destination.name)


def expired_topic(destination: Destination) -> Destination:
    kind = "Queue." if destination.is_queue else "Topic."
    return topic(PREFIX + "Expired." + kind + destination.name)


def dead_lettered_topic(destination: Destination) -> Destination:
    return topic(f"{PREFIX}MessageDLQd.{TYPE_NAMES[destination.type]}.{destination.name}")


def destination_topic(destination: Destination) -> Destination:
    return DESTINATION_TOPICS[destination.type]


def destination_advisory_topics(destination: Destination) -> tuple[Destination, ...]:
    """The advisory topics of one destination this plugin may have made."""
    return (
        consumer_topic(destination),
        producer_topic(destination),
        expired_topic(destination),
        dead_lettered_topic(destination),
    )


class AdvisoryPlugin(BrokerPlugin):
    name: ClassVar[str] = "advisories"

    def __init__(self, broker_url: str = "") -> None:
        self.broker_url = broker_url
        """originBrokerURL: the broker's OpenWire listener, as ActiveMQ's connector URL."""
        self._connections: dict[ConnectionId, ConnectionInfo] = {}
        self._consumers: dict[ConsumerId, ConsumerInfo] = {}
        self._producers: dict[ProducerId, ProducerInfo] = {}
        self._destinations: dict[Destination, DestinationInfo] = {}
        self._seq = itertools.count(1)

    async def start(self, broker: PluginHost) -> None:
        self.broker = broker
        name = broker.settings.broker_name
        self._origin: dict[str, PropertyValue] = {
            "originBrokerName": name,
            "originBrokerId": f"ID:{name}",  # as the OpenWire transport's BrokerInfo names it
        }
        self._producer = f"{broker.ids.next_name()}:0:0"
        self._own_connection = ConnectionId(self._producer.rsplit(":", 2)[0])
        """Stands for the connection that made a destination when the broker cannot say."""

    # -- sending ----------------------------------------------------------------------------

    def advisory(
        self,
        to: Destination,
        command: object,
        properties: dict[str, PropertyValue] | None = None,
    ) -> Message:
        """An advisory message to topic ``to`` carrying ``command``."""
        return Message(
            message_id=f"{self._producer}:{next(self._seq)}",
            destination=to,
            body_type=BodyType.MESSAGE,
            persistent=False,
            type=ADVISORY_TYPE,
            timestamp=now_ms(),
            properties=self._origin | {"originBrokerURL": self.broker_url} | (properties or {}),
            data_structure=command,
        )

    async def fire(self, message: Message) -> None:
        # Without flow control, as ActiveMQ sends them: a full broker must not stop a close.
        await self.broker.deliver([message])

    def _consumer_advisory(self, on: Destination, command: object) -> Message:
        count = JavaInt(self.broker.query.consumer_count(on))
        return self.advisory(consumer_topic(on), command, {"consumerCount": count})

    def _producer_advisory(self, on: Destination, command: object) -> Message:
        count = JavaInt(self.broker.query.producer_count(on))
        return self.advisory(producer_topic(on), command, {"producerCount": count})

    # -- connections, consumers, producers --------------------------------------------------

    async def on_connected(self, state: ConnectionState) -> None:
        info = replace(state.info, client_id=state.client_id, password="")
        self._connections[info.connection_id] = info
        await self.fire(self.advisory(CONNECTION, info))

    async def on_disconnect(self, state: ConnectionState) -> None:
        connection_id = state.info.connection_id
        if self._connections.pop(connection_id, None) is not None:
            await self.fire(self.advisory(CONNECTION, _removal(connection_id)))

    async def on_consumer_added(self, state: ConnectionState, info: ConsumerInfo) -> None:
        destination = info.destination
        if is_advisory(destination):
            await self.broker.offer(info.consumer_id, list(self.replay(destination)))
            return
        self._consumers[info.consumer_id] = info
        await self.fire(self._consumer_advisory(destination, info))

    async def on_remove_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        destination = info.destination
        if self._consumers.pop(info.consumer_id, None) is None:
            return
        # A temporary destination's consumers leaving with it are not told of.
        if not destination.is_temporary or destination in self._destinations:
            await self.fire(self._consumer_advisory(destination, _removal(info.consumer_id)))

    async def on_remove_subscription(
        self, state: ConnectionState | None, info: RemoveSubscriptionInfo, topic: Destination
    ) -> None:
        # ActiveMQ tells consumers' watchers (network bridges drop their durable demand).
        if not is_advisory(topic):
            await self.fire(self._consumer_advisory(topic, info))

    async def on_producer_added(self, state: ConnectionState, info: ProducerInfo) -> None:
        destination = info.destination
        if destination is None or is_advisory(destination):
            return
        self._producers[info.producer_id] = info
        await self.fire(self._producer_advisory(destination, info))

    async def on_remove_producer(self, state: ConnectionState, producer_id: ProducerId) -> None:
        info = self._producers.pop(producer_id, None)
        if info is None or info.destination is None:
            return
        destination = info.destination
        if not destination.is_temporary or destination in self._destinations:
            await self.fire(self._producer_advisory(destination, _removal(producer_id)))

    # -- destinations -----------------------------------------------------------------------

    async def on_destination_created(
        self, destination: Destination, connection_id: ConnectionId | None
    ) -> None:
        if is_advisory(destination) or destination in self._destinations:
            return
        info = DestinationInfo(connection_id or self._own_connection, destination, add=True)
        self._destinations[destination] = info
        await self.fire(self.advisory(destination_topic(destination), info))

    async def on_destination_removed(self, destination: Destination) -> None:
        info = self._destinations.pop(destination, None)
        if info is None:
            return
        removed = replace(info, add=False)
        await self.fire(self.advisory(destination_topic(destination), removed))
        # Its own advisory topics go with it (those nobody is subscribed to), as in ActiveMQ:
        # else every temporary destination would leave topics behind.
        query = self.broker.query
        for advisory_topic in destination_advisory_topics(destination):
            if query.destination_exists(advisory_topic) and not query.consumer_count(
                advisory_topic
            ):
                await self.broker.delete_destination(advisory_topic)

    # -- messages ---------------------------------------------------------------------------

    async def on_message_expired(self, message: Message) -> None:
        if message.type == ADVISORY_TYPE and is_advisory(message.destination):
            return
        properties: dict[str, PropertyValue] = {"orignalMessageId": message.message_id}
        advisory = self.advisory(expired_topic(message.destination), without_body(message),
                                 properties)  # fmt: skip
        await self.fire(advisory)

    async def on_message_dead_lettered(self, message: Message) -> None:
        if message.type == ADVISORY_TYPE and is_advisory(message.destination):
            return
        destination = message.destination
        await self.fire(self.advisory(dead_lettered_topic(destination), without_body(message)))

    # -- replay -----------------------------------------------------------------------------

    def replay(self, watched: Destination) -> Iterator[Message]:
        """What a new consumer of advisory topics ``watched`` learns first: what exists, as
        the advisories it would have got, those its topics cover (AdvisoryBroker.addConsumer's
        replay)."""
        if watched.is_queue:
            return
        parts = watched.components()
        if CONNECTION in parts:
            for info in list(self._connections.values()):
                yield self.advisory(CONNECTION, info)
        if all(p in (TEMP_QUEUE, TEMP_TOPIC) for p in parts):
            yield from self._destination_replay(d for d in self._destinations if d.is_temporary)
        elif any(p in (QUEUE, TOPIC, TEMP_QUEUE, TEMP_TOPIC) for p in parts):
            yield from self._destination_replay(iter(self._destinations))
        if _any_part(watched, PREFIX + "Producer."):
            for producer in list(self._producers.values()):
                assert producer.destination is not None
                if destination_matches(watched, producer_topic(producer.destination)):
                    yield self._producer_advisory(producer.destination, producer)
        if _any_part(watched, PREFIX + "Consumer."):
            for consumer in list(self._consumers.values()):
                if destination_matches(watched, consumer_topic(consumer.destination)):
                    yield self._consumer_advisory(consumer.destination, consumer)

    def _destination_replay(self, destinations: Iterable[Destination]) -> Iterator[Message]:
        for destination in list(destinations):
            info = self._destinations.get(destination)
            if info is not None:
                yield self.advisory(destination_topic(destination), info)


def _removal(object_id: ConnectionId | ConsumerId | ProducerId) -> RemoveInfo:
    """ActiveMQ's createRemoveCommand: no last delivered sequence (0)."""
    return RemoveInfo(object_id, 0)


def without_body(message: Message) -> Message:
    """A message as an advisory carries it: its body cleared (ActiveMQ's default,
    includeBodyForAdvisory false)."""
    return replace(message, body=b"", data_structure=None)


class NoConsumerAdvisories(BrokerPlugin):
    """ActiveMQ's ``sendAdvisoryIfNoConsumers`` (a destination policy flag, off by
    default): a non-persistent message sent to a destination that has no consumer is copied,
    body and all, to ``ActiveMQ.Advisory.NoConsumer.Queue.X`` (``.Topic.X``). It looks at
    every send, so the broker has it only when a policy entry turns the flag on."""

    name: ClassVar[str] = "no-consumer-advisories"
    intercepts_sends: ClassVar[bool] = True

    async def start(self, broker: PluginHost) -> None:
        self.broker = broker

    async def on_send(self, state: ConnectionState | None, command: SendMessage) -> bool:
        message = command.message
        if message.persistent:
            return False
        policies = self.broker.settings.policies
        for part in message.destination.components():
            if (
                not (part.is_topic and is_advisory(part))
                and policies.for_destination(part).send_advisory_if_no_consumers
                and self.broker.query.consumer_count(part) == 0
            ):
                copy = replace(message, destination=no_consumer_topic(part))
                await self.broker.deliver([copy])
        return False  # (the message itself is routed as ever)
