"""The broker: connections, consumers, acks and transactions, over the regions.

Protocol adapters register a connection with a sink for dispatches, then feed it core
commands through ``process``, one at a time per connection, awaiting each: a persistent
send returns only once the store holds it (compatibility M7), so the adapter's receipt or response
follows. Everything runs on one asyncio loop; no locks.

Ownership is a tree: the broker owns the ``Regions`` (queues and topic subscriptions, which
own their pending entries) and the connection states; consumers own what is in flight to
them. ``_consumers`` is an index from consumer id to where that consumer draws from, not a
second owner.

Who calls what:

- the transports (transport/): ``add_connection``, ``process``, ``remove_connection``;
  for sends read ahead, ``admit_send_now`` / ``admit_send`` then ``route_admitted``, with
  ``has_headroom``; for acks read together, ``ack_together``; ``written`` once a
  connection's socket took what it was given; ``memory_full`` and ``wait_for_room`` for a
  windowed producer's held-back ack. These are the hot path (compiled with mypyc).
- the admin API, the app and plugins (``plugins.PluginHost``): ``query`` (read-only),
  ``contents`` (purge, reads by sequence), ``publish``, ``deliver``,
  ``delete_destination``, ``usage`` (the limits the disk watch adjusts), ``plugins.find``.
- plugins are called by the broker at the seams ``plugins.py`` lists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from functools import partial

from dovecote.broker import attach, durables, transactions
from dovecote.broker.acks import settle_ack
from dovecote.broker.connection import (
    NO_PEER,
    ConnectionState,
    ConsumerRecord,
    LocalTransaction,
    Origin,
    Peer,
)
from dovecote.broker.consumer import Consumer, DispatchSink, Entry, release_all
from dovecote.broker.contents import Contents
from dovecote.broker.deadletters import DeadLetters
from dovecote.broker.plugins import BrokerPlugin, PluginChain
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.query import BrokerQuery
from dovecote.broker.queue import Queue
from dovecote.broker.regions import Accepted, Regions, log_failure, now_ms
from dovecote.broker.temps import TempDestinations
from dovecote.broker.topic import TopicSubscription
from dovecote.broker.usage import SystemUsage
from dovecote.core.commands import (
    LAST_DELIVERED_UNKNOWN,
    Command,
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    MessageAck,
    MessageDispatch,
    MessagePull,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SendMessage,
    SessionInfo,
    TransactionInfo,
    TransactionType,
)
from dovecote.core.destinations import Destination
from dovecote.core.errors import (
    BrokerError,
    DovecoteError,
    InvalidClientIdError,
    InvalidDestinationError,
    ResourceLimitError,
    UnknownSubscriptionError,
    UnknownTransactionError,
)
from dovecote.core.ids import ConnectionId, ConsumerId, IdGenerator, ProducerId, SessionId
from dovecote.core.message import Message
from dovecote.store.api import (
    PagedRecovery,
    PagingStore,
    PersistenceAdapter,
    RecoveredState,
    RemoveDestination,
)

log = logging.getLogger("dovecote.broker")


class Broker:
    def __init__(
        self,
        settings: BrokerSettings,
        store: PersistenceAdapter,
        clock: Callable[[], int] = now_ms,
        plugins: Sequence[BrokerPlugin] = (),
    ) -> None:
        self.settings = settings
        self.store = store
        self.plugins = PluginChain(plugins)
        self.regions = Regions(settings, store, clock)
        self.paging = self.regions.paging
        self.usage: SystemUsage = self.paging.usage
        self.dead_letters = DeadLetters(self.regions, self.plugins)
        self.regions.on_expired = self.dead_letters.expire
        self.plugins.wire(self.regions)
        self.ids = IdGenerator()
        self._connections: dict[ConnectionId, ConnectionState] = {}
        self._client_ids: dict[str, ConnectionId] = {}
        self._consumers: dict[ConsumerId, ConsumerRecord] = {}
        self._pull_timers: dict[ConsumerId, asyncio.TimerHandle] = {}
        self.temps = TempDestinations()
        self._temp_owners = self.temps.owners
        self._sweeper: asyncio.Task[None] | None = None
        self._request_prefixes = self.plugins.request_prefixes
        self.query = BrokerQuery(
            settings.broker_name, self.regions, self._connections, self._consumers,
            self._temp_owners,
        )  # fmt: skip
        """The read-only view for everything outside broker/ (admin API, metrics, plugins)."""
        self.contents = Contents(self.regions, partial(self.plugins.on_remove_subscription, None))
        """What destinations hold, changed on request (admin purges, stream requests)."""

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        await self.store.start()
        recovered: RecoveredState | PagedRecovery
        if isinstance(self.store, PagingStore):
            # Only each queue's count is read now; its messages a page at a time.
            recovered = self.store.recover_paged()
            self.regions.load(recovered)
        else:
            recovered = self.store.recover()
            self.regions.load(recovered)
        log.info("recovered %d queues and %d durable subscriptions",
                 len(recovered.queues), len(recovered.subscriptions))  # fmt: skip
        if self.settings.expire_messages_period_ms > 0:
            self._sweeper = asyncio.create_task(self._sweep_expired_forever())
        await self.plugins.start(self)
        await self.regions.announce_created()  # what the store held

    async def stop(self) -> None:
        await self.plugins.stop()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for connection_id in list(self._connections):
            await self.remove_connection(connection_id)
        await self.store.stop()
        self.paging.temp.close()

    # -- connections -----------------------------------------------------------------------

    async def add_connection(
        self, info: ConnectionInfo, sink: DispatchSink, peer: Peer = NO_PEER
    ) -> ConnectionState:
        """Register a connection; the plugins may refuse it first (authentication)."""
        if info.connection_id in self._connections:
            raise BrokerError(f"connection {info.connection_id} already exists")
        client_id = info.client_id or str(info.connection_id)
        state = ConnectionState(info, sink, client_id, peer)
        await self.plugins.on_connect(state)
        if client_id in self._client_ids:
            raise InvalidClientIdError(f"client id {client_id!r} is already connected")
        self._connections[info.connection_id] = state
        self._client_ids[client_id] = info.connection_id
        await self.plugins.on_connected(state)
        return state

    def connections(self) -> Iterator[ConnectionState]:
        return iter(self._connections.values())

    def close_connection(self, connection_id: str) -> bool:
        """Close a connection's socket (the console; ActiveMQ's ConnectionView.stop): its
        transport then removes it as any lost connection. False if unknown or socketless."""
        for state in self._connections.values():
            if str(state.info.connection_id) == connection_id and state.closer is not None:
                state.closer()
                return True
        return False

    async def remove_connection(
        self, connection_id: ConnectionId, last_delivered: int = LAST_DELIVERED_UNKNOWN
    ) -> None:
        """Close a connection and all it owns; safe to call for an unknown connection.
        ``last_delivered`` as in RemoveInfo (unknown when the connection was lost)."""
        state = self._connections.pop(connection_id, None)
        if state is None:
            return
        self._client_ids.pop(state.client_id, None)
        # Detach every consumer first, so that nothing redelivered below is dispatched back
        # to a consumer of this closing connection.
        infos = [self._consumers[c].consumer.info for c in state.consumers if c in self._consumers]
        returned = [self._detach_consumer(state, c) for c in list(state.consumers)]
        for transaction_id in list(state.transactions):
            tx = state.transactions.pop(transaction_id)
            await transactions.rollback(self.dead_letters, tx, True, self._consumers)
        for origin, entries in returned:
            await attach.give_back(self.dead_letters, origin, entries, last_delivered)
        for info in infos:
            await self.plugins.on_remove_consumer(state, info)
        for producer_id in list(state.producers):
            await self.plugins.on_remove_producer(state, producer_id)
        for destination in list(state.temp_destinations):
            await self._remove_destination(destination)
        await self.plugins.on_disconnect(state)

    async def process(
        self, connection_id: ConnectionId, command: Command, accepted: Accepted = None
    ) -> None:
        state = self._connections.get(connection_id)
        if state is None:
            if isinstance(command, RemoveInfo) and isinstance(command.object_id, ConnectionId):
                return  # closing a closed connection (ShutdownInfo after RemoveInfo) is fine
            raise BrokerError(f"connection {connection_id} is not open")
        match command:
            case SendMessage():
                await self._send(state, command, accepted)
            case MessageAck():
                await self._ack(state, command)
            case MessagePull():
                await self._pull(command)
            case ConsumerInfo():
                await self._add_consumer(state, command, accepted)
            case ProducerInfo(producer_id=producer_id, destination=destination):
                await self.plugins.on_add_producer(state, command)
                state.producers[producer_id] = destination
                if destination is not None:
                    await self.regions.create(destination)
                await self.plugins.on_producer_added(state, command)
            case SessionInfo(session_id=session_id):
                state.sessions.add(session_id)
            case TransactionInfo():
                await self._transaction(state, command)
            case RemoveInfo(object_id=object_id, last_delivered_sequence=last_delivered):
                await self._remove(state, object_id, last_delivered)
            case RemoveSubscriptionInfo(client_id=client_id, subscription_name=name):
                removed = await durables.remove(self.regions, client_id, name)
                await self.plugins.on_remove_subscription(state, command, removed)
            case DestinationInfo(destination=destination, add=True):
                await self.plugins.on_add_destination(state, destination)
                await self._add_temp_destination(state, destination)
            case DestinationInfo(destination=destination, add=False):
                await self.plugins.on_remove_destination(state, destination)
                await self._remove_destination(destination)
            case ConnectionInfo():
                raise BrokerError("connection is already open")

    async def _remove(
        self,
        state: ConnectionState,
        object_id: ConnectionId | SessionId | ConsumerId | ProducerId,
        last_delivered: int = -1,
    ) -> None:
        match object_id:
            case ConsumerId():
                await self._remove_consumer(state, object_id, last_delivered)
            case ProducerId():
                if object_id in state.producers:
                    del state.producers[object_id]
                    await self.plugins.on_remove_producer(state, object_id)
            case SessionId():
                state.sessions.discard(object_id)
                for consumer_id in [c for c in state.consumers if c.session_id == object_id]:
                    await self._remove_consumer(state, consumer_id, last_delivered)
                for producer_id in [p for p in state.producers if p.session_id == object_id]:
                    del state.producers[producer_id]
                    await self.plugins.on_remove_producer(state, producer_id)
            case ConnectionId():
                await self.remove_connection(object_id, last_delivered)

    # -- destinations ----------------------------------------------------------------------

    def check_usable(self, destination: Destination) -> None:
        if destination.is_temporary and destination not in self._temp_owners:
            raise InvalidDestinationError(
                f"temporary destination {destination} does not exist (its connection closed)"
            )

    async def _add_temp_destination(self, state: ConnectionState, destination: Destination) -> None:
        if not destination.is_temporary:
            await self.regions.create(destination)
            return
        connection_id = state.info.connection_id
        self.temps.claim(destination, connection_id)
        if destination not in state.temp_destinations:
            state.temp_destinations.add(destination)
            if self.plugins.watches_destinations:
                await self.plugins.on_destination_created(destination, connection_id)

    async def _remove_destination(self, destination: Destination) -> None:
        owner = self._temp_owners.pop(destination, None)
        if owner is not None and owner in self._connections:
            self._connections[owner].temp_destinations.discard(destination)
        self.regions.topic_stats.pop(destination, None)
        queue = self.regions.queues.pop(destination, None)
        if queue is not None:
            for consumer in list(queue.consumers):
                self._consumers.pop(consumer.info.consumer_id, None)
                self._cancel_pull_timer(consumer.info.consumer_id)
                release_all(consumer.take_back())
            release_all(queue.remove_pending())
            self.paging.forget_stored(queue)
            await self.store.write([RemoveDestination(destination)])
        for sub in self.regions.topic_subs.pop(destination, []):
            release_all(sub.detach())
            release_all(sub.remove_pending())
            if sub.consumer is not None:
                self._consumers.pop(sub.consumer.info.consumer_id, None)
        if self.plugins.watches_destinations:
            await self.plugins.on_destination_removed(destination)

    # -- sending ---------------------------------------------------------------------------

    async def _send(self, state: ConnectionState, command: SendMessage, accepted: Accepted) -> None:
        message = command.message
        for destination in message.destination.components():
            self.check_usable(destination)
        if self.plugins.checks_sends:
            self.plugins.check_send(state, message)
        if state.send_audit is not None and state.send_audit(message):
            return  # a network bridge sent it again: it is here already
        if self.plugins.intercepts_sends and await self.plugins.on_send(state, command):
            return  # a plugin took it over (the scheduler holds it back)
        prefixes = self._request_prefixes
        if message.reply_to is not None and message.destination.name.startswith(prefixes):
            # A request to the broker itself (statistics, streams): a plugin answers it.
            await self.plugins.on_request(state, message)
            return
        if command.transaction_id is not None:
            state.transaction_of(command).sends.append(message)
            return
        if command.flow_control and not self.paging.admits_now(message):
            await self.paging.admit(message)
        await self.regions.route([message], sync=command.sync, accepted=accepted)
        if state.send_stored is not None:
            state.send_stored(message)

    async def admit_send(self, connection_id: ConnectionId, command: SendMessage) -> None:
        """The first half of a pipelined send (a persistent send nobody waits for): check it
        and apply flow control now, so that the connection's reading waits while the broker
        is full, and leave the store write to ``route_admitted``. Transports call the two
        halves in order for each send and may run several second halves at once; group
        commit then shares one fsync among them, enqueued in the order of their writes."""
        if not self.admit_send_now(connection_id, command):
            await self.paging.admit(command.message)

    def admit_send_now(self, connection_id: ConnectionId, command: SendMessage) -> bool:
        """``admit_send`` when nothing need wait (as for nearly every send): True once the
        send is admitted; False when the caller must await ``admit_send`` instead."""
        state = self._connections.get(connection_id)
        if state is None:
            raise BrokerError(f"connection {connection_id} is not open")
        message = command.message
        for destination in message.destination.components():
            self.check_usable(destination)
        if self.plugins.checks_sends:
            self.plugins.check_send(state, message)
        return not command.flow_control or self.paging.admits_now(message)

    def has_headroom(self, message: Message, margin: int) -> bool:
        """True when every usage ``message`` weighs on has ``margin`` bytes to spare: a
        transport may then admit it before the sends it has under way are charged."""
        paging = self.paging
        for destination in message.destination.components():
            if not paging.memory_usage(destination).has_room(margin):
                return False
        return not message.persistent or paging.usage.store.has_room(margin)

    def memory_full(self, destination: Destination) -> bool:
        """The destination's memory is full (a windowed producer's ack then waits)."""
        return self.paging.memory_usage(destination).full

    async def route_admitted(self, commands: Sequence[SendMessage]) -> None:
        """The second half: store and deliver admitted sends, in order, as one batch (a
        transport may hand over the sends it read together: each destination they reach is
        then dispatched once for all of them). Their store write is synced if any of them
        is waited for."""
        refused: DovecoteError | None = None
        if self.plugins.intercepts_sends:
            commands, refused = await self.plugins.untaken(commands)
        sync = any([command.sync for command in commands])
        await self.regions.route([command.message for command in commands], sync=sync)
        if refused is not None:
            raise refused

    async def publish(self, message: Message) -> None:
        """Send on the broker's own behalf (the admin API, the scheduler), under producer
        flow control; a temporary destination gone with its connection is refused."""
        for destination in message.destination.components():
            self.check_usable(destination)
        await self.paging.admit(message)
        await self.regions.route([message])

    async def deliver(self, messages: Sequence[Message]) -> None:
        """Route the broker's own messages now, without flow control (a plugin's replies)."""
        await self.regions.route(messages)

    async def offer(self, consumer_id: ConsumerId, messages: Sequence[Message]) -> None:
        """Give messages to one topic consumer alone, those its subscription matches
        (advisory replays, as ActiveMQ's targetConsumerId); nothing is stored."""
        record = self._consumers.get(consumer_id)
        if record is not None and isinstance(record.origin, TopicSubscription):
            await self.regions.offer(record.origin, messages)

    async def delete_destination(self, destination: Destination) -> bool:
        """Remove a destination with its messages and subscriptions; False if unknown."""
        known = destination in self.regions.queues or destination in self.regions.topic_subs
        known = known or destination in self.regions.topic_stats
        await self._remove_destination(destination)
        return known

    def written(self, connection_id: ConnectionId) -> None:
        """The connection's transport has handed what it was given to its socket (or has
        little left to): its auto-acking consumers have room again."""
        state = self._connections.get(connection_id)
        if state is None:
            return
        origins: list[Queue | TopicSubscription] = []
        for consumer_id in state.consumers:
            record = self._consumers.get(consumer_id)
            if record is not None and record.consumer.unwritten:
                record.consumer.written()
                origin = record.origin
                # Only where something waits: a lone consumer keeping up empties its queue
                # with every message, and a task to find nothing was most of this.
                if origin is not None and origin.waiting:
                    origins.append(origin)
        if origins:
            task = asyncio.get_running_loop().create_task(self._dispatch_all(origins))
            task.add_done_callback(log_failure("a dispatch after a write"))

    async def _dispatch_all(self, origins: list[Queue | TopicSubscription]) -> None:
        for origin in origins:
            await self.regions.dispatch(origin)

    async def wait_for_room(self, message: Message) -> None:
        """Return once the usages ``message`` weighs on have room (never raises if full)."""
        with contextlib.suppress(ResourceLimitError):
            await self.paging.admit(message)

    # -- consumers -------------------------------------------------------------------------

    async def _add_consumer(
        self, state: ConnectionState, info: ConsumerInfo, accepted: Accepted = None
    ) -> None:
        if info.consumer_id in self._consumers:
            raise BrokerError(f"consumer {info.consumer_id} already exists")
        destination = info.destination
        if destination.is_composite and destination.is_queue:
            raise InvalidDestinationError(f"cannot consume from composite queue {destination}")
        self.check_usable(destination)
        owner = self._temp_owners.get(destination)
        if owner is not None and owner != state.info.connection_id:
            raise BrokerError(
                f"cannot consume from temporary destination {destination} of another connection"
            )
        await self.plugins.on_add_consumer(state, info)
        info = self.settings.policies.for_destination(destination).configure_prefetch(info)
        consumer = Consumer(info, state.sink)
        record = ConsumerRecord(consumer, await attach.attach(self.regions, state, consumer))
        self._consumers[info.consumer_id] = record
        state.consumers.add(info.consumer_id)
        await self.regions.announce_created()
        await self.plugins.on_consumer_added(state, info)
        if accepted is not None:
            accepted()  # answered before the first dispatch, as ActiveMQ answers
        await self.regions.dispatch(record.origin)

    async def _remove_consumer(
        self,
        state: ConnectionState,
        consumer_id: ConsumerId,
        last_delivered: int = LAST_DELIVERED_UNKNOWN,
    ) -> None:
        record = self._consumers.get(consumer_id)
        origin, returned = self._detach_consumer(state, consumer_id)
        await attach.give_back(self.dead_letters, origin, returned, last_delivered)
        await self.regions.dispatch(origin)
        if record is not None:
            await self.plugins.on_remove_consumer(state, record.consumer.info)

    def _detach_consumer(
        self, state: ConnectionState, consumer_id: ConsumerId
    ) -> tuple[Origin, list[Entry]]:
        """Unregister a consumer; return its origin and the entries to redeliver."""
        record = self._consumers.pop(consumer_id, None)
        state.consumers.discard(consumer_id)
        self._cancel_pull_timer(consumer_id)
        if record is None:
            return None, []
        return attach.detach(self.regions, state, record)

    # -- dispatch --------------------------------------------------------------------------

    async def _pull(self, pull: MessagePull) -> None:
        record = self._record(pull.consumer_id)
        consumer = record.consumer
        consumer.pulls += 1
        await self.regions.dispatch(record.origin)
        if consumer.pulls == 0:
            return
        if pull.timeout < 0:
            consumer.pulls -= 1
            consumer.sink(MessageDispatch(pull.consumer_id, None))
        elif pull.timeout > 0:
            self._cancel_pull_timer(pull.consumer_id)
            loop = asyncio.get_running_loop()
            self._pull_timers[pull.consumer_id] = loop.call_later(
                pull.timeout / 1000, self._pull_timed_out, consumer
            )

    def _pull_timed_out(self, consumer: Consumer) -> None:
        self._pull_timers.pop(consumer.info.consumer_id, None)
        if consumer.pulls > 0:
            consumer.pulls -= 1
            consumer.sink(MessageDispatch(consumer.info.consumer_id, None))

    def _cancel_pull_timer(self, consumer_id: ConsumerId) -> None:
        timer = self._pull_timers.pop(consumer_id, None)
        if timer is not None:
            timer.cancel()

    # -- acks ------------------------------------------------------------------------------

    def _record(self, consumer_id: ConsumerId) -> ConsumerRecord:
        record = self._consumers.get(consumer_id)
        if record is None:
            raise UnknownSubscriptionError(f"no consumer {consumer_id}")
        return record

    async def _ack(self, state: ConnectionState, ack: MessageAck) -> None:
        record = self._record(ack.consumer_id)
        origin = await settle_ack(self.regions, self.dead_letters, state, record, ack)
        if origin is not None:
            await self.regions.dispatch(origin)

    async def ack_together(
        self, connection_id: ConnectionId, acks: Sequence[MessageAck]
    ) -> list[DovecoteError]:
        """Acks a transport read together and nobody waits for: each is settled in order,
        and each queue or subscription they make room on is dispatched once after all of
        them (not once per ack). An ack that fails does not stop the others; the errors
        come back, in order."""
        state = self._connections.get(connection_id)
        if state is None:
            return [BrokerError(f"connection {connection_id} is not open")]
        errors: list[DovecoteError] = []
        origins: dict[int, Queue | TopicSubscription] = {}
        for ack in acks:
            try:
                record = self._record(ack.consumer_id)
                origin = await settle_ack(self.regions, self.dead_letters, state, record, ack)
            except DovecoteError as exc:
                errors.append(exc)
                continue
            if origin is not None:
                origins[id(origin)] = origin
        for origin in origins.values():
            await self.regions.dispatch(origin)
        return errors

    # -- redelivery, expiry, dead letters --------------------------------------------------

    async def _sweep_expired_forever(self) -> None:
        period = self.settings.expire_messages_period_ms / 1000
        while True:
            await asyncio.sleep(period)
            try:
                await self.dead_letters.sweep_expired()
            except Exception:  # the sweep must go on; the failure is logged with its trace
                log.exception("expiry sweep failed")

    # -- transactions ----------------------------------------------------------------------

    async def _transaction(self, state: ConnectionState, info: TransactionInfo) -> None:
        tid = info.transaction_id
        if info.type is TransactionType.BEGIN:
            if tid in state.transactions:
                raise BrokerError(f"transaction {tid.value} is already open")
            state.transactions[tid] = LocalTransaction(tid)
            return
        tx = state.transactions.pop(tid, None)
        if tx is None:
            raise UnknownTransactionError(f"transaction {tid.value} is not open")
        if info.type is TransactionType.COMMIT:
            await transactions.commit(self.regions, tx)
            await self.plugins.after_commit(state, tx)
        else:
            live = self._consumers
            await transactions.rollback(self.dead_letters, tx, info.redeliver_acked, live)
