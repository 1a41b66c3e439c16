"""A JMS-style client over OpenWire (compatibility K1), the sync API: ConnectionFactory and
Connection here; Session, MessageProducer, MessageConsumer and Message in their modules.

It does what ActiveMQ's Java client 5.17 does: a send is synchronous (waits for the
broker's Response) only by the seeds' rule (S1); a connection delivers nothing until
``start()``; each consumer keeps an unconsumed buffer filled by the broker up to its
prefetch and acknowledges as its session's mode says (consumer.py); closing a connection
closes its sessions and tells the broker the last message it delivered.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from dovecote.client.consumer import MessageConsumer
from dovecote.client.ids import IdGenerator
from dovecote.client.message import AckMode, Message
from dovecote.client.options import ConnectionOptions, parse_broker_url
from dovecote.client.producer import MessageProducer
from dovecote.client.session import Session
from dovecote.client.threads import start_daemon
from dovecote.client.transport import ClientTransport, JMSError, TransportClosedError
from dovecote.core.destinations import Destination
from dovecote.core.message import BodyType
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t

if TYPE_CHECKING:
    from dovecote.client.advisories import TempDestinationWatcher

log = logging.getLogger("dovecote.client")


class ConnectionFactory:
    def __init__(self, url: str = "tcp://127.0.0.1:61616") -> None:
        self.url = parse_broker_url(url)
        options = self.url.connection
        # One generator of each per factory, as ActiveMQConnectionFactory keeps them.
        self.client_ids = IdGenerator(options.clientIDPrefix) if options.clientIDPrefix else None
        self.connection_ids = (
            IdGenerator(options.connectionIDPrefix) if options.connectionIDPrefix else None
        )

    def create_connection(
        self, user: str | None = None, password: str | None = None, client_id: str | None = None
    ) -> Connection:
        """A connection, stopped: nothing is delivered to its consumers until ``start()``."""
        return Connection(self, user, password, client_id)


class Connection:
    """One JMS connection. With a ``failover:`` URL it survives the loss of its broker
    (compatibility K2): sends and requests wait while it reconnects with back-off across the URIs,
    then it replays its connection, sessions, producers and consumers; prefetched messages the
    broker will redeliver are dropped; an open transaction is in doubt and its commit fails with
    TransactionRolledBackException; a message the application already saw under AUTO
    acknowledgement is not handed to it again."""

    _ids = itertools.count(1)

    def __init__(
        self,
        factory: ConnectionFactory,
        user: str | None,
        password: str | None,
        client_id: str | None = None,
    ) -> None:
        url = factory.url
        self.url = url
        self.options: ConnectionOptions = url.connection
        if factory.connection_ids is not None:
            self.connection_id = factory.connection_ids.generate()
        else:
            # Random per connection: forked processes (Spark's Python workers) share counters.
            self.connection_id = f"ID:dovecote-py-{uuid.uuid4().hex[:16]}-{next(self._ids)}"
        self.client_id = client_id or self.options.clientID or ""
        if not self.client_id:  # as Java: a generated one only when none was given
            ids = factory.client_ids
            self.client_id = ids.generate() if ids is not None else self.connection_id
        self.client_id_set = bool(client_id or self.options.clientID)
        """Chosen by the application: durable subscriptions need it (as in JMS)."""
        self.started = False
        self._local_tx_ids = itertools.count(1)
        self._user = user or self.options.userName
        self._password = password or self.options.password
        self._consumers: dict[tuple[int, int], MessageConsumer] = {}
        self._sessions: list[Session] = []
        self._session_ids = itertools.count(1)
        self._producer_ids = itertools.count(1)
        self._producers: dict[int, MessageProducer] = {}
        self._temp_ids = itertools.count(1)
        self.failure: Exception | None = None
        self.exception_listener: Callable[[JMSError], None] | None = None
        """Told of the connection's failure and of commands the broker refused
        asynchronously (Connection.setExceptionListener); called on a thread of its own."""
        self.async_error: JMSError | None = None
        """The last asynchronous command the broker refused (a ConnectionError)."""
        self.closed = False
        self.reconnects = 0
        self.interruptions = 0
        """How many times the connection lost its broker (failover): a transaction begun
        before the latest loss died with that broker (Session checks it at commit)."""
        self._connected = threading.Event()
        self._reconnecting = threading.Lock()
        self._temp_destinations: dict[str, Structure] = {}
        """DestinationInfos of the temporary destinations this connection made, replayed
        after a failover before the consumers on them (ConnectionStateTracker's)."""
        self.transport = self._first_transport()
        self._connected.set()
        if self.transport.closed:  # lost before it was ours: its failure was not heard
            self._on_failure(self.transport.failed or TransportClosedError("lost"))
        self.temp_watcher: TempDestinationWatcher | None = None
        if self.options.watchTopicAdvisories:
            from dovecote.client.advisories import TempDestinationWatcher

            self.temp_watcher = TempDestinationWatcher(self)

    def check_usable(self, destination: Destination, verb: str) -> None:
        """Refuse a temporary destination the advisories say was deleted."""
        if self.temp_watcher is not None:
            self.temp_watcher.check(destination, verb)

    def _first_transport(self) -> ClientTransport:
        """As FailoverTransport's first connection: passes over the URIs (shuffled when
        ``randomize``), with the reconnect delays between them, until one connects or
        ``startupMaxReconnectAttempts`` passes failed (when it is -1, ``maxReconnectAttempts``;
        -1 there too: forever, bounded only by failover's ``timeout``); then the last
        failure is raised. A refused ConnectionInfo is the application's error: raised."""
        failover = self.url.failover
        if failover is None:
            return self._open_transport(self.url.endpoints[0])
        limit = failover.startupMaxReconnectAttempts
        if limit == -1:
            limit = failover.maxReconnectAttempts
        timeout = failover.timeout
        deadline = time.monotonic() + timeout / 1000 if timeout > 0 else None
        delay = failover.initialReconnectDelay / 1000
        failures = 0
        while True:
            endpoints = list(self.url.endpoints)
            if failover.randomize:
                random.shuffle(endpoints)
            for endpoint in endpoints:
                try:
                    return self._open_transport(endpoint)
                except OSError as exc:
                    failure = exc
            failures += 1  # as Java counts: 0 and 1 both mean one pass
            if limit != -1 and failures >= limit:
                raise failure
            if deadline is not None and time.monotonic() >= deadline:
                raise TransportClosedError(f"failover timed out connecting: {failure}")
            time.sleep(delay)
            if failover.useExponentialBackOff:
                delay = min(delay * failover.reconnectDelayExponent,
                            failover.maxReconnectDelay / 1000)  # fmt: skip

    def _open_transport(self, endpoint: tuple[str, str, int]) -> ClientTransport:
        _scheme, host, port = endpoint
        member = self.url.member(endpoint)  # this URI's own options (and failover's nested.*)
        opened: list[ClientTransport] = []

        def failed(exc: Exception) -> None:
            # Only the current transport's failure matters: one the first connection gave
            # up on (failover tries the next URI) must not start a reconnect.
            if opened and opened[0] is getattr(self, "transport", None):
                self._on_failure(exc)

        interruptions = self.interruptions

        def command(structure: Structure) -> None:
            self._on_command(structure, interruptions)

        transport = ClientTransport(host, port, member.wire_format, member.transport,
                                    command, failed)  # fmt: skip
        opened.append(transport)
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
            if self._stale_while_reconnecting(structure):
                return Structure(t.RESPONSE, {"correlationId": 0})  # as Java simulates it
            try:
                response = self.transport.request(structure, timeout)
            except TransportClosedError:
                if not self._stale_while_reconnecting(structure, check_only=True):
                    self._await_reconnect()
                continue
            if structure.type == t.DESTINATION_INFO and self.url.failover is not None:
                self._track_temp_destination(structure)
            return response

    def request_within(self, structure: Structure, interruptions: int) -> Structure:
        """A transaction's end, sent only on the broker the transaction began on (the
        connection not interrupted since ``interruptions``); a failover before or during it
        raises TransportClosedError: that broker's transaction is gone, its outcome unknown."""
        transport = self.transport  # read first: a new transport follows a new interruption
        if interruptions != self.interruptions:
            raise TransportClosedError("the connection failed over during the transaction")
        return transport.request(structure)

    def _track_temp_destination(self, info: Structure) -> None:
        destination = info["destination"]
        if destination is None or destination.type not in (t.TEMP_QUEUE, t.TEMP_TOPIC):
            return
        key = f"{destination.type}:{destination['physicalName']}"
        if info.get("operationType", 0) == 0:
            self._temp_destinations[key] = info
        else:
            self._temp_destinations.pop(key, None)

    def oneway(self, structure: Structure, flush: bool = True) -> None:
        """``flush=False``: the transport may hold the frame back (ClientTransport.oneway)."""
        while True:
            if self._stale_while_reconnecting(structure):
                return
            try:
                self.transport.oneway(structure, flush)
                return
            except (TransportClosedError, OSError):
                if not self._stale_while_reconnecting(structure, check_only=True):
                    self._await_reconnect()

    def _stale_while_reconnecting(self, structure: Structure, check_only: bool = False) -> bool:
        """As FailoverTransport.oneway while it has no transport: acks and removes are stale
        (the new broker redelivers, the replay leaves removed things out), a ShutdownInfo
        has nothing to shut, and a timed pull gets its empty answer; none of them waits.
        ``check_only``: whether it is so (the caller then goes round again, not waiting).
        A thread acking under a consumer's lock must not wait for the reconnect, which
        needs that lock to drop the consumer's prefetched messages."""
        if self.url.failover is None or self._connected.is_set() or self.closed:
            return False
        if structure.type == t.MESSAGE_PULL:
            if structure.get("timeout", 0) == 0:
                return False  # an untimed pull waits for the broker, as in Java
            if check_only:
                return True  # the loop's next turn answers it
            self._on_command(Structure(t.MESSAGE_DISPATCH, {
                "consumerId": structure["consumerId"], "destination": structure["destination"],
                "message": None,
            }))  # fmt: skip
            return True
        return structure.type in (t.MESSAGE_ACK, t.REMOVE_INFO, t.SHUTDOWN_INFO)

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
                except (OSError, JMSError) as exc:
                    # Lost again, or refused, while replaying: this transport is given up
                    # (left open, it would hold our client id on that broker, and the next
                    # attempt's ConnectionInfo would be refused for it); try the next broker.
                    self.failure = exc
                    self.interruptions += 1  # what was begun on it died with it
                    transport.close()
                    continue
                # Only now may waiting sends go on: producers and consumers exist again.
                self._connected.set()
                if self.started:
                    for consumer in list(self._consumers.values()):
                        consumer._start()
                return
            attempts += 1
            if 0 <= failover.maxReconnectAttempts <= attempts:
                self._tell_listener(
                    JMSError(
                        "javax.jms.JMSException",
                        f"failover gave up after {attempts} attempts: {self.failure}",
                    )
                )
                self.closed = True
                self._connected.set()  # wake the waiters: they will find it closed
                self._wake_consumers()
                return
            time.sleep(delay)
            if failover.useExponentialBackOff:
                delay = min(delay * failover.reconnectDelayExponent,
                            failover.maxReconnectDelay / 1000)  # fmt: skip

    def _replay_state(self) -> None:
        transport = self.transport
        # As ConnectionStateTracker: temporary destinations first, then what uses them; a
        # new broker has never heard of them, and refuses a consumer on one.
        for info in list(self._temp_destinations.values()):
            transport.request(info)
        for session in self._sessions:
            transport.oneway(Structure(t.SESSION_INFO, {"sessionId": session._sid()}))
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
        """Start (or restart) delivery to the connection's consumers and listeners."""
        if self.closed:
            raise JMSError("javax.jms.IllegalStateException", "The Connection is closed")
        if not self.started:
            self.started = True
            for session in list(self._sessions):
                session._start()

    def stop(self) -> None:
        """Pause delivery: receives wait, listeners are not called (and a listener call in
        progress has returned when this returns); prefetched messages wait in the client."""
        if self.started:
            self.started = False
            for session in list(self._sessions):
                session._stop()

    def create_session(
        self, transacted: bool = False, ack_mode: AckMode = AckMode.AUTO_ACKNOWLEDGE
    ) -> Session:
        session = Session(self, next(self._session_ids), transacted, ack_mode)
        self._sessions.append(session)
        return session

    def _on_command(self, s: Structure, interruptions: int = -1) -> None:
        """``interruptions``: the connection's count when the transport that read ``s``
        was opened (a transacted consumer tells the old broker's dispatches by it)."""
        if s.type == t.PRODUCER_ACK:
            producer = self._producers.get(s["producerId"]["value"]) if s["producerId"] else None
            if producer is not None:
                producer._acked(s.get("size", 0))
            return
        if s.type == t.MESSAGE_DISPATCH:
            c = s["consumerId"]
            consumer = self._consumers.get((c["sessionId"], c["value"]))
            if consumer is not None:
                consumer._dispatched(s, interruptions)

    def set_exception_listener(self, listener: Callable[[JMSError], None] | None) -> None:
        """As Connection.setExceptionListener: ``listener`` hears of the connection's loss
        (with failover: once it has given up) and of commands the broker refused without
        being asked for a response."""
        self.exception_listener = listener

    def _tell_listener(self, error: JMSError) -> None:
        listener = self.exception_listener
        if listener is None:
            return

        def run() -> None:
            try:
                listener(error)
            except Exception:  # the application's: as in Java, it does not stop the client
                log.warning("the connection's exception listener raised", exc_info=True)

        start_daemon(run, "dovecote-exception-listener")

    def _on_failure(self, exc: Exception) -> None:
        if isinstance(exc, JMSError):
            # A ConnectionError: an asynchronous command failed; the connection is fine.
            self.async_error = exc
            self._tell_listener(exc)
            return
        if not self.closed and self.url.failover is None:
            self._tell_listener(_as_jms_error(exc))
        self.failure = exc
        if self.url.failover is not None and not self.closed:
            # Before anything can reach a new broker: open transactions are in doubt now.
            self.interruptions += 1
            for consumer in list(self._consumers.values()):
                if consumer.session.transacted:
                    consumer._interrupted()
            if self._reconnecting.acquire(blocking=False):
                self._connected.clear()

                def run() -> None:
                    try:
                        self._reconnect()
                    finally:
                        self._reconnecting.release()
                    # The new transport may have failed before the lock was free, when its
                    # failure could start no reconnect: start one now, or sends would spin.
                    if self.transport.closed and not self.closed:
                        self._on_failure(self.failure or TransportClosedError("lost"))

                start_daemon(run, "dovecote-failover")
            return
        self._wake_consumers()

    def close(self) -> None:
        if self.closed:
            return
        self.stop()
        watcher = self.temp_watcher
        if watcher is not None and not watcher.closed:
            # As the Java AdvisoryConsumer's dispose: its own RemoveInfo, sequence unknown.
            watcher._dispose()
            with contextlib.suppress(OSError, JMSError):
                self.transport.oneway(Structure(t.REMOVE_INFO, {
                    "objectId": watcher.consumer_id, "lastDeliveredSequenceId": -2,
                }))  # fmt: skip
        # As ActiveMQConnection: sessions closed locally, the broker told once, with the last
        # broker sequence any of them delivered (the advisory watcher's session aside).
        last_delivered = -1
        for session in list(self._sessions):
            with contextlib.suppress(OSError, JMSError, TimeoutError):
                session._dispose()
            if self.temp_watcher is None or session is not self.temp_watcher.session:
                last_delivered = max(last_delivered, session.last_delivered_sequence_id)
        self.closed = True
        self._connected.set()
        try:
            self.transport.request(Structure(t.REMOVE_INFO, {
                "objectId": Structure(t.CONNECTION_ID, {"value": self.connection_id}),
                "lastDeliveredSequenceId": last_delivered,
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


__all__ = [
    "AckMode", "BodyType", "Connection", "ConnectionFactory", "Message", "MessageConsumer",
    "MessageProducer", "Session",
]  # fmt: skip


def _as_jms_error(exc: Exception) -> JMSError:
    """A transport's failure as the JMSException a Java listener gets (its IOException
    wrapped)."""
    return JMSError("javax.jms.JMSException", f"{type(exc).__name__}: {exc}")
