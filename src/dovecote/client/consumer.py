"""MessageConsumer: the unconsumed buffer the broker fills up to the prefetch, receive and
listeners, expiry and duplicate checks before a message is handed out (compatibility K1, C6), as
ActiveMQ's ActiveMQMessageConsumer does. What it delivered and the acks each
acknowledgement mode sends for it are delivered.py's (DeliveredAcks)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dovecote.client.channel import DispatchChannel, Empty
from dovecote.client.delivered import ARRIVED_AFTER, STANDARD_ACK, DeliveredAcks
from dovecote.client.destination_options import (
    AnyDestination,
    connection_consumer_settings,
    consumer_settings,
    split_options,
)
from dovecote.client.message import AckMode, Message, received_message
from dovecote.client.redelivery import message_key
from dovecote.client.threads import start_daemon
from dovecote.client.transport import JMSError
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.structures import destination_structure

if TYPE_CHECKING:
    from dovecote.client.session import Session

SEEN_LIMIT = 10_000
"""How many delivered message ids each consumer remembers to suppress duplicates."""
PULL_GRACE_S = 30.0
"""How long past its timeout a pull waits for the broker's answer before giving up."""


class MessageConsumer(DeliveredAcks):
    _takes_connection_settings = True  # not the advisory watcher: AdvisoryConsumer's own

    def __init__(
        self,
        session: Session,
        consumer_id: int,
        destination: AnyDestination,
        selector: str | None,
        prefetch: int | None,
        browser: bool = False,
        *,
        no_local: bool = False,
        subscription_name: str | None = None,
        exclusive: bool | None = None,
        priority: int = 0,
    ) -> None:
        self.session = session
        connection = session.connection
        destination, options = split_options(destination)
        self.destination = destination
        policy = connection.options.prefetchPolicy
        if prefetch is None:
            if browser:
                prefetch = policy.queueBrowserPrefetch
            elif subscription_name is not None:
                prefetch = policy.durableTopicPrefetch
            else:
                prefetch = policy.queuePrefetch if destination.is_queue else policy.topicPrefetch
        self._cid = Structure(t.CONSUMER_ID, {
            "connectionId": connection.connection_id, "sessionId": session.session_id,
            "value": consumer_id,
        })  # fmt: skip
        self.info: dict[str, Any] = {
            "consumerId": self._cid, "destination": destination_structure(destination),
            "prefetchSize": prefetch, "selector": None, "dispatchAsync": True,
            "priority": priority, "browser": browser, "noLocal": no_local,
            "exclusive": False, "subscriptionName": subscription_name,
            "clientId": connection.client_id, "maximumPendingMessageLimit": 0,
            "retroactive": False,
        }  # fmt: skip
        if self._takes_connection_settings:
            self.info.update(connection_consumer_settings(connection.options, exclusive))
        self.info.update(consumer_settings(options))
        if selector and selector.strip():
            self.info["selector"] = selector
        self.prefetch: int = self.info["prefetchSize"]
        self._browser = browser
        self._buffer = DispatchChannel()
        self._listener: Callable[[Message], None] | None = None
        self._listener_lock = threading.Lock()
        self._listener_thread: threading.Thread | None = None
        self.closed = False
        # What the Java consumer counts (ActiveMQMessageConsumer): delivered messages not yet
        # acked (newest last), DELIVERED acks owed, the pending ack that carries them.
        self._delivered: list[Structure] = []
        self._delivered_lock = threading.RLock()
        self._delivered_counter = 0
        self._additional_window = 0
        self._ack_counter = 0  # optimizeAcknowledge: consumed, not yet acked
        self._optimize_started = time.monotonic()
        self._pending_ack: Structure | None = None
        self._redelivery_delay = 0
        self.last_delivered_sequence_id = -1
        self._seen: OrderedDict[str, None] = OrderedDict()  # ids the application received
        options_ = connection.options
        self.optimize_acknowledge = (
            options_.optimizeAcknowledge and session.ack_mode is AckMode.AUTO_ACKNOWLEDGE
            and not browser
        )  # fmt: skip
        self.info["optimizedAcknowledge"] = self.optimize_acknowledge
        session._consumers.append(self)
        connection._consumers[(session.session_id, consumer_id)] = self
        try:
            connection.request(self._info())
        except JMSError:
            session._consumers.remove(self)
            connection._consumers.pop((session.session_id, consumer_id), None)
            raise
        if connection.started:
            self._buffer.set_running(True)

    def _info(self) -> Structure:
        return Structure(t.CONSUMER_INFO, dict(self.info))

    @property
    def consumer_id(self) -> Structure:
        return self._cid

    # -- from the broker ----------------------------------------------------------------

    def _dispatched(self, dispatch: Structure, interruptions: int = -1) -> None:
        message = dispatch["message"]
        if message is not None and self.session.transacted:
            # Which broker sent it: a transaction a failover interrupted hands out again only
            # the new broker's messages (the new broker dispatches the old one's anew).
            dispatch.fields[ARRIVED_AFTER] = interruptions
        listening = self._listener is not None and self._buffer.running
        # Expired in our buffer before anyone took it: acked as expired, never handed out;
        # by receive with sendAcksAsync=false (its wait for an answer may hold our lock).
        sync_acks = not self.session.connection.options.sendAcksAsync
        if message is not None and not listening and not sync_acks and self._expired(dispatch):
            self._before_consumed(dispatch)
            self._after_consumed(dispatch, expired=True)
            if self.prefetch == 0:
                self._buffer.put(None)  # the pull that brought it must be answered
            return
        self._buffer.put(dispatch)

    def _drop_prefetched(self) -> None:
        """After a failover the new broker dispatches again what was only prefetched. Nothing
        is handed out until the replay is done (as Java's transport interruption): an ack
        made meanwhile would be dropped as stale, and the consumer's window never reopen."""
        self._buffer.set_running(False)
        self._buffer.clear()
        with self._delivered_lock:
            self._pending_ack = None
            self._delivered_counter = 0
            if self.session.ack_mode is AckMode.AUTO_ACKNOWLEDGE:
                self._delivered.clear()
            self._ack_counter = 0

    def _interrupted(self) -> None:
        """A transacted consumer, as Java's at a transport interruption: what the lost
        broker prefetched is not handed out (its transaction is over), nor anything until
        the replay on the new broker is done."""
        self._buffer.set_running(False)
        self._buffer.clear()

    def _start(self) -> None:
        if not self.closed:
            self._buffer.set_running(True)

    def _stop(self) -> None:
        self._buffer.set_running(False)

    def _expired(self, dispatch: Structure) -> bool:
        expiration = dispatch["message"].get("expiration", 0) or 0
        checked = self.session.connection.options.consumerExpiryCheckEnabled  # false: handed out
        return checked and expiration > 0 and time.time() * 1000 > expiration

    # -- receive --------------------------------------------------------------------------

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (None: forever)."""
        self._check_receivable()
        dispatch = self._dequeue(timeout)
        if dispatch is None:
            return None
        self._before_consumed(dispatch)
        message = self._to_message(dispatch)
        self._after_consumed(dispatch, expired=False)
        return message

    def receive_no_wait(self) -> Message | None:
        return self.receive(0)

    def _check_receivable(self) -> None:
        if self.closed:
            raise JMSError("javax.jms.IllegalStateException", "The Consumer is closed")
        if self.session.has_listener:
            # The seeds (C1): a session with a listener refuses synchronous receive.
            raise JMSError(
                "javax.jms.IllegalStateException",
                "cannot receive synchronously in a session that has a listener",
            )

    def _send_pull(self, timeout: float | None) -> None:
        if self.prefetch == 0 and len(self._buffer) == 0:
            self.session.connection.oneway(Structure(t.MESSAGE_PULL, {
                "consumerId": self._cid, "destination": self.info["destination"],
                "timeout": -1 if timeout == 0 else int((timeout or 0) * 1000),
            }))  # fmt: skip

    def _dequeue(self, timeout: float | None) -> Structure | None:
        """The next deliverable dispatch: expired ones are acked as expired and skipped,
        duplicates after a failover acked again and hidden (compatibility C7/K2)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._send_pull(timeout)
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            # Pull: the broker answers with the message or, when the timeout passes, an empty
            # dispatch; wait for that answer, not for a local clock (as the Java client does).
            wait = (
                remaining if self.prefetch != 0 or remaining is None else remaining + PULL_GRACE_S
            )
            try:
                dispatch = self._buffer.get(wait)
            except Empty:
                return None
            if dispatch is None or dispatch["message"] is None:
                failure = self.session.connection.failure
                if failure is not None and (self.session.connection.closed or dispatch is None):
                    raise JMSError("javax.jms.JMSException", str(failure))
                return None
            if self._expired(dispatch):
                self._before_consumed(dispatch)
                self._after_consumed(dispatch, expired=True)
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._send_pull(remaining)
                continue
            if self._redelivery_exceeded(dispatch):
                self._poison(dispatch, "Dispatch")
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._send_pull(remaining)
                continue
            if self._is_duplicate(dispatch):
                self._send_ack(dispatch, STANDARD_ACK, 1, first=dispatch)
                continue
            return dispatch

    def _redelivery_exceeded(self, dispatch: Structure) -> bool:
        """A transacted consumer's pre-dispatch check (RedeliveryPolicy.preDispatchCheck):
        a message the broker redelivered more than maximumRedeliveries times is not handed
        out but poison-acked, unless the broker's redelivery plugin delayed it."""
        maximum = self.session.connection.options.redeliveryPolicy.maximumRedeliveries
        if not self.session.transacted or maximum == -1:
            return False
        if (dispatch.get("redeliveryCounter", 0) or 0) <= maximum:
            return False
        return "redeliveryDelay" not in received_message(dispatch, self.session, self).properties

    def _is_duplicate(self, dispatch: Structure) -> bool:
        if self.session.ack_mode is not AckMode.AUTO_ACKNOWLEDGE:
            return False
        key = message_key(dispatch)
        if key in self._seen:
            return True
        self._seen[key] = None
        if len(self._seen) > SEEN_LIMIT:
            self._seen.popitem(last=False)
        return False

    # -- listeners ------------------------------------------------------------------------

    def set_message_listener(self, listener: Callable[[Message], None] | None) -> None:
        """Deliver every message to ``listener`` (one thread per session, one message at a
        time), acknowledged as the session's mode says once the listener returns."""
        with self._listener_lock:
            self._listener = listener
            if listener is not None and self._listener_thread is None:
                self._listener_thread = start_daemon(self._listen, "dovecote-listener")

    @property
    def message_listener(self) -> Callable[[Message], None] | None:
        return self._listener

    @property
    def message_selector(self) -> str | None:
        selector: str | None = self.info["selector"]
        return selector

    def _listen(self) -> None:
        while True:
            with self._listener_lock:
                if self._listener is None or self.closed:
                    self._listener_thread = None  # a later listener starts a thread anew
                    return
            try:
                dispatch = self._buffer.get(None)
            except Empty:
                continue
            if dispatch is None or dispatch["message"] is None:
                if self.closed or self.session.connection.closed:
                    continue
                if self.session.connection.failure is not None and dispatch is None:
                    with self._listener_lock:
                        self._listener_thread = None
                    return  # the connection failed: the listener ends with it
                continue
            with self.session._dispatch_lock:
                if not self._buffer.running or self.closed or self._listener is None:
                    # Not to be delivered now: back at the head of the buffer, in order.
                    if not self.closed:
                        self._buffer.put_first([dispatch])
                    continue
                self._deliver_to_listener(dispatch)

    def _deliver_to_listener(self, dispatch: Structure) -> None:
        listener = self._listener
        if listener is None or self._is_duplicate(dispatch):
            return
        if self._redelivery_exceeded(dispatch):
            self._poison(dispatch, "listener dispatch")
            return
        self._before_consumed(dispatch)
        expired = self._expired(dispatch)
        try:
            if not expired:
                listener(self._to_message(dispatch))
            self._after_consumed(dispatch, expired)
        except Exception:
            mode = self.session.ack_mode
            if self._auto_each or self._auto_batch or mode is AckMode.INDIVIDUAL_ACKNOWLEDGE:
                self._rollback()  # redelivered by the policy, possibly to the dead-letter queue
            else:
                self._after_consumed(dispatch, expired=False)

    # -- close ----------------------------------------------------------------------------

    def _dispose(self) -> None:
        """Close locally (Java's dispose): owed acks out, buffers dropped; what the broker
        is told is up to the caller (a consumer's or its session's RemoveInfo)."""
        if self.closed:
            return
        if not self.session.transacted:
            self._deliver_acks()
            if self._auto_batch:
                self.acknowledge()
        if not self.session.transacted:
            with self._delivered_lock:
                self._delivered.clear()
        self.closed = True
        self._listener = None
        self._buffer.close()
        self.session._forget(self)

    def close(self) -> None:
        if self.closed:
            return
        with self._delivered_lock:
            in_transaction = bool(self._delivered) and self.session._tx is not None
        if in_transaction:
            # As the Java client: closed once the transaction ends, so its acks still count.
            self.session._close_after_transaction(self)
            self._listener = None
            return
        self._close_now()

    def _close_now(self) -> None:
        self._dispose()
        self.session.connection.oneway(Structure(t.REMOVE_INFO, {
            "objectId": self._cid, "lastDeliveredSequenceId": self.last_delivered_sequence_id,
        }))  # fmt: skip

    # -- messages -------------------------------------------------------------------------

    def _to_message(self, dispatch: Structure) -> Message:
        return received_message(dispatch, self.session, self)
