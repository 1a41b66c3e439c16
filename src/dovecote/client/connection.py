"""A JMS-style client over OpenWire (SPEC K1), the sync API: ConnectionFactory, Connection,
Session, MessageProducer, MessageConsumer, messages.

It does what the seeds describe the Java client doing: a send is synchronous (waits for the
broker's Response) only by the seeds' rule (S1); each consumer keeps an unconsumed buffer
filled by the broker up to its prefetch, and acknowledges with a standard ack per message in
AUTO mode, or every message delivered in the session at ``acknowledge()`` in CLIENT mode.
This is the first slice: text, bytes and map messages, queues, topics and temporary
queues, auto/client/individual acks, listeners, transactions; see the issue for what is
still to come (asyncio API, failover, redelivery policy on the client, optimizeAcknowledge,
browsers).
"""

from __future__ import annotations

import itertools
import queue
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from dovecote.client.options import ConnectionOptions, parse_broker_url
from dovecote.client.transport import ClientTransport, JMSError, TransportClosedError
from dovecote.core.destinations import Destination, DestinationType
from dovecote.core.message import BodyType
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import (
    destination_of,
    destination_structure,
    message_id_structure,
    message_id_text,
)

if TYPE_CHECKING:
    from dovecote.client.advisories import TempDestinationWatcher
from dovecote.protocol.openwire.primitives import (
    decode_map,
    decode_stream_body,
    decode_text_body,
    encode_map,
    encode_stream_body,
    encode_text_body,
)

BROWSE_TIMEOUT_S = 30.0
WINDOW_WAIT_S = 60.0
SEEN_LIMIT = 10_000
"""How many delivered message ids each consumer remembers to suppress duplicates."""
PULL_GRACE_S = 30.0
"""How long past its timeout a pull waits for the broker's answer before giving up."""


class AckMode(IntEnum):
    SESSION_TRANSACTED = 0
    AUTO_ACKNOWLEDGE = 1
    CLIENT_ACKNOWLEDGE = 2
    DUPS_OK_ACKNOWLEDGE = 3
    INDIVIDUAL_ACKNOWLEDGE = 4


@dataclass
class Message:
    """A received or to-be-sent message. ``body`` is text for text messages, bytes else."""

    body: str | bytes | dict[str, Any] | list[Any] = b""
    """str: a TextMessage; bytes: a BytesMessage (an ObjectMessage's serialized bytes when
    ``object_body``); dict: a MapMessage; list: a StreamMessage."""
    object_body: bool = False
    """The bytes are a serialized Java object. They are passed on, never deserialized here:
    object bodies stay opaque unless the application trusts and decodes them (SPEC K1)."""
    properties: dict[str, Any] = field(default_factory=dict)
    correlation_id: str | None = None
    type: str | None = None
    reply_to: Destination | None = None
    priority: int = 4
    persistent: bool = True
    message_id: str | None = None
    destination: Destination | None = None
    timestamp: int = 0
    expiration: int = 0
    redelivered: bool = False
    redelivery_counter: int = 0
    _session: Session | None = field(default=None, repr=False)
    _ack_id: Structure | None = field(default=None, repr=False)
    _consumer: MessageConsumer | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        if isinstance(self.body, dict | list):
            raise TypeError("a map or stream message has no text")
        return self.body if isinstance(self.body, str) else self.body.decode("utf-8")

    def acknowledge(self) -> None:
        """CLIENT mode: acknowledge every message delivered so far in the session;
        INDIVIDUAL mode: this message only."""
        if self._session is None:
            return
        if self._session.ack_mode is AckMode.INDIVIDUAL_ACKNOWLEDGE and self._consumer:
            self._session.acknowledge_one(self._consumer, self._ack_id)
        else:
            self._session.acknowledge()


def _content(body: str | bytes | dict[str, Any] | list[Any]) -> bytes | None:
    if isinstance(body, str):
        return encode_text_body(body)
    if isinstance(body, dict):
        return encode_map(body) if body else None
    if isinstance(body, list):
        return encode_stream_body(body) if body else None
    return body or None


