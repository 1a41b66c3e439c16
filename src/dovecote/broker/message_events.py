"""Message events for plugins (ActiveMQ's messageDelivered, messageConsumed, messageDiscarded,
slowConsumer, fastProducer/isFull broker callbacks, which its flag-gated advisories hang on).

The regions, the paging and ack settling hold a ``MessageEvents`` only while some plugin
listens (``PluginChain.watches_messages``); otherwise their reference is None and each event
point costs one test. What counts as each event, as in ActiveMQ 5.17:

- delivered: a message enqueued on a queue or sent to a topic (after its store write);
- consumed: a queue's (or a durable subscription's) message removed by its consumer's ack,
  or auto-acknowledged on dispatch;
- discarded: a non-durable topic subscriber's pending limit dropped the message;
- slow consumer: a message for a non-durable topic subscriber with a prefetch above 1 finds
  more than its prefetch waiting beyond what it was sent; a durable subscriber's message
  finds its prefetch window full (told once, until it catches up). (A queue's consumers
  are not: ActiveMQ hands a queue's messages only to consumers with room, so its check
  never finds one slow without its abortSlowAckConsumerStrategy, which dovecote lacks.)
- full: a send finds its destination's memory usage full (before it waits).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from dovecote.broker.consumer import Entry
from dovecote.broker.topic import TopicSubscription
from dovecote.core.commands import ConsumerInfo
from dovecote.core.destinations import Destination
from dovecote.core.ids import ConsumerId
from dovecote.core.message import Message

if TYPE_CHECKING:
    from dovecote.broker.usage import Usage


class MessageListener(Protocol):
    """Who hears of the events: the broker's plugin chain (plugins.py)."""

    async def on_message_delivered(self, message: Message) -> None: ...

    async def on_message_consumed(self, message: Message) -> None: ...

    async def on_message_discarded(
        self, message: Message, consumer: ConsumerInfo, discarded: int
    ) -> None: ...

    async def on_slow_consumer(self, destination: Destination, consumer: ConsumerInfo) -> None: ...

    async def on_usage_full(
        self, destination: Destination, usage: Usage, message: Message
    ) -> None: ...


class MessageEvents:
    def __init__(self, plugins: MessageListener) -> None:
        self.plugins = plugins
        self._slow: set[ConsumerId] = set()
        self._discarded: dict[ConsumerId, int] = {}

    async def delivered(self, messages: Iterable[Message]) -> None:
        for message in messages:
            await self.plugins.on_message_delivered(message)

    async def consumed(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            await self.plugins.on_message_consumed(entry.message)

    async def discarded(self, sub: TopicSubscription, entry: Entry) -> None:
        consumer = sub.consumer
        if consumer is None:
            return
        consumer_id = consumer.info.consumer_id
        count = self._discarded[consumer_id] = self._discarded.get(consumer_id, 0) + 1
        await self.plugins.on_message_discarded(entry.message, consumer.info, count)

    async def dispatched(self, sub: TopicSubscription) -> None:
        """After a send's dispatch to ``sub``: is its consumer (still, or no longer) slow?"""
        consumer = sub.consumer
        if consumer is None:
            return
        info = consumer.info
        waiting = len(sub.pending)
        if sub.durable is not None:
            # ActiveMQ's prefetch subscriptions: slow while messages wait and the window is full.
            slow = waiting > 0 and consumer.room <= 0
            caught_up = consumer.room > 0
        else:
            # Its topic subscriptions look before adding a message: more than the prefetch
            # already waited.
            slow = 1 < info.prefetch_size < waiting - 1
            caught_up = not waiting
        if caught_up:
            self._slow.discard(info.consumer_id)
            self._discarded.pop(info.consumer_id, None)
        elif slow and info.consumer_id not in self._slow:
            self._slow.add(info.consumer_id)
            await self.plugins.on_slow_consumer(sub.destination, info)

    def forget(self, consumer_id: ConsumerId) -> None:
        """A topic subscriber left: its slowness and discards are no longer kept."""
        self._slow.discard(consumer_id)
        self._discarded.pop(consumer_id, None)

    async def full(self, destination: Destination, usage: Usage, message: Message) -> None:
        await self.plugins.on_usage_full(destination, usage, message)
