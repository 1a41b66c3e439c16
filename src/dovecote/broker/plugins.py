"""Broker plugins: behaviour that sits in front of the broker's routing, as ActiveMQ's
BrokerFilter chain does (its SchedulerBroker, security and advisory brokers each wrap the
next one). This is the one seam for cross-cutting features: security, advisories,
statistics, stream requests, the scheduler, bridges.

A plugin subclasses ``BrokerPlugin`` and overrides only the hooks it needs; the chain calls
a hook only on the plugins that override it, so a hook nobody uses costs a loop over an
empty tuple (and the per-message ones, not even that: the broker tests a flag first).

- ``start(broker)`` once the store is recovered, ``stop()`` first thing when the broker
  stops (in reverse order);
- ``on_connect(state)`` before a connection is registered (``state.peer`` says where it
  comes from; an authentication plugin sets ``state.principal``); raising refuses it;
  ``on_disconnect(state)`` once a registered connection and all it owned are gone;
- ``on_add_consumer(state, info)`` / ``on_add_producer(state, info)`` before the consumer
  or producer exists (raising refuses it); ``on_remove_consumer`` / ``on_remove_producer``
  after it is gone;
- ``on_add_destination(state, destination)`` before a destination is created on request
  (a DestinationInfo: temporary destinations), ``on_remove_destination`` before one is
  removed on request; raising refuses either;
- notifications once something happened (they refuse nothing): ``on_connected(state)``
  once a connection is registered, ``on_consumer_added(state, info)`` once a consumer
  exists (before its first dispatch), ``on_producer_added(state, info)``,
  ``on_remove_subscription(state, info, topic)`` once a durable subscription is deleted
  (state None when an operator deleted it through the admin API);
  ``on_destination_created(destination, connection_id)`` once a destination exists, however
  it came to (a send, a consumer, a DestinationInfo, a temporary destination; the
  connection that made it, when known), ``on_destination_removed(destination)`` once one is
  gone; ``on_message_expired(message)`` for each message found expired (its destination
  is where it was), ``on_message_dead_lettered(message)`` for each message copied to a
  dead-letter queue (the message as it was). The broker tests a flag before each of the
  last four, so nobody overriding them costs a send one attribute test per batch;
- message events, only while a plugin overrides one (broker/message_events.py wires them;
  ActiveMQ's policy-flagged broker callbacks): ``on_message_delivered(message)`` once a
  message is enqueued on a destination, ``on_message_consumed(message)`` once a consumer's
  ack (or its auto-ack) removes it, ``on_message_discarded(message, consumer, count)`` when
  a subscriber's pending limit drops it, ``on_slow_consumer(destination, consumer)`` when a
  topic subscriber is found slow, ``on_usage_full(destination, usage, message)`` when a
  send finds the destination's memory full (before it waits);
- ``check_send(state, message)`` for every send as it is admitted, before anything is
  stored: raising refuses the send (synchronous and per message: cache decisions);
- ``on_send(state, command)`` before a send is routed: True means the plugin took the
  message over (the broker routes nothing for it). ``state`` is None for a send routed
  without one (a batch of sends nobody waits for: never transacted);
- ``on_request(state, message)`` for a request to the broker itself: a send with a
  reply-to, to a destination whose name starts with one of the plugin's
  ``request_prefixes`` (``ActiveMQ.Statistics.``, ``dovecote.Stream.``). The plugin
  answers it (``broker.deliver`` routes its replies); nothing is routed for the request.
  The broker tests the reply-to and the prefixes before it awaits anything, so a plain
  send pays nothing for these plugins;
- ``after_commit(state, tx)`` once a local transaction's sends and acks are committed (how
  ActiveMQ's afterCommit synchronizations run).

Only plugins that set ``intercepts_sends`` are asked ``on_send``; with none, a send costs
the broker one attribute test. Plugins see the broker through ``PluginHost``: its read-only
``query``, ``contents`` (purges, reads by sequence), ``publish``/``deliver`` for the
messages they send, ``offer`` for messages meant for one new subscriber only (advisory
replays) and ``delete_destination``. Hooks that refuse raise a ``DovecoteError`` (a
``SecurityError`` for security): the transport answers it as it answers any refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

from dovecote.broker.message_events import MessageEvents
from dovecote.core.commands import ConsumerInfo, ProducerInfo, RemoveSubscriptionInfo, SendMessage
from dovecote.core.destinations import Destination
from dovecote.core.errors import DovecoteError
from dovecote.core.ids import ConnectionId, ConsumerId, IdGenerator, ProducerId
from dovecote.core.message import Message

if TYPE_CHECKING:
    from dovecote.broker.connection import ConnectionState, LocalTransaction
    from dovecote.broker.contents import Contents
    from dovecote.broker.policy import BrokerSettings
    from dovecote.broker.query import BrokerQuery
    from dovecote.broker.regions import Regions
    from dovecote.broker.usage import Usage

log = logging.getLogger("dovecote.broker")

P = TypeVar("P", bound="BrokerPlugin")


class PluginHost(Protocol):
    """What a plugin may use of the broker (the broker is one): its settings and ids, the
    read-only query API, the contents it may change on request, and sending."""

    @property
    def settings(self) -> BrokerSettings: ...

    @property
    def ids(self) -> IdGenerator: ...

    @property
    def query(self) -> BrokerQuery: ...

    @property
    def contents(self) -> Contents: ...

    async def publish(self, message: Message) -> None:
        """Send on the broker's own behalf, under producer flow control (as an admin send);
        a temporary destination that no longer exists is refused."""

    async def deliver(self, messages: Sequence[Message]) -> None:
        """Route the broker's own messages now, without flow control (replies to requests:
        the requester waits for them)."""

    async def offer(self, consumer_id: ConsumerId, messages: Sequence[Message]) -> None:
        """Give messages to one topic consumer alone, those its subscription matches (what
        ActiveMQ sends with a targetConsumerId: advisory replays); nothing is stored."""

    async def delete_destination(self, destination: Destination) -> bool:
        """Remove a destination with its messages and subscriptions; False if unknown."""


class BrokerPlugin:
    """A hook set; every hook does nothing unless overridden."""

    name: ClassVar[str] = "plugin"
    intercepts_sends: ClassVar[bool] = False
    """True: ``on_send`` is called for every send (so override it)."""
    request_prefixes: ClassVar[tuple[str, ...]] = ()
    """Names of the destinations whose requests (sends with a reply-to) ``on_request``
    answers, by prefix."""

    async def start(self, broker: PluginHost) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def on_connect(self, state: ConnectionState) -> None:
        return None

    async def on_disconnect(self, state: ConnectionState) -> None:
        return None

    async def on_add_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        return None

    async def on_remove_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        return None

    async def on_add_producer(self, state: ConnectionState, info: ProducerInfo) -> None:
        return None

    async def on_remove_producer(self, state: ConnectionState, producer_id: ProducerId) -> None:
        return None

    async def on_add_destination(self, state: ConnectionState, destination: Destination) -> None:
        return None

    async def on_remove_destination(self, state: ConnectionState, destination: Destination) -> None:
        return None

    async def on_connected(self, state: ConnectionState) -> None:
        return None

    async def on_consumer_added(self, state: ConnectionState, info: ConsumerInfo) -> None:
        return None

    async def on_producer_added(self, state: ConnectionState, info: ProducerInfo) -> None:
        return None

    async def on_remove_subscription(
        self, state: ConnectionState | None, info: RemoveSubscriptionInfo, topic: Destination
    ) -> None:
        return None

    async def on_destination_created(
        self, destination: Destination, connection_id: ConnectionId | None
    ) -> None:
        return None

    async def on_destination_removed(self, destination: Destination) -> None:
        return None

    async def on_message_expired(self, message: Message) -> None:
        return None

    async def on_message_dead_lettered(self, message: Message) -> None:
        return None

    async def on_message_delivered(self, message: Message) -> None:
        return None

    async def on_message_consumed(self, message: Message) -> None:
        return None

    async def on_message_discarded(
        self, message: Message, consumer: ConsumerInfo, discarded: int
    ) -> None:
        return None

    async def on_slow_consumer(self, destination: Destination, consumer: ConsumerInfo) -> None:
        return None

    async def on_usage_full(self, destination: Destination, usage: Usage, message: Message) -> None:
        return None

    def check_send(self, state: ConnectionState, message: Message) -> None:
        return None

    async def on_send(self, state: ConnectionState | None, command: SendMessage) -> bool:
        return False

    async def on_request(self, state: ConnectionState, message: Message) -> None:
        return None

    async def after_commit(self, state: ConnectionState, tx: LocalTransaction) -> None:
        return None


def _overriding(plugins: Sequence[BrokerPlugin], hook: str) -> tuple[BrokerPlugin, ...]:
    """The plugins whose class overrides ``hook`` (the rest would do nothing)."""
    base = getattr(BrokerPlugin, hook)
    return tuple(p for p in plugins if getattr(type(p), hook) is not base)


class PluginChain:
    """The broker's plugins, in the order they were given: the first sees a send first."""

    def __init__(self, plugins: Sequence[BrokerPlugin] = ()) -> None:
        self.plugins = tuple(plugins)
        self._send_hooks = tuple(p for p in self.plugins if p.intercepts_sends)
        self.intercepts_sends = bool(self._send_hooks)
        """Read by the broker before it calls ``on_send``: False keeps sends hook-free."""
        self._check_send = _overriding(self.plugins, "check_send")
        self.checks_sends = bool(self._check_send)
        """Read by the broker before it calls ``check_send``."""
        self._connect = _overriding(self.plugins, "on_connect")
        self._disconnect = _overriding(self.plugins, "on_disconnect")
        self._add_consumer = _overriding(self.plugins, "on_add_consumer")
        self._remove_consumer = _overriding(self.plugins, "on_remove_consumer")
        self._add_producer = _overriding(self.plugins, "on_add_producer")
        self._remove_producer = _overriding(self.plugins, "on_remove_producer")
        self._add_destination = _overriding(self.plugins, "on_add_destination")
        self._remove_destination = _overriding(self.plugins, "on_remove_destination")
        self._after_commit = _overriding(self.plugins, "after_commit")
        self._connected = _overriding(self.plugins, "on_connected")
        self._consumer_added = _overriding(self.plugins, "on_consumer_added")
        self._producer_added = _overriding(self.plugins, "on_producer_added")
        self._subscription_removed = _overriding(self.plugins, "on_remove_subscription")
        self._destination_created = _overriding(self.plugins, "on_destination_created")
        self._destination_removed = _overriding(self.plugins, "on_destination_removed")
        self._expired = _overriding(self.plugins, "on_message_expired")
        self._dead_lettered = _overriding(self.plugins, "on_message_dead_lettered")
        self.watches_destinations = bool(self._destination_created or self._destination_removed)
        """Read by the broker before it tells of destinations made or removed."""
        self.watches_expiry = bool(self._expired)
        self._delivered = _overriding(self.plugins, "on_message_delivered")
        self._consumed = _overriding(self.plugins, "on_message_consumed")
        self._discarded = _overriding(self.plugins, "on_message_discarded")
        self._slow = _overriding(self.plugins, "on_slow_consumer")
        self._full = _overriding(self.plugins, "on_usage_full")
        self.watches_messages = bool(
            self._delivered or self._consumed or self._discarded or self._slow or self._full
        )
        """Read once by the broker: False leaves the regions without message events."""
        self.watches_dead_letters = bool(self._dead_lettered)
        self._requests = tuple(
            (prefix, plugin) for plugin in self.plugins for prefix in plugin.request_prefixes
        )
        self.request_prefixes = tuple(prefix for prefix, _ in self._requests)
        """Read by the broker (with the reply-to) before it calls ``on_request``."""
        self._started: list[BrokerPlugin] = []

    def wire(self, regions: Regions) -> None:
        """Give the regions what the plugins watch: destinations made, and message events."""
        if self.watches_destinations:
            regions.on_created = self.on_destinations_created
        if self.watches_messages:
            regions.events = regions.paging.events = MessageEvents(self)

    async def start(self, broker: PluginHost) -> None:
        for plugin in self.plugins:
            await plugin.start(broker)
            self._started.append(plugin)

    async def stop(self) -> None:
        while self._started:
            plugin = self._started.pop()
            try:
                await plugin.stop()
            except Exception:  # the others must stop too; the trace says what failed
                log.exception("plugin %s failed to stop", plugin.name)

    async def on_connect(self, state: ConnectionState) -> None:
        for plugin in self._connect:
            await plugin.on_connect(state)

    async def on_disconnect(self, state: ConnectionState) -> None:
        for plugin in self._disconnect:
            await plugin.on_disconnect(state)

    async def on_add_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        for plugin in self._add_consumer:
            await plugin.on_add_consumer(state, info)

    async def on_remove_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        for plugin in self._remove_consumer:
            await plugin.on_remove_consumer(state, info)

    async def on_add_producer(self, state: ConnectionState, info: ProducerInfo) -> None:
        for plugin in self._add_producer:
            await plugin.on_add_producer(state, info)

    async def on_remove_producer(self, state: ConnectionState, producer_id: ProducerId) -> None:
        for plugin in self._remove_producer:
            await plugin.on_remove_producer(state, producer_id)

    async def on_add_destination(self, state: ConnectionState, destination: Destination) -> None:
        for plugin in self._add_destination:
            await plugin.on_add_destination(state, destination)

    async def on_remove_destination(self, state: ConnectionState, destination: Destination) -> None:
        for plugin in self._remove_destination:
            await plugin.on_remove_destination(state, destination)

    async def on_connected(self, state: ConnectionState) -> None:
        for plugin in self._connected:
            await plugin.on_connected(state)

    async def on_consumer_added(self, state: ConnectionState, info: ConsumerInfo) -> None:
        for plugin in self._consumer_added:
            await plugin.on_consumer_added(state, info)

    async def on_producer_added(self, state: ConnectionState, info: ProducerInfo) -> None:
        for plugin in self._producer_added:
            await plugin.on_producer_added(state, info)

    async def on_remove_subscription(
        self, state: ConnectionState | None, info: RemoveSubscriptionInfo, topic: Destination
    ) -> None:
        for plugin in self._subscription_removed:
            await plugin.on_remove_subscription(state, info, topic)

    async def on_destination_created(
        self, destination: Destination, connection_id: ConnectionId | None
    ) -> None:
        for plugin in self._destination_created:
            await plugin.on_destination_created(destination, connection_id)

    async def on_destinations_created(self, destinations: list[Destination]) -> None:
        """Those the regions made (by a send, a consumer, the store): no connection known."""
        for destination in destinations:
            await self.on_destination_created(destination, None)

    async def on_destination_removed(self, destination: Destination) -> None:
        for plugin in self._destination_removed:
            await plugin.on_destination_removed(destination)

    async def on_message_expired(self, message: Message) -> None:
        for plugin in self._expired:
            await plugin.on_message_expired(message)

    async def on_message_dead_lettered(self, message: Message) -> None:
        for plugin in self._dead_lettered:
            await plugin.on_message_dead_lettered(message)

    async def on_message_delivered(self, message: Message) -> None:
        for plugin in self._delivered:
            await plugin.on_message_delivered(message)

    async def on_message_consumed(self, message: Message) -> None:
        for plugin in self._consumed:
            await plugin.on_message_consumed(message)

    async def on_message_discarded(
        self, message: Message, consumer: ConsumerInfo, discarded: int
    ) -> None:
        for plugin in self._discarded:
            await plugin.on_message_discarded(message, consumer, discarded)

    async def on_slow_consumer(self, destination: Destination, consumer: ConsumerInfo) -> None:
        for plugin in self._slow:
            await plugin.on_slow_consumer(destination, consumer)

    async def on_usage_full(self, destination: Destination, usage: Usage, message: Message) -> None:
        for plugin in self._full:
            await plugin.on_usage_full(destination, usage, message)

    def check_send(self, state: ConnectionState, message: Message) -> None:
        for plugin in self._check_send:
            plugin.check_send(state, message)

    async def on_send(self, state: ConnectionState | None, command: SendMessage) -> bool:
        for plugin in self._send_hooks:
            if await plugin.on_send(state, command):
                return True
        return False

    async def on_request(self, state: ConnectionState, message: Message) -> None:
        """Hand a request to the plugin that answers its destination (the first, by the
        plugins' order, whose prefix it starts with)."""
        name = message.destination.name
        for prefix, plugin in self._requests:
            if name.startswith(prefix):
                await plugin.on_request(state, message)
                return

    async def untaken(
        self, commands: Sequence[SendMessage]
    ) -> tuple[list[SendMessage], DovecoteError | None]:
        """The sends of a batch that no plugin takes over, in order, up to the first a
        plugin refuses (with that error): as if the batch's sends had come one at a
        time, the sends before a failed one go on, and the connection hears of it."""
        kept: list[SendMessage] = []
        for command in commands:
            try:
                if not await self.on_send(None, command):
                    kept.append(command)
            except DovecoteError as exc:
                return kept, exc
        return kept, None

    async def after_commit(self, state: ConnectionState, tx: LocalTransaction) -> None:
        for plugin in self._after_commit:
            await plugin.after_commit(state, tx)

    def find(self, kind: type[P]) -> P | None:
        """The installed plugin of this class, if any (for admin views)."""
        for plugin in self.plugins:
            if isinstance(plugin, kind):
                return plugin
        return None
