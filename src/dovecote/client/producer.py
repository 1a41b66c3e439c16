"""MessageProducer: sends, synchronous or not by the seeds' rule (S1), within the producer
window (S3)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING, Any

from dovecote.client.destination_options import AnyDestination, split_options
from dovecote.client.message import Message, _content, _message_type, header_fields
from dovecote.client.transport import JMSError
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.structures import destination_structure, message_id_structure

if TYPE_CHECKING:
    from dovecote.client.session import Session

WINDOW_WAIT_S = 60.0


class MessageProducer:
    def __init__(
        self, session: Session, producer_id: int, destination: AnyDestination | None
    ) -> None:
        self.session = session
        # Options in a destination's name are the client's, never sent to the broker.
        self.destination = None if destination is None else split_options(destination)[0]
        self.delivery_persistent = True
        self.priority = 4
        self.time_to_live = 0
        self.disable_message_timestamp = session.connection.options.disableTimeStampsByDefault
        """MessageProducer.setDisableMessageTimestamp: sent with timestamp 0, and no
        expiration (Java computes it from the timestamp); the URL's default."""
        self._seq = itertools.count(1)
        self.window = session.connection.options.producerWindowSize
        self._outstanding = 0
        self.closed = False
        self._window_free = threading.Condition()
        session.connection._producers[producer_id] = self
        self._pid = Structure(t.PRODUCER_ID, {
            "connectionId": session.connection.connection_id, "value": producer_id,
            "sessionId": session.session_id,
        })  # fmt: skip
        self.destination_structure = destination_structure(self.destination)
        session.connection.request(self._info())

    def _info(self) -> Structure:
        return Structure(t.PRODUCER_INFO, {
            "producerId": self._pid, "destination": self.destination_structure,
            "windowSize": self.window,
        })  # fmt: skip

    def send(self, message: Message | str | bytes, destination: AnyDestination | None = None,
             persistent: bool | None = None, priority: int | None = None,
             time_to_live: int | None = None) -> None:  # fmt: skip
        if self.closed:
            raise JMSError("javax.jms.IllegalStateException", "The producer is closed")
        if not isinstance(message, Message):
            message = Message(body=message)
        target = self.destination if destination is None else split_options(destination)[0]
        # ActiveMQMessageProducer's rules: a producer made for a destination sends only there.
        if target is None:
            raise JMSError(
                "java.lang.UnsupportedOperationException", "A destination must be specified."
            )
        if self.destination is not None and target != self.destination:
            raise JMSError(
                "java.lang.UnsupportedOperationException",
                f"This producer can only send messages to: {self.destination.name}",
            )
        self.session.connection.check_usable(target, "send to")
        persistent = self.delivery_persistent if persistent is None else persistent
        ttl = self.time_to_live if time_to_live is None else time_to_live
        now = 0 if self.disable_message_timestamp else int(time.time() * 1000)
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
            "expiration": now + ttl if ttl > 0 and now else 0,
            "priority": self.priority if priority is None else priority,
            "replyTo": destination_structure(message.reply_to), "timestamp": now,
            "type": message.type,
            "content": _content(body),
            **header_fields(message),
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
            # The producer window (compatibility S3): async sends wait while the broker has not
            # acknowledged (ProducerAck) window-size bytes of earlier ones.
            size = 1024 + len(fields["content"] or b"") + len(fields["marshalledProperties"] or b"")
            with self._window_free:
                while self._outstanding and self._outstanding + size > self.window:
                    connection.transport.flush()  # the acks awaited may be for held sends
                    if not self._window_free.wait(WINDOW_WAIT_S):
                        raise JMSError("javax.jms.JMSException", "producer window never freed")
                self._outstanding += size
        # In a transaction nothing is seen before the commit (a request, written after
        # them): the sends are written together, not one system call each.
        connection.oneway(structure, flush=not self.session.transacted)

    def _dispose(self) -> None:
        self.closed = True
        self.session.connection._producers.pop(self._pid["value"], None)

    def close(self) -> None:
        """Close the producer; the broker forgets it."""
        if self.closed:
            return
        self._dispose()
        if self in self.session._producers:
            self.session._producers.remove(self)
        self.session.connection.oneway(Structure(t.REMOVE_INFO, {
            "objectId": self._pid, "lastDeliveredSequenceId": -2,  # Java's "unknown"
        }))  # fmt: skip

    def _acked(self, size: int) -> None:
        with self._window_free:
            self._outstanding = max(0, self._outstanding - size)
            self._window_free.notify_all()

    def _sync(self, persistent: bool) -> bool:
        """The seeds' rule (compatibility S1): async only with no send timeout, alwaysSyncSend off,
        and (non-persistent, or useAsyncSend, or a transacted session)."""
        o = self.session.connection.options
        if o.sendTimeout > 0 or o.alwaysSyncSend:
            return True
        return not (not persistent or o.useAsyncSend or self.session.transacted)
