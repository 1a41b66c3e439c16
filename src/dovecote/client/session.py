"""Session: producers, consumers, durable subscribers, browsers, transactions, recover and
acknowledgement (compatibility K1), as ActiveMQSession does them: acks belong to each consumer's
delivered messages; a transaction's commit acks them in the transaction, a rollback or
recover hands them out again locally; closing a session closes everything in it and tells
the broker once, with the last broker sequence any of its consumers delivered."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dovecote.client.channel import Empty
from dovecote.client.consumer import MessageConsumer
from dovecote.client.destination_options import AnyDestination, OptionedDestination, split_options
from dovecote.client.message import AckMode, Message
from dovecote.client.producer import MessageProducer
from dovecote.client.transport import JMSError, TransactionRolledBackException, TransportClosedError
from dovecote.core.destinations import Destination, DestinationType
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.structures import destination_structure

if TYPE_CHECKING:
    from dovecote.client.connection import Connection

BROWSE_TIMEOUT_S = 30.0
OPTIMIZE_DURABLE_TOPIC_PREFETCH = 1000  # ActiveMQPrefetchPolicy's default
# TransactionInfo.type
BEGIN, COMMIT_ONE_PHASE, ROLLBACK = 0, 2, 4


class Session:
    def __init__(
        self, connection: Connection, session_id: int, transacted: bool, ack_mode: AckMode
    ) -> None:
        self.connection = connection
        self.session_id = session_id
        self.transacted = transacted
        self.ack_mode = AckMode.SESSION_TRANSACTED if transacted else ack_mode
        self._consumer_ids = itertools.count(1)
        self._tx: Structure | None = None
        self._consumers: list[MessageConsumer] = []
        self._producers: list[MessageProducer] = []
        self._registered: list[MessageConsumer] = []  # consumed in the open transaction
        self._close_after_tx: list[MessageConsumer] = []
        self._dispatch_lock = threading.RLock()  # one listener call at a time per session
        self.closed = False
        self._tx_interruptions = 0  # the connection's interruption count when _tx began
        self._in_doubt = False
        """A failover interrupted the transaction: its commit rolls back and raises."""
        self.last_delivered_sequence_id = -2  # as ActiveMQSession: below any consumer's
        connection.oneway(Structure(t.SESSION_INFO, {"sessionId": self._sid()}))

    def _sid(self) -> Structure:
        return Structure(t.SESSION_ID, {"connectionId": self.connection.connection_id,
                                        "value": self.session_id})  # fmt: skip

    @property
    def has_listener(self) -> bool:
        """A consumer of the session has a listener: no synchronous receive then (C1)."""
        return any(c.message_listener is not None for c in self._consumers)

    def _check_open(self) -> None:
        if self.closed:
            raise JMSError("javax.jms.IllegalStateException", "The Session is closed")

    @staticmethod
    def queue(name: str) -> AnyDestination:
        """A queue; ``name?consumer.prefetchSize=0&consumer.exclusive=true`` sets options of
        the consumers created on it (they are not part of the name the broker sees)."""
        return OptionedDestination.parse(DestinationType.QUEUE, name)

    @staticmethod
    def topic(name: str) -> AnyDestination:
        """A topic; options as for ``queue``."""
        return OptionedDestination.parse(DestinationType.TOPIC, name)

    # -- producers and consumers ---------------------------------------------------------

    def create_producer(self, destination: AnyDestination | None = None) -> MessageProducer:
        self._check_open()
        # Producer ids are unique per connection, so ProducerAcks find their producer.
        producer = MessageProducer(self, next(self.connection._producer_ids), destination)
        self._producers.append(producer)
        return producer

    def create_consumer(
        self,
        destination: AnyDestination,
        selector: str | None = None,
        prefetch: int | None = None,
        *,
        no_local: bool = False,
        exclusive: bool | None = None,
        priority: int = 0,
    ) -> MessageConsumer:
        """A consumer. ``no_local``: not the messages this connection sent (topics);
        ``exclusive``: the queue's only receiver while it lives (None: the URL's
        ``jms.exclusiveConsumer``); ``priority``: served before
        lower-priority consumers of the queue."""
        self._check_open()
        self.connection.check_usable(split_options(destination)[0], "consume from")
        return MessageConsumer(
            self, next(self._consumer_ids), destination, selector, prefetch,
            no_local=no_local, exclusive=exclusive, priority=priority,
        )  # fmt: skip

    def create_durable_subscriber(
        self,
        topic: AnyDestination,
        name: str,
        selector: str | None = None,
        no_local: bool = False,
        prefetch: int | None = None,
    ) -> MessageConsumer:
        """A durable topic subscription ``name`` of this connection's client id: the broker
        keeps its messages while no subscriber is connected; the same name reconnects it."""
        self._check_open()
        if not self.connection.client_id_set:
            raise JMSError(
                "javax.jms.IllegalStateException",
                "You cannot create a durable subscriber without specifying a unique clientID "
                "on a Connection",
            )
        if not split_options(topic)[0].is_topic:
            raise JMSError(
                "javax.jms.InvalidDestinationException", "a durable subscriber needs a topic"
            )
        if prefetch is None:
            # As ActiveMQSession: an AUTO session with optimizedMessageDispatch (the default)
            # uses the optimized durable prefetch (options.py may not carry these yet).
            options, policy = self.connection.options, self.connection.options.prefetchPolicy
            optimized = getattr(options, "optimizedMessageDispatch", True)
            if self.ack_mode is AckMode.AUTO_ACKNOWLEDGE and optimized:
                prefetch = int(getattr(policy, "optimizeDurableTopicPrefetch",
                                       OPTIMIZE_DURABLE_TOPIC_PREFETCH))  # fmt: skip
        return MessageConsumer(self, next(self._consumer_ids), topic, selector, prefetch,
                               no_local=no_local, subscription_name=name)  # fmt: skip

    def unsubscribe(self, name: str) -> None:
        """Delete the durable subscription ``name`` (it must have no active subscriber)."""
        self._check_open()
        connection_id = Structure(t.CONNECTION_ID, {"value": self.connection.connection_id})
        self.connection.request(Structure(t.REMOVE_SUBSCRIPTION_INFO, {
            "connectionId": connection_id, "subcriptionName": name,
            "clientId": self.connection.client_id,
        }))  # fmt: skip

    def browse(self, destination: AnyDestination, selector: str | None = None) -> Iterator[Message]:
        """A queue browser (compatibility C9): every message now on the queue, none consumed. As the
        Java QueueBrowser: it sees nothing while the connection is not started, each message
        it reads is "consumed" by its browser consumer as the session's mode says (acks the
        broker ignores for browsers), and once done it commits a transacted session's open
        transaction."""
        self._check_open()
        browser = MessageConsumer(self, next(self._consumer_ids), destination, selector,
                                  None, browser=True)  # fmt: skip
        try:
            while self.connection.started:
                try:
                    dispatch = browser._buffer.get(BROWSE_TIMEOUT_S)
                except Empty:
                    return
                if dispatch is None or dispatch["message"] is None:
                    return
                expired = browser._expired(dispatch)
                browser._before_consumed(dispatch)
                message = browser._to_message(dispatch)
                browser._after_consumed(dispatch, expired)
                if not expired:
                    yield message
        finally:
            if self.transacted and self._tx is not None and not self.closed:
                self.commit()
            browser.close()

    def _forget(self, consumer: MessageConsumer) -> None:
        if consumer in self._consumers:
            self._consumers.remove(consumer)
        cid = consumer.consumer_id
        self.connection._consumers.pop((cid["sessionId"], cid["value"]), None)

    def _start(self) -> None:
        for consumer in list(self._consumers):
            consumer._start()

    def _stop(self) -> None:
        for consumer in list(self._consumers):
            consumer._stop()
        with self._dispatch_lock:
            pass  # a listener call in progress has returned

    # -- transactions ----------------------------------------------------------------------

    def _transaction_id(self) -> Structure | None:
        if not self.transacted:
            return None
        if self._interrupted():
            # Its broker is gone: what follows goes into a transaction on the new broker,
            # and the commit rolls both back (the application's unit of work is broken).
            self._in_doubt = True
            self._tx = None
        if self._tx is None:
            connection_id = Structure(t.CONNECTION_ID, {"value": self.connection.connection_id})
            # Counted before the BEGIN goes: a failover under it leaves the transaction in doubt.
            self._tx_interruptions = self.connection.interruptions
            self._tx = Structure(t.LOCAL_TRANSACTION_ID, {
                "value": next(self.connection._local_tx_ids), "connectionId": connection_id,
            })  # fmt: skip
            self.connection.oneway(self._tx_info(BEGIN))
        return self._tx

    def _interrupted(self) -> bool:
        """The open transaction began before the connection's latest failover."""
        return self._tx is not None and self._tx_interruptions != self.connection.interruptions

    def transaction_value(self) -> str:
        """The open transaction's number, as the broker names it (begun now if none is
        open): dovecote's Append stream requests name the transaction they join by it."""
        tx = self._transaction_id()
        if tx is None:
            raise JMSError("javax.jms.IllegalStateException", "Not a transacted session")
        return str(tx["value"])

    def _tx_info(self, kind: int) -> Structure:
        return Structure(t.TRANSACTION_INFO, {
            "connectionId": Structure(t.CONNECTION_ID, {"value": self.connection.connection_id}),
            "transactionId": self._tx, "type": kind,
        })  # fmt: skip

    def _register(self, consumer: MessageConsumer) -> None:
        """A consumer consumed in the transaction: it acks at commit, redelivers at rollback."""
        self._transaction_id()
        if consumer not in self._registered:
            self._registered.append(consumer)

    def commit(self) -> None:
        """Commit the open transaction. One a failover interrupted (as Java's rollback-only
        transaction) is rolled back instead, here and on the broker, and this raises
        TransactionRolledBackException: the broker redelivers its messages."""
        self._check_open()
        if not self.transacted:
            raise JMSError("javax.jms.IllegalStateException", "Not a transacted session")
        if self._in_doubt or self._interrupted():
            self._rollback()
            raise TransactionRolledBackException(
                "the transaction was interrupted by a failover and has been rolled back"
            )
        registered, self._registered = self._registered, []
        for consumer in registered:
            consumer.acknowledge()
        if self._tx is not None:
            info = self._tx_info(COMMIT_ONE_PHASE)
            try:
                self.connection.request_within(info, self._tx_interruptions)
            except TransportClosedError:
                # As Java's failover: a commit a failover overtook is in doubt, rolled back.
                self._registered = registered
                self._rollback()
                raise TransactionRolledBackException(
                    "the transaction's completion is in doubt after a failover; rolled back"
                ) from None
            finally:
                self._tx = None
        for consumer in registered:
            consumer._commit()
        self._after_transaction()

    def rollback(self) -> None:
        self._check_open()
        if not self.transacted:
            raise JMSError("javax.jms.IllegalStateException", "Not a transacted session")
        self._rollback()

    def _rollback(self) -> None:
        registered, self._registered = self._registered, []
        self._in_doubt = False
        if self._interrupted():
            self._tx = None  # began on a broker the connection lost: nothing to roll back there
        interruptions = self.connection.interruptions
        for consumer in self._consumers if interruptions else ():
            consumer._forget_lost(interruptions)
        # As the Java client: the delivered messages are acked in the transaction first, the
        # rollback then undoes those acks with the rest of it.
        for consumer in registered:
            consumer.acknowledge()
        if self._tx is not None:
            info = self._tx_info(ROLLBACK)
            try:
                self.connection.request_within(info, self._tx_interruptions)
            except TransportClosedError:
                pass  # its broker is gone, and the transaction with it
            finally:
                self._tx = None
        for consumer in registered:
            consumer._rollback()
        self._after_transaction()

    def _close_after_transaction(self, consumer: MessageConsumer) -> None:
        if consumer not in self._close_after_tx:
            self._close_after_tx.append(consumer)

    def _after_transaction(self) -> None:
        closing, self._close_after_tx = self._close_after_tx, []
        for consumer in closing:
            consumer._close_now()

    # -- acks ------------------------------------------------------------------------------

    def recover(self) -> None:
        """Hand out again, marked redelivered, every message delivered in this session and
        not acknowledged, after the redelivery policy's delay (Session.recover())."""
        self._check_open()
        if self.transacted:
            raise JMSError("javax.jms.IllegalStateException", "This session is transacted")
        for consumer in list(self._consumers):
            consumer._rollback()

    def acknowledge(self) -> None:
        """CLIENT mode: acknowledge every message delivered so far in the session."""
        self._check_open()
        for consumer in list(self._consumers):
            consumer.acknowledge()

    def _send_ack(self, ack: Structure, lazy: bool = False) -> None:
        """As ActiveMQSession.sendAck: one-way unless ``jms.sendAcksAsync=false``, when the
        ack waits for the broker's answer (a refused one raises here); a transacted
        session's and a rollback's (``lazy``) acks are one-way whatever it says."""
        # On the transport's reader thread (an ack of a message expired on arrival) waiting
        # would wait for itself: one-way there too.
        on_reader = threading.current_thread().name == "dovecote-client-reader"
        tx = ack["transactionId"]
        if tx is not None and tx is self._tx and self._interrupted():
            return  # its transaction died with the broker it began on: nothing to ack there
        if lazy or self.connection.options.sendAcksAsync or self.transacted or on_reader:
            self.connection.oneway(ack)
        else:
            self.connection.request(ack)

    # -- temporary destinations -------------------------------------------------------------

    def create_temporary_queue(self) -> Destination:
        """A queue that lives as long as the connection (D1)."""
        return self._create_temporary(DestinationType.TEMP_QUEUE)

    def create_temporary_topic(self) -> Destination:
        """A topic that lives as long as the connection (D1)."""
        return self._create_temporary(DestinationType.TEMP_TOPIC)

    def _create_temporary(self, kind: DestinationType) -> Destination:
        self._check_open()
        name = f"{self.connection.connection_id}:{next(self.connection._temp_ids)}"
        destination = Destination(kind, name)
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

    # -- close -----------------------------------------------------------------------------

    def _dispose(self) -> None:
        """Close locally (ActiveMQSession.dispose): consumers and producers closed without
        telling the broker, an open transaction rolled back."""
        if self.closed:
            return
        # As the session executor's close: no further listener call, the current one ends.
        for consumer in list(self._consumers):
            consumer._stop()
        with self._dispatch_lock:
            self._dispose_now()

    def _dispose_now(self) -> None:
        for consumer in list(self._consumers) + self._close_after_tx:
            consumer._dispose()
            self.last_delivered_sequence_id = max(
                self.last_delivered_sequence_id, consumer.last_delivered_sequence_id
            )
        self._consumers.clear()
        for producer in self._producers:
            producer._dispose()
        self._producers.clear()
        if self._tx is not None:
            with contextlib.suppress(JMSError, OSError, TimeoutError):
                self._rollback()
        self._close_after_tx.clear()
        self.closed = True
        if self in self.connection._sessions:
            self.connection._sessions.remove(self)

    def close(self) -> None:
        """Close the session and everything in it; the broker removes its consumers and
        producers and redelivers what they had not acknowledged."""
        if self.closed:
            return
        self._dispose()
        self.connection.oneway(Structure(t.REMOVE_INFO, {
            "objectId": self._sid(), "lastDeliveredSequenceId": self.last_delivered_sequence_id,
        }))  # fmt: skip

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
