"""MessageConsumer: the unconsumed buffer the broker fills up to the prefetch, receive and
listeners, and the acks each acknowledgement mode sends (SPEC K1, C6)."""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dovecote.client.message import AckMode, Message
from dovecote.client.transport import JMSError
from dovecote.core.destinations import Destination
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import (
    destination_of,
    destination_structure,
    message_id_text,
)
from dovecote.protocol.openwire.primitives import (
    decode_map,
    decode_stream_body,
    decode_text_body,
)

if TYPE_CHECKING:
    from dovecote.client.session import Session

SEEN_LIMIT = 10_000
"""How many delivered message ids each consumer remembers to suppress duplicates."""
PULL_GRACE_S = 30.0
"""How long past its timeout a pull waits for the broker's answer before giving up."""


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