def _message_type(message: Message) -> int:
    body = message.body
    if isinstance(body, str):
        return t.TEXT_MESSAGE
    if isinstance(body, dict):
        return t.MAP_MESSAGE
    if isinstance(body, list):
        return t.STREAM_MESSAGE
    return t.OBJECT_MESSAGE if message.object_body else t.BYTES_MESSAGE


class ConnectionFactory:
    def __init__(self, url: str = "tcp://127.0.0.1:61616") -> None:
        self.url = parse_broker_url(url)

    def create_connection(self, user: str | None = None, password: str | None = None) -> Connection:
        return Connection(self, user, password)


class Connection:
    """One JMS connection. With a ``failover:`` URL it survives the loss of its broker (SPEC
    K2): sends and requests wait while it reconnects with back-off across the URIs, then it
    replays its connection, sessions, producers and consumers; prefetched messages the broker
    will redeliver are dropped; an open transaction is in doubt and its commit fails with
    TransactionRolledBackException; a message the application already saw under AUTO
    acknowledgement is not handed to it again."""

    _ids = itertools.count(1)

    def __init__(self, factory: ConnectionFactory, user: str | None, password: str | None) -> None:
        url = factory.url
        self.url = url
        self.options: ConnectionOptions = url.connection
        # Random per connection: forked processes (Spark's Python workers) share counters.
        self.connection_id = f"ID:dovecote-py-{uuid.uuid4().hex[:16]}-{next(self._ids)}"
        self.client_id = self.options.clientID or self.connection_id
        self._user = user or self.options.userName
        self._password = password or self.options.password
        self._consumers: dict[tuple[int, int], MessageConsumer] = {}
        self._sessions: list[Session] = []
        self._session_ids = itertools.count(1)
        self._producer_ids = itertools.count(1)
        self._producers: dict[int, MessageProducer] = {}
        self._temp_ids = itertools.count(1)
        self.failure: Exception | None = None
        self.async_error: JMSError | None = None
        """The last asynchronous command the broker refused (a ConnectionError)."""
        self.closed = False
        self.reconnects = 0
        self._connected = threading.Event()
        self._reconnecting = threading.Lock()
        self.transport = self._open_transport(url.endpoints[0])
        self._connected.set()
        self.temp_watcher: TempDestinationWatcher | None = None
        if self.options.watchTopicAdvisories:
            from dovecote.client.advisories import TempDestinationWatcher

            self.temp_watcher = TempDestinationWatcher(self)

    def check_usable(self, destination: Destination, verb: str) -> None:
        """Refuse a temporary destination the advisories say was deleted."""
        if self.temp_watcher is not None:
            self.temp_watcher.check(destination, verb)

    def _open_transport(self, endpoint: tuple[str, str, int]) -> ClientTransport:
        _scheme, host, port = endpoint
        transport = ClientTransport(host, port, self.url.wire_format, self.url.transport,
                                    self._on_command, self._on_failure)  # fmt: skip
        transport.connect()
        transport.request(Structure(t.CONNECTION_INFO, {
            "connectionId": Structure(t.CONNECTION_ID, {"value": self.connection_id}),
            "clientId": self.client_id, "userName": self._user, "password": self._password,
            "failoverReconnect": self.reconnects > 0,
        }))  # fmt: skip
        return transport

    # -- sending through whichever transport is current ------------------------------------

    def request(self, structure: Structure, timeout: float | None = None) -> Structure:
        while True:
            try:
                return self.transport.request(structure, timeout)
            except TransportClosedError:
                self._await_reconnect()

    def oneway(self, structure: Structure) -> None:
        while True:
            try:
                self.transport.oneway(structure)
                return
            except (TransportClosedError, OSError):
                self._await_reconnect()

    def _await_reconnect(self) -> None:
        if self.url.failover is None or self.closed:
            raise TransportClosedError(str(self.failure or "the connection is closed"))
        timeout = self.url.failover.timeout
        if not self._connected.wait(timeout / 1000 if timeout > 0 else None):
            raise TransportClosedError("failover timed out waiting for a broker")
        if self.closed:
            raise TransportClosedError("the connection is closed")

    # -- failover --------------------------------------------------------------------------

    def _reconnect(self) -> None:
        failover = self.url.failover
        assert failover is not None
        delay = failover.initialReconnectDelay / 1000
        attempts = 0
        while not self.closed:
            endpoints = list(self.url.endpoints)
            if failover.randomize:
                random.shuffle(endpoints)
            for endpoint in endpoints:
                try:
                    transport = self._open_transport(endpoint)
                except (OSError, JMSError):
                    continue
                self.transport = transport
                self.reconnects += 1
                self.failure = None
                try:
                    self._replay_state()
                except (OSError, JMSError):
                    continue  # lost again while replaying: try the next broker
                # Only now may waiting sends go on: producers and consumers exist again.
                self._connected.set()
                return
            attempts += 1
            if 0 <= failover.maxReconnectAttempts <= attempts:
                self.closed = True
                self._connected.set()  # wake the waiters: they will find it closed
                self._wake_consumers()
                return
            time.sleep(delay)
            if failover.useExponentialBackOff:
                delay = min(delay * failover.backOffMultiplier, failover.maxReconnectDelay / 1000)

    def _replay_state(self) -> None:
        transport = self.transport
        for session in self._sessions:
            transport.oneway(Structure(t.SESSION_INFO, {"sessionId": session._sid()}))
            session._connection_lost()
        for producer in self._producers.values():
            transport.request(producer._info())
        for consumer in list(self._consumers.values()):
            consumer._drop_prefetched()
            transport.request(consumer._info())

    def _wake_consumers(self) -> None:
        for consumer in list(self._consumers.values()):
            consumer._buffer.put(None)

    # -- from the transport ----------------------------------------------------------------

    def start(self) -> None:
        """Dispatch is always on; kept for the JMS shape."""

    def create_session(
        self, transacted: bool = False, ack_mode: AckMode = AckMode.AUTO_ACKNOWLEDGE
    ) -> Session:
        session = Session(self, next(self._session_ids), transacted, ack_mode)
        self._sessions.append(session)
        return session

    def _on_command(self, s: Structure) -> None:
        if s.type == t.PRODUCER_ACK:
            producer = self._producers.get(s["producerId"]["value"]) if s["producerId"] else None
            if producer is not None:
                producer._acked(s.get("size", 0))
            return
        if s.type == t.MESSAGE_DISPATCH:
            c = s["consumerId"]
            consumer = self._consumers.get((c["sessionId"], c["value"]))
            if consumer is not None:
                consumer._dispatched(s)

    def _on_failure(self, exc: Exception) -> None:
        if isinstance(exc, JMSError):
            # A ConnectionError: an asynchronous command failed; the connection is fine.
            self.async_error = exc
            return
        self.failure = exc
        if self.url.failover is not None and not self.closed:
            if self._reconnecting.acquire(blocking=False):
                self._connected.clear()

                def run() -> None:
                    try:
                        self._reconnect()
                    finally:
                        self._reconnecting.release()

                threading.Thread(target=run, name="dovecote-failover", daemon=True).start()
            return
        self._wake_consumers()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._connected.set()
        try:
            self.transport.request(Structure(t.REMOVE_INFO, {
                "objectId": Structure(t.CONNECTION_ID, {"value": self.connection_id}),
                "lastDeliveredSequenceId": -1,
            }), timeout=self.options.closeTimeout / 1000)  # fmt: skip
            self.transport.oneway(Structure(t.SHUTDOWN_INFO))
        except (OSError, JMSError, TimeoutError):
            pass
        finally:
            self.transport.close()
            self._wake_consumers()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Session:
    def __init__(
        self, connection: Connection, session_id: int, transacted: bool, ack_mode: AckMode
    ) -> None:
        self.connection = connection
        self.session_id = session_id
        self.transacted = transacted
        self.ack_mode = AckMode.SESSION_TRANSACTED if transacted else ack_mode
        self._producer_ids = itertools.count(1)
        self._consumer_ids = itertools.count(1)
        self._tx_ids = itertools.count(1)
        self._tx: Structure | None = None
        self._delivered: list[tuple[MessageConsumer, Structure]] = []
        self._lock = threading.Lock()
        self.has_listener = False
        self._in_doubt = False
        connection.oneway(Structure(t.SESSION_INFO, {"sessionId": self._sid()}))

    def _sid(self) -> Structure:
        return Structure(t.SESSION_ID, {"connectionId": self.connection.connection_id,
                                        "value": self.session_id})  # fmt: skip

    @staticmethod
    def queue(name: str) -> Destination:
        return Destination(DestinationType.QUEUE, name)

    @staticmethod
    def topic(name: str) -> Destination:
        return Destination(DestinationType.TOPIC, name)

    def create_producer(self, destination: Destination | None = None) -> MessageProducer:
        # Producer ids are unique per connection, so ProducerAcks find their producer.
        return MessageProducer(self, next(self.connection._producer_ids), destination)

    def create_consumer(self, destination: Destination, selector: str | None = None,
                        prefetch: int | None = None) -> MessageConsumer:  # fmt: skip
        self.connection.check_usable(destination, "consume from")
        return MessageConsumer(self, next(self._consumer_ids), destination, selector, prefetch)

    def browse(self, destination: Destination, selector: str | None = None) -> Iterator[Message]:
        """A queue browser (SPEC C9): every message now on the queue, none consumed."""
        prefetch = self.connection.options.prefetchPolicy.queueBrowserPrefetch
        browser = MessageConsumer(self, next(self._consumer_ids), destination, selector,
                                  prefetch, browser=True)  # fmt: skip
        try:
            while True:
                dispatch = browser._buffer.get(timeout=BROWSE_TIMEOUT_S)
                if dispatch is None or dispatch["message"] is None:
                    return
                yield browser._to_message(dispatch)
        finally:
            browser.close()

    # -- transactions ----------------------------------------------------------------------

    def _transaction_id(self) -> Structure | None:
        if not self.transacted:
            return None
        if self._tx is None:
            connection_id = Structure(t.CONNECTION_ID, {"value": self.connection.connection_id})
            self._tx = Structure(t.LOCAL_TRANSACTION_ID, {
                "value": next(self._tx_ids), "connectionId": connection_id,
            })  # fmt: skip
            self.connection.oneway(self._tx_info(0))
        return self._tx

    def _tx_info(self, kind: int) -> Structure:
        return Structure(t.TRANSACTION_INFO, {
            "connectionId": Structure(t.CONNECTION_ID, {"value": self.connection.connection_id}),
            "transactionId": self._tx, "type": kind,
        })  # fmt: skip

    def _connection_lost(self) -> None:
        """Failover replayed this session: an open transaction died with the old broker."""
        if self._tx is not None:
            self._tx = None
            self._in_doubt = True

    def commit(self) -> None:
        if not self.transacted:
            raise JMSError("javax.jms.IllegalStateException", "not a transacted session")
        if self._in_doubt:
            self._in_doubt = False
            self.rollback()
            raise JMSError(
                "javax.jms.TransactionRolledBackException",
                "the transaction was in doubt after a failover and has been rolled back",
            )
        self._transaction_id()
        self._ack_delivered(2)
        self.connection.request(self._tx_info(2))
        self._tx = None

    def rollback(self) -> None:
        if not self.transacted:
            raise JMSError("javax.jms.IllegalStateException", "not a transacted session")
        if self._tx is not None:
            self.connection.request(self._tx_info(4))
            self._tx = None
        with self._lock:
            delivered, self._delivered = self._delivered, []
        policy = self.connection.options.redeliveryPolicy
        for consumer, dispatch in reversed(delivered):
            counter = dispatch.get("redeliveryCounter", 0) + 1
            if 0 <= policy.maximumRedeliveries < counter:
                # Redelivery exhausted (R2): a poison ack sends it to the dead-letter queue.
                consumer._ack([dispatch], 1, None)
                continue
            consumer._redeliver_locally(dispatch, policy.delay_ms(counter) / 1000)

    # -- acks ------------------------------------------------------------------------------

    def acknowledge(self) -> None:
        self._ack_delivered(2)

    def acknowledge_one(self, consumer: MessageConsumer, message_id: Structure | None) -> None:
        with self._lock:
            match = [
                d
                for c, d in self._delivered
                if c is consumer and d["message"]["messageId"] is message_id
            ]
            self._delivered = [(c, d) for c, d in self._delivered if not any(d is m for m in match)]
        if match:
            consumer._ack(match, 4, None)

    def create_temporary_queue(self) -> Destination:
        """A queue that lives as long as the connection (D1)."""
        name = f"{self.connection.connection_id}:{next(self.connection._temp_ids)}"
        destination = Destination(DestinationType.TEMP_QUEUE, name)
        self._temp_destination(destination, 0)
        return destination

    def create_temporary_topic(self) -> Destination:
        """A topic that lives as long as the connection (D1)."""
        name = f"{self.connection.connection_id}:{next(self.connection._temp_ids)}"
        destination = Destination(DestinationType.TEMP_TOPIC, name)
        self._temp_destination(destination, 0)
        return destination

    def delete_temporary(self, destination: Destination) -> None:
        """TemporaryQueue.delete(): the broker removes it and tells every connection."""
        self._temp_destination(destination, 1)

    def _temp_destination(self, destination: Destination, operation: int) -> None:
        self.connection.request(Structure(t.DESTINATION_INFO, {
            "connectionId": Structure(t.CONNECTION_ID, {"value": self.connection.connection_id}),
            "destination": destination_structure(destination), "operationType": operation,
        }))  # fmt: skip
        # Our own advisory may still be on its way: know our own destinations at once.
        watcher = self.connection.temp_watcher
        if watcher is not None:
            (watcher.active.add if operation == 0 else watcher.active.discard)(destination)

    def _ack_delivered(self, ack_type: int) -> None:
        with self._lock:
            delivered, self._delivered = self._delivered, []
        by_consumer: dict[int, list[Structure]] = {}
        owners: dict[int, MessageConsumer] = {}
        for consumer, dispatch in delivered:
            by_consumer.setdefault(id(consumer), []).append(dispatch)
            owners[id(consumer)] = consumer
        for key, dispatches in by_consumer.items():
            owners[key]._ack(dispatches, ack_type, self._tx if self.transacted else None)

    def close(self) -> None:
        if self.transacted and self._tx is not None:
            self.rollback()


