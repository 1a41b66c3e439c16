"""The delivered messages of a MessageConsumer and the acks each acknowledgement mode sends
(compatibility K1, C6), as ActiveMQ's ActiveMQMessageConsumer keeps them: every message handed to
the application is "delivered"; AUTO acks it at once (or, with optimizeAcknowledge, in batches),
CLIENT/INDIVIDUAL/transacted consumers tell the broker with DELIVERED acks every half
prefetch so the prefetch window moves before the application acks, DUPS_OK on a topic
batches standard acks the same way; a rollback or recover redelivers the delivered messages
locally after the redelivery policy's delay, or poison-acks them past its limit."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, cast

from dovecote.client.channel import DispatchChannel
from dovecote.client.message import AckMode
from dovecote.client.redelivery import (
    consumer_text,
    counter,
    message_key,
    next_delay,
    policy_text,
    rolled_back,
)
from dovecote.core.destinations import Destination
from dovecote.protocol.openwire import Structure, Throwable
from dovecote.protocol.openwire import schema as t

if TYPE_CHECKING:
    from dovecote.client.consumer import MessageConsumer
    from dovecote.client.session import Session

# MessageAck.ackType, as ActiveMQ numbers them.
DELIVERED_ACK, POISON_ACK, STANDARD_ACK, REDELIVERED_ACK, INDIVIDUAL_ACK = 0, 1, 2, 3, 4
EXPIRED_ACK = 6
ARRIVED_AFTER = "dovecote.interruptions"
"""A transacted consumer's dispatch records the connection's interruption count of the
transport that brought it (a client-side mark, never sent)."""


class DeliveredAcks:
    """MessageConsumer's side that acks: what it delivered and owes the broker."""

    # Set by MessageConsumer.__init__.
    session: Session
    destination: Destination
    prefetch: int
    closed: bool
    optimize_acknowledge: bool
    last_delivered_sequence_id: int
    _cid: Structure
    _buffer: DispatchChannel
    _delivered: list[Structure]
    _delivered_lock: threading.RLock
    _delivered_counter: int
    _additional_window: int
    _ack_counter: int
    _optimize_started: float
    _pending_ack: Structure | None
    _redelivery_delay: int
    _seen: OrderedDict[str, None]

    def _start(self) -> None:
        raise NotImplementedError

    # -- acknowledgement modes ----------------------------------------------------------

    @property
    def _auto_each(self) -> bool:
        mode = self.session.ack_mode
        return mode is AckMode.AUTO_ACKNOWLEDGE or (
            mode is AckMode.DUPS_OK_ACKNOWLEDGE and self.destination.is_queue
        )

    @property
    def _auto_batch(self) -> bool:
        return (
            self.session.ack_mode is AckMode.DUPS_OK_ACKNOWLEDGE and not self.destination.is_queue
        )

    def _poison(self, dispatch: Structure, what: str) -> None:
        counter = dispatch.get("redeliveryCounter", 0) or 0
        ack = self._ack(dispatch, POISON_ACK, 1, dispatch)
        ack.fields["poisonCause"] = Throwable(
            "java.lang.Throwable",
            f"{what}[{counter}] to {consumer_text(self._cid)} exceeds redelivery policy limit:"
            f"{policy_text(self.session.connection.options.redeliveryPolicy)}",
        )
        self.session._send_ack(ack)

    def _before_consumed(self, dispatch: Structure) -> None:
        sequence = dispatch["message"]["messageId"].get("brokerSequenceId", -1)
        self.last_delivered_sequence_id = sequence if sequence is not None else -1
        if self._auto_batch:
            return
        with self._delivered_lock:
            self._delivered.append(dispatch)
        if self.session.transacted:
            self.session._register(cast("MessageConsumer", self))
            if dispatch[ARRIVED_AFTER] != self.session._tx_interruptions:
                self.session._in_doubt = True  # taken just before its broker was lost
            self._ack_later(dispatch, DELIVERED_ACK)

    def _after_consumed(self, dispatch: Structure, expired: bool) -> None:
        if self.closed:
            return
        if expired:
            self._send_ack(dispatch, EXPIRED_ACK, 1, first=dispatch)
            with self._delivered_lock:
                self._remove_delivered(dispatch)
            return
        if self.session.transacted:
            return
        if self._auto_each:
            with self._delivered_lock:
                if not self._delivered:
                    return
                if self.optimize_acknowledge:
                    self._ack_counter += 1
                    timeout_ms = self.session.connection.options.optimizeAcknowledgeTimeOut
                    due = timeout_ms > 0 and (
                        time.monotonic() - self._optimize_started >= timeout_ms / 1000
                    )
                    if self._ack_counter + self._delivered_counter >= self.prefetch * 0.65 or due:
                        self._ack_all_delivered(STANDARD_ACK)
                        self._ack_counter = 0
                        self._optimize_started = time.monotonic()
                        if self._pending_ack is not None and self._delivered_counter > 0:
                            self.session._send_ack(self._pending_ack)
                            self._pending_ack = None
                            self._delivered_counter = 0
                else:
                    self._ack_all_delivered(STANDARD_ACK)
        elif self._auto_batch:
            self._ack_later(dispatch, STANDARD_ACK)
        else:  # CLIENT or INDIVIDUAL
            with self._delivered_lock:
                unacked = any(d is dispatch for d in self._delivered)
            if unacked:
                self._ack_later(dispatch, DELIVERED_ACK)

    def _ack_all_delivered(self, ack_type: int) -> bool:
        """One ack for every delivered message, oldest first; clears the list."""
        with self._delivered_lock:
            if not self._delivered:
                return False
            ack = self._ack_of_delivered(ack_type)
            self._delivered.clear()
        self.session._send_ack(ack)
        return True

    def _ack_of_delivered(self, ack_type: int) -> Structure:
        """makeAckForAllDeliveredMessages: one ack from the oldest to the newest."""
        delivered = self._delivered
        return self._ack(delivered[-1], ack_type, len(delivered), delivered[0])

    def _ack_later(self, dispatch: Structure, ack_type: int) -> None:
        """Not an ack yet: count it, and every half prefetch tell the broker (a DELIVERED
        ack opens the prefetch window without consuming anything)."""
        with self._delivered_lock:
            self._delivered_counter += 1
            old = self._pending_ack
            ack = self._ack(dispatch, ack_type, self._delivered_counter, None)
            ack.fields["transactionId"] = self.session._tx
            if old is None:
                ack.fields["firstMessageId"] = ack["lastMessageId"]
            elif old["ackType"] == ack_type:
                ack.fields["firstMessageId"] = old["firstMessageId"]
            elif old["ackType"] != DELIVERED_ACK:
                self.session._send_ack(old)  # an ack that matters is never dropped
            self._pending_ack = ack
            if (
                0.5 * self.prefetch
                <= self._delivered_counter + self._ack_counter - self._additional_window
            ):
                self.session._send_ack(ack)
                self._pending_ack = None
                self._delivered_counter = 0
                self._additional_window = 0

    def _ack(
        self, last: Structure, ack_type: int, count: int, first: Structure | None
    ) -> Structure:
        """A MessageAck as the Java client builds it: destination and consumer of the
        dispatch, its message as the last one, ``first`` as the first when given."""
        return Structure(t.MESSAGE_ACK, {
            "destination": last["destination"], "transactionId": None,
            "consumerId": self._cid, "ackType": ack_type,
            "firstMessageId": first["message"]["messageId"] if first is not None else None,
            "lastMessageId": last["message"]["messageId"], "messageCount": count,
        })  # fmt: skip

    def _send_ack(self, dispatch: Structure, ack_type: int, count: int,
                  first: Structure | None = None) -> None:  # fmt: skip
        self.session._send_ack(self._ack(dispatch, ack_type, count, first))

    def _remove_delivered(self, dispatch: Structure) -> None:
        self._delivered = [d for d in self._delivered if d is not dispatch]

    def acknowledge(self) -> None:
        """CLIENT mode (and a transaction's commit): a standard ack of every delivered
        message of this consumer."""
        with self._delivered_lock:
            if not self._delivered:
                return
            ack = self._ack(
                self._delivered[-1], STANDARD_ACK, len(self._delivered), self._delivered[0]
            )
            if self.session.transacted:
                ack.fields["transactionId"] = self.session._transaction_id()
            self._pending_ack = None
            self.session._send_ack(ack)
            count = len(self._delivered)
            self._delivered_counter = max(0, self._delivered_counter - count)
            self._additional_window = max(0, self._additional_window - count)
            if not self.session.transacted:
                self._delivered.clear()

    def acknowledge_one(self, dispatch: Structure) -> None:
        """INDIVIDUAL mode: this message only."""
        with self._delivered_lock:
            if not any(d is dispatch for d in self._delivered):
                return
            self._remove_delivered(dispatch)
        self._send_ack(dispatch, INDIVIDUAL_ACK, 1)

    def _forget_lost(self, interruptions: int) -> None:
        """A transaction interrupted by a failover ends: the messages it had from a broker
        the connection has lost since are neither acknowledged nor handed out again here
        (the new broker dispatches them anew); the new broker's stay, for the rollback."""
        with self._delivered_lock:
            kept = [d for d in self._delivered if d[ARRIVED_AFTER] == interruptions]
            lost = len(self._delivered) - len(kept)
            if lost:
                self._delivered = kept
                self._delivered_counter = max(0, self._delivered_counter - lost)

    def _commit(self) -> None:
        with self._delivered_lock:
            self._delivered.clear()
        self._redelivery_delay = 0

    def _rollback(self) -> None:
        """Session.recover() or a rollback: the delivered messages come back, redelivered,
        after the redelivery policy's delay; past maximumRedeliveries they are poison-acked
        (to the dead-letter queue)."""
        with self._delivered_lock:
            if self.optimize_acknowledge:
                # Consumed but not yet acked at the broker (the batch was not due): out of the
                # delivered list, the oldest first, by the Java consumer's own loop bound.
                removed = 0
                while removed < len(self._delivered) and removed < self._ack_counter:
                    self._seen.pop(message_key(self._delivered.pop(0)), None)
                    removed += 1
            if not self._delivered:
                return
            policy = self.session.connection.options.redeliveryPolicy
            newest = self._delivered[-1]
            current = counter(newest)
            if current > 0:
                self._redelivery_delay = next_delay(policy, self._redelivery_delay)
            else:
                self._redelivery_delay = policy.initialRedeliveryDelay
            oldest = self._delivered[0]
            for dispatch in self._delivered:
                rolled_back(dispatch)
                self._seen.pop(message_key(dispatch), None)
            count = len(self._delivered)
            maximum = policy.maximumRedeliveries
            if maximum != -1 and counter(newest) > maximum:
                poison = self._ack(newest, POISON_ACK, count, oldest)
                poison.fields["poisonCause"] = Throwable(
                    "java.lang.Throwable",
                    f"Delivery[{counter(newest)}] exceeds redelivery policy limit:"
                    f"{policy_text(policy)}, cause:null",
                )
                self.session._send_ack(poison, lazy=True)
                self._additional_window = max(0, self._additional_window - count)
                self._redelivery_delay = 0
                self._delivered_counter -= count
                self._delivered.clear()
                return
            if current > 0:
                self.session._send_ack(self._ack(newest, REDELIVERED_ACK, count, oldest), lazy=True)
            again = list(self._delivered)
            self._delivered_counter -= count
            self._delivered.clear()
        if self._buffer.closed:
            return
        delay = self._redelivery_delay / 1000
        self._buffer.set_running(False)

        def redispatch() -> None:
            if self._buffer.closed:
                return
            self._buffer.put_first(again)
            if self.session.connection.started:
                self._start()

        if delay > 0:
            timer = threading.Timer(delay, redispatch)
            timer.daemon = True
            timer.start()
        else:
            redispatch()

    def _deliver_acks(self) -> None:
        ack = None
        with self._delivered_lock:
            if self._auto_each:
                if self._delivered:
                    ack = self._ack(
                        self._delivered[-1], STANDARD_ACK, len(self._delivered), self._delivered[0]
                    )
                    self._delivered.clear()
                    self._ack_counter = 0
                else:
                    ack, self._pending_ack = self._pending_ack, None
            elif self._pending_ack is not None and self._pending_ack["ackType"] == STANDARD_ACK:
                ack, self._pending_ack = self._pending_ack, None
        if ack is not None:
            self.session._send_ack(ack, lazy=True)  # deliverAcks: never waits, as in Java
