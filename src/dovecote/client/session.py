"""Session: producers, consumers, browsers, transactions and acknowledgement (SPEC K1)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dovecote.client.consumer import MessageConsumer
from dovecote.client.message import AckMode, Message
from dovecote.client.producer import MessageProducer
from dovecote.client.transport import JMSError
from dovecote.core.destinations import Destination, DestinationType
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import (
    destination_structure,
)

if TYPE_CHECKING:
    from dovecote.client.connection import Connection

BROWSE_TIMEOUT_S = 30.0


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