class MessageProducer:
    def __init__(self, session: Session, producer_id: int, destination: Destination | None) -> None:
        self.session = session
        self.destination = destination
        self.delivery_persistent = True
        self.priority = 4
        self.time_to_live = 0
        self._seq = itertools.count(1)
        self.window = session.connection.options.producerWindowSize
        self._outstanding = 0
        self._window_free = threading.Condition()
        session.connection._producers[producer_id] = self
        self._pid = Structure(t.PRODUCER_ID, {
            "connectionId": session.connection.connection_id, "value": producer_id,
            "sessionId": session.session_id,
        })  # fmt: skip
        self.destination_structure = destination_structure(destination)
        session.connection.request(self._info())

    def _info(self) -> Structure:
        return Structure(t.PRODUCER_INFO, {
            "producerId": self._pid, "destination": self.destination_structure,
            "windowSize": self.window,
        })  # fmt: skip

    def send(self, message: Message | str | bytes, destination: Destination | None = None,
             persistent: bool | None = None, priority: int | None = None,
             time_to_live: int | None = None) -> None:  # fmt: skip
        if not isinstance(message, Message):
            message = Message(body=message)
        target = destination or self.destination
        if target is None:
            raise JMSError("javax.jms.InvalidDestinationException", "no destination to send to")
        self.session.connection.check_usable(target, "send to")
        persistent = self.delivery_persistent if persistent is None else persistent
        ttl = self.time_to_live if time_to_live is None else time_to_live
        now = int(time.time() * 1000)
        seq = next(self._seq)
        pid = self._pid
        message_id = f"{pid['connectionId']}:{pid['sessionId']}:{pid['value']}:{seq}"
        body = message.body
        code = _message_type(message)
        fields: dict[str, Any] = {
            "producerId": pid, "destination": destination_structure(target),
            "transactionId": self.session._transaction_id(),
            "messageId": message_id_structure(message_id),
            "correlationId": message.correlation_id, "persistent": persistent,
            "expiration": now + ttl if ttl > 0 else 0,
            "priority": self.priority if priority is None else priority,
            "replyTo": destination_structure(message.reply_to), "timestamp": now,
            "type": message.type,
            "content": _content(body),
            "marshalledProperties": encode_map(message.properties) if message.properties else None,
        }  # fmt: skip
        structure = Structure(code, fields)
        message.message_id = message_id
        connection = self.session.connection
        if self._sync(persistent):
            send_timeout = connection.options.sendTimeout
            try:
                connection.request(structure, send_timeout / 1000 if send_timeout > 0 else None)
            except TimeoutError:
                raise JMSError(
                    "org.apache.activemq.RequestTimedOutIOException",
                    f"no answer to the send within sendTimeout={send_timeout} ms",
                ) from None
            return
        if self.window > 0:
            # The producer window (SPEC S3): async sends wait while the broker has not
            # acknowledged (ProducerAck) window-size bytes of earlier ones.
            size = 1024 + len(fields["content"] or b"") + len(fields["marshalledProperties"] or b"")
            with self._window_free:
                while self._outstanding and self._outstanding + size > self.window:
                    if not self._window_free.wait(WINDOW_WAIT_S):
                        raise JMSError("javax.jms.JMSException", "producer window never freed")
                self._outstanding += size
        connection.oneway(structure)

    def _acked(self, size: int) -> None:
        with self._window_free:
            self._outstanding = max(0, self._outstanding - size)
            self._window_free.notify_all()

    def _sync(self, persistent: bool) -> bool:
        """The seeds' rule (SPEC S1): async only with no send timeout, alwaysSyncSend off,
        and (non-persistent, or useAsyncSend, or a transacted session)."""
        o = self.session.connection.options
        if o.sendTimeout > 0 or o.alwaysSyncSend:
            return True
        return not (not persistent or o.useAsyncSend or self.session.transacted)


