"""The broker: connections, consumers, acks and transactions, over the regions.

Protocol adapters register a connection with a sink for dispatches, then feed it core
commands through ``process``, one at a time per connection, awaiting each: a persistent
send returns only once the store holds it (SPEC M7), so the adapter's receipt or response
follows. Everything runs on one asyncio loop; no locks.

Ownership is a tree: the broker owns the ``Regions`` (queues and topic subscriptions, which
own their pending entries) and the connection states; consumers own what is in flight to
them. ``_consumers`` is an index from consumer id to where that consumer draws from, not a
second owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from itertools import count

from dovecote.broker import stats, streams
from dovecote.broker.acks import settle_ack
from dovecote.broker.connection import (
    NO_PEER,
    ConnectionState,
    ConsumerRecord,
    LocalTransaction,
    Origin,
    Peer,
)
from dovecote.broker.consumer import Consumer, DispatchSink, Entry, handed_over, release_all
from dovecote.broker.plugins import BrokerPlugin, PluginChain
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.query import BrokerQuery
from dovecote.broker.queue import Queue
from dovecote.broker.regions import Regions, log_failure, now_ms
from dovecote.broker.topic import TopicSubscription, pending_limit
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
from dovecote.core.destinations import Destination, destination_matches, topic
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
from dovecote.core.message import BodyType, Message
from dovecote.store.api import (
    AddSubscription,
    DurableSubscription,
    PagedRecovery,
    PagingStore,
    PersistenceAdapter,
    RecoveredState,
    RemoveDestination,
    RemoveSubscription,
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
        self.ids = IdGenerator()
        self._connections: dict[ConnectionId, ConnectionState] = {}
        self._client_ids: dict[str, ConnectionId] = {}
        self._consumers: dict[ConsumerId, ConsumerRecord] = {}
        self._pull_timers: dict[ConsumerId, asyncio.TimerHandle] = {}
        self._temp_owners: dict[Destination, ConnectionId] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._advisory_producer = f"{self.ids.next_name()}:0:0"
        self._advisory_seq = count(1)
        self.statistics_producer = f"{self.ids.next_name()}:0:0"
        self.query = BrokerQuery(self)
        """The read-only view for everything outside broker/ (admin API, metrics, plugins)."""

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
        log.info(
            "recovered %d queues and %d durable subscriptions",
            len(recovered.queues),
            len(recovered.subscriptions),
        )
        if self.settings.expire_messages_period_ms > 0:
            self._sweeper = asyncio.create_task(self._sweep_expired_forever())
        await self.plugins.start(self)

    async def stop(self) -> None:
        await self.plugins.stop()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for connection_id in list(self._connections):
            await self.remove_connection(connection_id)
        await self.store.stop()
        self.regions.temp.close()

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
        return state

    def connections(self) -> Iterator[ConnectionState]:
        return iter(self._connections.values())

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
            await self.regions.rollback(tx, True, self._consumers)
        for origin, entries in returned:
            await self._give_back(origin, entries, last_delivered)
        for info in infos:
            await self.plugins.on_remove_consumer(state, info)
        for producer_id in list(state.producers):
            await self.plugins.on_remove_producer(state, producer_id)
        for destination in list(state.temp_destinations):
            await self._remove_destination(destination)
        await self.plugins.on_disconnect(state)

    async def process(self, connection_id: ConnectionId, command: Command) -> None:
        state = self._connections.get(connection_id)
        if state is None:
            if isinstance(command, RemoveInfo) and isinstance(command.object_id, ConnectionId):
                return  # closing a closed connection (ShutdownInfo after RemoveInfo) is fine
            raise BrokerError(f"connection {connection_id} is not open")
        match command:
            case SendMessage():
                await self._send(state, command)
            case MessageAck():
                await self._ack(state, command)
            case MessagePull():
                await self._pull(command)
            case ConsumerInfo():
                await self._add_consumer(state, command)
            case ProducerInfo(producer_id=producer_id, destination=destination):
                await self.plugins.on_add_producer(state, command)
                state.producers[producer_id] = destination
            case SessionInfo(session_id=session_id):
                state.sessions.add(session_id)
            case TransactionInfo():
                await self._transaction(state, command)
            case RemoveInfo(object_id=object_id, last_delivered_sequence=last_delivered):
                await self._remove(state, object_id, last_delivered)
            case RemoveSubscriptionInfo():
                await self._remove_durable(command.client_id, command.subscription_name)
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

    def temp_destination_open(self, destination: Destination) -> bool:
        return destination in self._temp_owners

    def _check_usable(self, destination: Destination) -> None:
        if destination.is_temporary and destination not in self._temp_owners:
            raise InvalidDestinationError(
                f"temporary destination {destination} does not exist (its connection closed)"
            )

    async def _add_temp_destination(self, state: ConnectionState, destination: Destination) -> None:
        if not destination.is_temporary:
            if destination.is_queue:
                self.regions.queue(destination)
            return
        owner = self._temp_owners.setdefault(destination, state.info.connection_id)
        if owner != state.info.connection_id:
            raise BrokerError(f"temporary destination {destination} belongs to another connection")
        if destination not in state.temp_destinations:
            state.temp_destinations.add(destination)
            await self.regions.route([self._temp_advisory(owner, destination, add=True)])

    async def _remove_destination(self, destination: Destination) -> None:
        owner = self._temp_owners.pop(destination, None)
        if owner is not None and owner in self._connections:
            self._connections[owner].temp_destinations.discard(destination)
        if owner is not None:
            await self.regions.route([self._temp_advisory(owner, destination, add=False)])
        queue = self.regions.queues.pop(destination, None)
        if queue is not None:
            for consumer in list(queue.consumers):
                self._consumers.pop(consumer.info.consumer_id, None)
                self._cancel_pull_timer(consumer.info.consumer_id)
                release_all(consumer.take_back())
            release_all(queue.remove_pending())
            self.regions.forget_stored(queue)
            await self.store.write([RemoveDestination(destination)])
        for sub in self.regions.topic_subs.pop(destination, []):
            release_all(sub.detach())
            release_all(sub.remove_pending())
            if sub.consumer is not None:
                self._consumers.pop(sub.consumer.info.consumer_id, None)

    def _temp_advisory(self, owner: ConnectionId, destination: Destination, add: bool) -> Message:
        """ActiveMQ.Advisory.TempQueue/TempTopic: clients that watch advisories (the JMS
        client by default) learn which temporary destinations exist (SPEC D3)."""
        kind = "TempQueue" if destination.is_queue else "TempTopic"
        return Message(
            message_id=f"{self._advisory_producer}:{next(self._advisory_seq)}",
            destination=topic(f"ActiveMQ.Advisory.{kind}"),
            body_type=BodyType.MESSAGE,
            type="Advisory",
            timestamp=now_ms(),
            properties={"originBrokerName": self.settings.broker_name},
            data_structure=DestinationInfo(owner, destination, add),
        )

    def _replay_temp_advisories(self, record: ConsumerRecord) -> list[Message]:
        """A new advisory subscriber first learns of the temporary destinations that exist."""
        if not isinstance(record.origin, TopicSubscription):
            return []
        wanted = [d for d in self._temp_owners if destination_matches(record.origin.destination,
            topic("ActiveMQ.Advisory.TempQueue" if d.is_queue else "ActiveMQ.Advisory.TempTopic")
        )]  # fmt: skip
        return [self._temp_advisory(self._temp_owners[d], d, add=True) for d in wanted]

    # -- sending ---------------------------------------------------------------------------

    async def _send(self, state: ConnectionState, command: SendMessage) -> None:
        message = command.message
        for destination in message.destination.components():
            self._check_usable(destination)
        if self.plugins.checks_sends:
            self.plugins.check_send(state, message)
        if self.plugins.intercepts_sends and await self.plugins.on_send(state, command):
            return  # a plugin took it over (the scheduler holds it back)
        if message.reply_to is not None:
            # Requests to the broker itself: nothing is routed for them.
            name = message.destination.name
            if name.startswith(stats.STATISTICS_PREFIX):
                await self.regions.route(stats.statistics_replies(self, message))
                return
            if name.startswith(streams.STREAM_PREFIX):
                await self.regions.route(await streams.handle(self, message))
                return
        if command.transaction_id is not None:
            state.transaction_of(command).sends.append(message)
            return
        if command.flow_control and not self.regions.admits_now(message):
            await self.regions.admit(message)
        await self.regions.route([message], sync=command.sync)

    async def admit_send(self, connection_id: ConnectionId, command: SendMessage) -> None:
        """The first half of a pipelined send (a persistent send nobody waits for): check
        it and apply flow control now, so that the connection's reading waits while the
        broker is full, and leave the store write to ``route_admitted``. Transports call
        the two halves in order for each send and may run several second halves at once;
        group commit then shares one fsync among them, and their enqueue order is the
        order of their writes."""
        if not self.admit_send_now(connection_id, command):
            await self.regions.admit(command.message)

    def admit_send_now(self, connection_id: ConnectionId, command: SendMessage) -> bool:
        """``admit_send`` when nothing need wait (as for nearly every send): True once the
        send is admitted; False when the caller must await ``admit_send`` instead."""
        state = self._connections.get(connection_id)
        if state is None:
            raise BrokerError(f"connection {connection_id} is not open")
        message = command.message
        for destination in message.destination.components():
            self._check_usable(destination)
        if self.plugins.checks_sends:
            self.plugins.check_send(state, message)
        return not command.flow_control or self.regions.admits_now(message)

    def has_headroom(self, message: Message, margin: int) -> bool:
        """True when every usage ``message`` weighs on has ``margin`` bytes to spare: a
        transport may then admit it before the sends it has under way are charged."""
        regions = self.regions
        for destination in message.destination.components():
            if not regions.memory_usage(destination).has_room(margin):
                return False
        return not message.persistent or regions.usage.store.has_room(margin)

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
        """Send on the broker's own behalf (the admin API), under producer flow control."""
        await self.regions.admit(message)
        await self.regions.route([message])

    async def delete_destination(self, destination: Destination) -> bool:
        """Remove a destination with its messages and subscriptions; False if unknown."""
        known = destination in self.regions.queues or destination in self.regions.topic_subs
        known = known or destination in self.regions.topic_stats
        self.regions.topic_stats.pop(destination, None)
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
                record.consumer.unwritten = 0
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
        """Return once the usages ``message`` weighs on have room (to release a held-back
        producer ack); never raises for a full store."""
        with contextlib.suppress(ResourceLimitError):
            await self.regions.admit(message)

    # -- consumers -------------------------------------------------------------------------

    async def _add_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        if info.consumer_id in self._consumers:
            raise BrokerError(f"consumer {info.consumer_id} already exists")
        destination = info.destination
        if destination.is_composite and destination.is_queue:
            raise InvalidDestinationError(
                f"cannot consume from composite destination {destination}"
            )
        self._check_usable(destination)
        owner = self._temp_owners.get(destination)
        if owner is not None and owner != state.info.connection_id:
            raise BrokerError(
                f"cannot consume from temporary destination {destination} of another connection"
            )
        await self.plugins.on_add_consumer(state, info)
        consumer = Consumer(info, state.sink)
        if info.browser:
            await self._browse(consumer)
            record = ConsumerRecord(consumer, None)
        elif destination.is_queue:
            queue = self.regions.queue(destination)
            queue.add_consumer(consumer)
            record = ConsumerRecord(consumer, queue)
        elif info.subscription_name:
            record = ConsumerRecord(consumer, await self._attach_durable(state, consumer))
        else:
            limit = pending_limit(
                self.settings.policies.for_destination(destination).pending_message_limit,
                info.maximum_pending_message_limit,
            )
            sub = TopicSubscription(destination, consumer, pending_limit=limit)
            record = ConsumerRecord(consumer, self.regions.add_topic_subscription(sub))
        self._consumers[info.consumer_id] = record
        state.consumers.add(info.consumer_id)
        if destination.is_topic and "ActiveMQ.Advisory.Temp" in destination.name:
            for advisory in self._replay_temp_advisories(record):
                assert isinstance(record.origin, TopicSubscription)
                self.regions.offer(record.origin, advisory)
        await self.regions.dispatch(record.origin)

    async def _attach_durable(
        self, state: ConnectionState, consumer: Consumer
    ) -> TopicSubscription:
        info = consumer.info
        if state.info.client_id is None:
            raise BrokerError("a durable subscription needs a client id on its connection")
        assert info.subscription_name is not None
        key = (state.client_id, info.subscription_name)
        wanted = DurableSubscription(
            state.client_id, info.subscription_name, info.destination, info.selector, info.no_local
        )
        sub = self.regions.durables.get(key)
        if sub is not None and sub.consumer is not None:
            raise BrokerError(f"durable subscription {key[1]!r} of {key[0]!r} is already active")
        if sub is not None and sub.durable != wanted:
            # A changed destination or selector makes a new subscription (as in ActiveMQ).
            await self._remove_durable(*key)
            sub = None
        if sub is None:
            await self.store.write([AddSubscription(wanted)])
            sub = self.regions.add_topic_subscription(
                TopicSubscription(info.destination, durable=wanted)
            )
        sub.consumer = consumer
        return sub

    async def _remove_durable(self, client_id: str, name: str) -> None:
        sub = self.regions.durables.get((client_id, name))
        if sub is None:
            raise UnknownSubscriptionError(f"no durable subscription {name!r} for {client_id!r}")
        if sub.consumer is not None:
            raise BrokerError(f"durable subscription {name!r} is in use")
        self.regions.drop_topic_subscription(sub)
        assert sub.durable is not None
        await self.store.write([RemoveSubscription(sub.durable.destination, client_id, name)])

    async def _remove_consumer(
        self,
        state: ConnectionState,
        consumer_id: ConsumerId,
        last_delivered: int = LAST_DELIVERED_UNKNOWN,
    ) -> None:
        record = self._consumers.get(consumer_id)
        origin, returned = self._detach_consumer(state, consumer_id)
        await self._give_back(origin, returned, last_delivered)
        await self.regions.dispatch(origin)
        if record is not None:
            await self.plugins.on_remove_consumer(state, record.consumer.info)

    async def _give_back(self, origin: Origin, entries: list[Entry], last_delivered: int) -> None:
        """Return a leaving consumer's messages: those its application was handed are
        redelivered (counted), those it only prefetched go back in place as they were."""
        if origin is None or not entries:
            return
        seen, unseen = handed_over(entries, last_delivered, isinstance(origin, Queue))
        if unseen:
            origin.requeue(unseen)
        await self.regions.redeliver(origin, seen)

    def _detach_consumer(
        self, state: ConnectionState, consumer_id: ConsumerId
    ) -> tuple[Origin, list[Entry]]:
        """Unregister a consumer; return its origin and the entries to redeliver."""
        record = self._consumers.pop(consumer_id, None)
        state.consumers.discard(consumer_id)
        self._cancel_pull_timer(consumer_id)
        origin = record.origin if record else None
        if record is None or origin is None:
            return None, []
        # Messages acked in an open transaction stay with it until commit or rollback.
        held = {
            e.message_id
            for tx in state.transactions.values()
            for ack in tx.acks
            if ack.record is record
            for e in ack.entries
        }
        if isinstance(origin, Queue):
            returned = origin.remove_consumer(record.consumer)
        else:
            returned = origin.detach()
            if origin.durable is None:
                self.regions.drop_topic_subscription(origin)
                # A non-durable subscription's messages go with it.
                release_all(returned)
                release_all(origin.remove_pending())
                return origin, []
        return origin, [e for e in returned if e.message_id not in held]

    async def _browse(self, consumer: Consumer) -> None:
        destination = consumer.info.destination
        if destination.is_queue and destination in self.regions.queues:
            now = self.regions.clock()
            for message in self.regions.browse(self.regions.queues[destination]):
                if not message.is_expired(now) and consumer.matches(message):
                    consumer.sink(MessageDispatch(consumer.info.consumer_id, message))
        consumer.sink(MessageDispatch(consumer.info.consumer_id, None))

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
        origin = await settle_ack(self.regions, state, self._record(ack.consumer_id), ack)
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
                origin = await settle_ack(self.regions, state, self._record(ack.consumer_id), ack)
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
                await self.regions.sweep_expired()
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
            await self.regions.commit(tx)
            await self.plugins.after_commit(state, tx)
        else:
            await self.regions.rollback(tx, info.redeliver_acked, self._consumers)
