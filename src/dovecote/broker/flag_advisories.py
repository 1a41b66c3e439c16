"""ActiveMQ 5.17's flag-gated advisories: each destination policy flag (off by default) turns
on one kind, sent as the other advisories are (broker/advisories.py: non-persistent,
type "Advisory", the origin broker's properties):

- ``advisory_for_slow_consumers``: ``ActiveMQ.Advisory.SlowConsumer.<Type>.X``, the slow
  consumer's ConsumerInfo as data structure, ``consumerId``;
- ``advisory_for_fast_producers``: ``ActiveMQ.Advisory.FastProducer.<Type>.X``, the
  producer's ProducerInfo, ``producerId`` (as ActiveMQ: whenever a send finds the
  destination's memory full);
- ``advisory_when_full``: ``ActiveMQ.Advisory.FULL.<Type>.X``, no data structure,
  ``usageName`` (``Main:memory:queue://X:memory``) and ``usageCount`` (bytes used, a long);
- ``advisory_for_discarding_messages``: ``ActiveMQ.Advisory.MessageDiscarded.<Type>.X``;
- ``advisory_for_delivery``: ``ActiveMQ.Advisory.MessageDelivered.<Type>.X``;
- ``advisory_for_consumed``: ``ActiveMQ.Advisory.MessageConsumed.<Type>.X``.

The last three carry the message, its body cleared, as data structure, with
``orignalMessageId`` and ``orignalDestination`` (ActiveMQ's spellings); a discarded one
also ``consumerId`` and ``discardedCount``. <Type> is Queue, Topic, TempQueue or TempTopic.
The events come from broker/message_events.py; the broker has this plugin only when a
policy entry sets one of the flags, so that no message pays for it otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dovecote.broker.advisories import (
    ADVISORY_TYPE,
    TYPE_NAMES,
    AdvisoryPlugin,
    is_advisory,
    without_body,
)
from dovecote.broker.connection import ConnectionState, LocalTransaction
from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.broker.policy import DestinationPolicy
from dovecote.broker.regions import consumes
from dovecote.broker.usage import Usage
from dovecote.core.commands import ConsumerInfo, ProducerInfo
from dovecote.core.destinations import Destination, topic
from dovecote.core.ids import ProducerId
from dovecote.core.message import Message, PropertyValue
from dovecote.protocol.openwire.primitives import JavaInt

Properties = dict[str, PropertyValue]
MAIN_MEMORY = "Main:memory"
"""ActiveMQ's name of the broker's memory usage, which prefixes a destination's usage's."""

FLAGS = (
    "advisory_for_slow_consumers",
    "advisory_for_fast_producers",
    "advisory_when_full",
    "advisory_for_discarding_messages",
    "advisory_for_delivery",
    "advisory_for_consumed",
)


def any_flag(entries: Iterable[object]) -> bool:
    """Some policy entry (the config's or the broker's) turns on one of these advisories:
    the broker then needs the plugin."""
    return any(getattr(entry, flag) for entry in entries for flag in FLAGS)


def flagged_topic(kind: str, destination: Destination) -> Destination:
    """``ActiveMQ.Advisory.<kind>.<Type>.<name>``, as AdvisorySupport names them."""
    return topic(f"ActiveMQ.Advisory.{kind}.{TYPE_NAMES[destination.type]}.{destination.name}")


class FlagAdvisories(BrokerPlugin):
    name: ClassVar[str] = "flag-advisories"

    def __init__(self, advisories: AdvisoryPlugin) -> None:
        self.advisories = advisories
        """Builds and sends the messages (their ids and origin properties)."""
        self._producers: dict[str, ProducerInfo] = {}
        """By the id a message names its producer with."""

    async def start(self, broker: PluginHost) -> None:
        self.broker = broker

    def _policy(self, destination: Destination) -> DestinationPolicy:
        return self.broker.settings.policies.for_destination(destination)

    async def _fire(
        self, to: Destination, command: object, props: dict[str, PropertyValue]
    ) -> None:
        advisories = self.advisories
        await advisories.fire(advisories.advisory(to, command, props))

    # -- producers (a fast producer's advisory carries its ProducerInfo) ---------------------

    async def on_producer_added(self, state: ConnectionState, info: ProducerInfo) -> None:
        self._producers[str(info.producer_id)] = info

    async def on_remove_producer(self, state: ConnectionState, producer_id: ProducerId) -> None:
        self._producers.pop(str(producer_id), None)

    # -- events -----------------------------------------------------------------------------

    async def on_slow_consumer(self, destination: Destination, consumer: ConsumerInfo) -> None:
        if is_advisory(destination) or not self._policy(destination).advisory_for_slow_consumers:
            return
        props: Properties = {"consumerId": str(consumer.consumer_id)}
        await self._fire(flagged_topic("SlowConsumer", destination), consumer, props)

    async def on_usage_full(self, destination: Destination, usage: Usage, message: Message) -> None:
        if is_advisory(destination):
            return
        policy = self._policy(destination)
        if policy.advisory_when_full:
            props: Properties = {
                "usageName": f"{MAIN_MEMORY}:{destination}:memory",
                "usageCount": usage.used,  # (a Python int travels as a long)
            }
            await self._fire(flagged_topic("FULL", destination), None, props)
        producer = self._producers.get(message.producer_id or "")
        if policy.advisory_for_fast_producers and producer is not None:
            props = {"producerId": str(producer.producer_id)}
            await self._fire(flagged_topic("FastProducer", destination), producer, props)

    async def on_message_delivered(self, message: Message) -> None:
        if self._wanted(message) and self._policy(message.destination).advisory_for_delivery:
            await self._fire_copy("MessageDelivered", message, {})

    async def on_message_consumed(self, message: Message) -> None:
        if self._wanted(message) and self._policy(message.destination).advisory_for_consumed:
            await self._fire_copy("MessageConsumed", message, {})

    async def after_commit(self, state: ConnectionState, tx: LocalTransaction) -> None:
        # A transaction's acks consume its messages at its commit: told of then, as ActiveMQ.
        for acked in tx.acks:
            origin = acked.record.origin
            if origin is not None and consumes(origin):
                for entry in acked.entries:
                    await self.on_message_consumed(entry.message)

    async def on_message_discarded(
        self, message: Message, consumer: ConsumerInfo, discarded: int
    ) -> None:
        destination = message.destination
        if self._wanted(message) and self._policy(destination).advisory_for_discarding_messages:
            props: Properties = {
                "discardedCount": JavaInt(discarded),
                "consumerId": str(consumer.consumer_id),
            }
            await self._fire_copy("MessageDiscarded", message, props)

    @staticmethod
    def _wanted(message: Message) -> bool:
        """Not an advisory itself (ActiveMQ's isAdvisory: its type)."""
        return not (message.type == ADVISORY_TYPE and is_advisory(message.destination))

    async def _fire_copy(
        self, kind: str, message: Message, props: dict[str, PropertyValue]
    ) -> None:
        """The message, body cleared (includeBodyForAdvisory off), as the data structure."""
        destination = message.destination
        props |= {"orignalMessageId": message.message_id, "orignalDestination": str(destination)}
        await self._fire(flagged_topic(kind, destination), without_body(message), props)