class MessageConsumer:
    def __init__(
        self,
        session: Session,
        consumer_id: int,
        destination: Destination,
        selector: str | None,
        prefetch: int | None,
        browser: bool = False,
    ) -> None:
        self.session = session
        self.destination = destination
        policy = session.connection.options.prefetchPolicy
        self.prefetch = (
            prefetch
            if prefetch is not None
            else (policy.queuePrefetch if destination.is_queue else policy.topicPrefetch)
        )
        self._cid = Structure(t.CONSUMER_ID, {
            "connectionId": session.connection.connection_id, "sessionId": session.session_id,
            "value": consumer_id,
        })  # fmt: skip
        self._buffer: queue.Queue[Structure | None] = queue.Queue()
        self._last_delivered = -1  # broker sequence of the last message the app received
        self._listening = False
        self._resume_at = 0.0
        self._unacked: list[Structure] = []  # optimizeAcknowledge / DUPS_OK batch
        self._batch_started = 0.0
        options = session.connection.options
        if options.optimizeAcknowledge and self.prefetch > 0:
            self._batch_limit = max(1, int(0.65 * self.prefetch))
        elif destination.is_topic:
            self._batch_limit = max(1, int(0.5 * self.prefetch))
        else:
            self._batch_limit = 1
        session.connection._consumers[(session.session_id, consumer_id)] = self
        self._selector = selector
        self._browser = browser
        self._seen: OrderedDict[str, None] = OrderedDict()  # ids the application received
        session.connection.request(self._info())

    def _info(self) -> Structure:
        return Structure(t.CONSUMER_INFO, {
            "consumerId": self._cid, "destination": destination_structure(self.destination),
            "prefetchSize": self.prefetch, "selector": self._selector, "dispatchAsync": True,
            "priority": 0, "browser": self._browser,
        })  # fmt: skip

    def _drop_prefetched(self) -> None:
        """After a failover the new broker dispatches again what was only prefetched."""
        with self._buffer.mutex:
            self._buffer.queue.clear()
        self._unacked.clear()

    def _dispatched(self, dispatch: Structure) -> None:
        self._buffer.put(dispatch)

    def _redeliver_locally(self, dispatch: Structure, delay_s: float = 0.0) -> None:
        dispatch.fields["redeliveryCounter"] = dispatch.get("redeliveryCounter", 0) + 1
        # The redelivery policy's delay: nothing is handed out before it has passed.
        self._resume_at = max(self._resume_at, time.monotonic() + delay_s)
        with self._buffer.mutex:
            self._buffer.queue.appendleft(dispatch)
            self._buffer.not_empty.notify()

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (None: forever)."""
        if self.session.has_listener:
            # The seeds (C1): a session with a listener refuses synchronous receive.
            raise JMSError(
                "javax.jms.IllegalStateException",
                "cannot receive synchronously in a session that has a listener",
            )
        return self._next(timeout)

    def set_message_listener(self, listener: Callable[[Message], None]) -> None:
        """Deliver every message to ``listener`` on a thread of its own, acked as received."""
        self.session.has_listener = True
        self._listening = True

        def run() -> None:
            while self._listening:
                try:
                    message = self._next(None)
                except JMSError:
                    return  # the connection failed or closed: the listener ends with it
                if message is None:
                    return
                listener(message)

        threading.Thread(target=run, name="dovecote-listener", daemon=True).start()

    def _next(self, timeout: float | None) -> Message | None:
        pause = self._resume_at - time.monotonic()
        if pause > 0:
            time.sleep(pause if timeout is None else min(pause, timeout))
            if timeout is not None and pause > timeout:
                return None
        if self.prefetch == 0:
            # Pull: the broker answers with the message or, when the timeout passes, an empty
            # dispatch; wait for that answer, not for a local clock (as the Java client does).
            self.session.connection.oneway(Structure(t.MESSAGE_PULL, {
                "consumerId": self._cid, "destination": destination_structure(self.destination),
                "timeout": -1 if timeout == 0 else int((timeout or 0) * 1000),
            }))  # fmt: skip
            wait = None if timeout is None else timeout + PULL_GRACE_S
            try:
                dispatch = self._buffer.get(timeout=wait)
            except queue.Empty:
                return None
        else:
            try:
                if timeout == 0:
                    dispatch = self._buffer.get_nowait()
                else:
                    dispatch = self._buffer.get(timeout=timeout)
            except queue.Empty:
                return None
        if dispatch is None or dispatch["message"] is None:
            if self.session.connection.failure is not None:
                raise JMSError("javax.jms.JMSException", str(self.session.connection.failure))
            return None
        message = self._to_message(dispatch)
        mode = self.session.ack_mode
        if message.message_id in self._seen and mode is AckMode.AUTO_ACKNOWLEDGE:
            # Seen and acked before a failover: ack it again for the broker, hide it from the
            # application (duplicate suppression, SPEC C7/K2).
            self._ack([dispatch], 2, None)
            return self._next(timeout)
        if message.message_id is not None:
            self._seen[message.message_id] = None
            if len(self._seen) > SEEN_LIMIT:
                self._seen.popitem(last=False)
        self._last_delivered = dispatch["message"]["messageId"].get("brokerSequenceId", -1)
        if mode is AckMode.AUTO_ACKNOWLEDGE or mode is AckMode.DUPS_OK_ACKNOWLEDGE:
            self._auto_ack(dispatch, mode)
        else:
            with self.session._lock:
                self.session._delivered.append((self, dispatch))
        return message

    def _auto_ack(self, dispatch: Structure, mode: AckMode) -> None:
        """One standard ack per message, or one per batch (SPEC C6): optimizeAcknowledge
        batches 0.65 x prefetch (or what came within optimizeAcknowledgeTimeOut), DUPS_OK on
        topics 0.5 x prefetch."""
        options = self.session.connection.options
        batching = (options.optimizeAcknowledge and self.prefetch > 0) or (
            mode is AckMode.DUPS_OK_ACKNOWLEDGE and self.destination.is_topic
        )
        if not batching:
            self._ack([dispatch], 2, None)
            return
        if not self._unacked:
            self._batch_started = time.monotonic()
        self._unacked.append(dispatch)
        timed_out = (
            options.optimizeAcknowledge
            and time.monotonic() - self._batch_started >= options.optimizeAcknowledgeTimeOut / 1000
        )
        if len(self._unacked) >= self._batch_limit or timed_out:
            self._flush_acks()

    def _flush_acks(self) -> None:
        if self._unacked:
            batch, self._unacked = self._unacked, []
            self._ack(batch, 2, None)

    def receive_no_wait(self) -> Message | None:
        return self.receive(0)

    def _to_message(self, dispatch: Structure) -> Message:
        m = dispatch["message"]
        content = m["content"] or b""
        body: str | bytes | dict[str, Any] | list[Any]
        if m.type == t.TEXT_MESSAGE:
            body = decode_text_body(content) if content else ""
        elif m.type == t.MAP_MESSAGE:
            body = decode_map(content) if content else {}
        elif m.type == t.STREAM_MESSAGE:
            body = decode_stream_body(content) if content else []
        else:
            body = content
        counter = dispatch.get("redeliveryCounter", 0)
        return Message(
            body=body,
            object_body=m.type == t.OBJECT_MESSAGE,
            properties=decode_map(m["marshalledProperties"]) if m["marshalledProperties"] else {},
            correlation_id=m["correlationId"], type=m["type"],
            reply_to=destination_of(m["replyTo"]), priority=m.get("priority", 4),
            persistent=bool(m["persistent"]), message_id=message_id_text(m["messageId"]),
            destination=destination_of(m["destination"]), timestamp=m.get("timestamp", 0),
            expiration=m.get("expiration", 0), redelivered=counter > 0, redelivery_counter=counter,
            _session=self.session, _ack_id=m["messageId"], _consumer=self,
        )  # fmt: skip

    def _ack(self, dispatches: list[Structure], ack_type: int, tx: Structure | None) -> None:
        ids = [d["message"]["messageId"] for d in dispatches]
        self.session.connection.oneway(Structure(t.MESSAGE_ACK, {
            "destination": destination_structure(self.destination), "transactionId": tx,
            "consumerId": self._cid, "ackType": ack_type, "firstMessageId": ids[0],
            "lastMessageId": ids[-1], "messageCount": len(ids),
        }))  # fmt: skip

    def close(self) -> None:
        self._listening = False
        self._flush_acks()
        self._buffer.put(None)
        self.session.connection._consumers.pop((self._cid["sessionId"], self._cid["value"]), None)
        # Prefetched messages after the last one the application saw are not redelivered.
        self.session.connection.oneway(Structure(t.REMOVE_INFO, {
            "objectId": self._cid, "lastDeliveredSequenceId": self._last_delivered,
        }))  # fmt: skip


__all__ = [
    "AckMode", "BodyType", "Connection", "ConnectionFactory", "Message", "MessageConsumer",
    "MessageProducer", "Session",
]  # fmt: skip
