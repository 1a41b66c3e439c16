"""A bridge's forwarding half (network/bridge.py): what its local consumers get is sent on to
the remote broker without waiting for answers, and the local copies are acknowledged behind.

Store and forward, pipelined (as ActiveMQ's DemandForwardingBridge, which sends
asynchronously with a callback per message): non-persistent messages go one way and are
acknowledged here once written; persistent ones go in runs, one way but for the last of
each run, which asks for the answer that tells the remote has stored the whole run (a
broker handles one connection's commands in order, and tells a refusal of a one-way
command as a ConnectionError before that answer: the bridge then ends with nothing of the
run acknowledged). Many runs are in flight at once, up to the local consumers' prefetch;
the local copies answered are acknowledged together, one range ack per consumer, not synced
(a copy a crash brings back is sent again and dropped by the remote's audit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import TYPE_CHECKING, Final

from dovecote.core.commands import AckType, MessageAck, MessageDispatch
from dovecote.core.errors import DovecoteError
from dovecote.core.ids import ConnectionId, ConsumerId
from dovecote.core.message import Message
from dovecote.network.paths import broker_path
from dovecote.network.wire import Channel, RemoteError
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import OpenWireConverter
from dovecote.protocol.openwire.structures import destination_structure

if TYPE_CHECKING:
    from collections.abc import Callable

    from dovecote.network.records import BridgeCounts, Demand, LocalBroker
    from dovecote.network.settings import NetworkConnectorSettings

log = logging.getLogger("dovecote.network")

ANSWER_EVERY: Final = 100
"""The longest run of persistent messages sent on with one answer asked for (the rest of
the window stays in flight while a run's answer comes back)."""


class Answer:
    """The remote's answer to the last of a run of persistent messages sent on, which
    tells that it stored them all (None until that last one is sent)."""

    __slots__ = ("future",)

    def __init__(self) -> None:
        self.future: asyncio.Future[Structure] | None = None


class Forwarding:
    """The forwarding loops of a Bridge (which provides the attributes below)."""

    broker: LocalBroker
    settings: NetworkConnectorSettings
    remote: Channel
    counts: BridgeCounts
    connection_id: ConnectionId
    local_id: str
    by_local: dict[ConsumerId, Demand]
    forget: Callable[[str], None]
    failure: str | None
    _converter: OpenWireConverter
    _remote_producer: Structure
    _stopped: asyncio.Event

    def stop(self) -> None:
        raise NotImplementedError

    def _start_forwarding(self) -> None:
        self._outbox: deque[MessageDispatch] = deque()
        self._outbox_filled = asyncio.Event()
        self._sent: deque[tuple[ConsumerId, str, Answer | None]] = deque()
        """What was sent on and is not yet acknowledged here, in the order sent, with the
        answer that tells a persistent one is stored there."""
        self._sent_more = asyncio.Event()
        self._answer_every = ANSWER_EVERY if self.remote.reports_errors else 1

    def _forget_sent(self) -> None:
        """The bridge closed: what was sent and not acknowledged stays here, to go again."""
        for _, _, answer in self._sent:
            if answer is not None and answer.future is not None and answer.future.done():
                answer.future.exception()  # (read: nobody waits for it now)
        self._sent.clear()

    def _on_local_dispatch(self, dispatch: MessageDispatch) -> None:
        self._outbox.append(dispatch)
        self._outbox_filled.set()

    async def _forward_loop(self) -> None:
        """Send on what the local consumers got, without waiting for answers: the
        non-persistent messages one way, the persistent ones in runs, the last of each run
        asking for the answer that tells the remote has stored the run (it handles a
        connection's commands in order; one it refuses is told as a ConnectionError
        before that answer, and the bridge then ends). Many runs are in flight at once, up
        to the consumers' prefetch; the ack loop settles the local copies behind them."""
        remote = self.remote
        outbox = self._outbox
        sent = self._sent
        by_local = self.by_local
        while True:
            if not outbox:
                self._outbox_filled.clear()
                await self._outbox_filled.wait()
                continue
            messages = [
                (dispatch.consumer_id, dispatch.message)
                for dispatch in outbox
                if dispatch.message is not None and dispatch.consumer_id in by_local
            ]
            outbox.clear()
            persistent_left = sum(1 for _, message in messages if message.persistent)
            answer = Answer()
            run = 0
            for consumer_id, message in messages:
                structure = self._outgoing(message)
                if not message.persistent:
                    remote.send(structure)
                    sent.append((consumer_id, message.message_id, None))
                    continue
                persistent_left -= 1
                run += 1
                sent.append((consumer_id, message.message_id, answer))
                if persistent_left and run < self._answer_every:
                    remote.send(structure)
                    continue
                answer.future = remote.request(structure)
                answer = Answer()
                run = 0
            self._sent_more.set()
            await remote.drain()

    def _outgoing(self, message: Message) -> Structure:
        """The message as the remote gets it: the same id, our producer, the path grown."""
        path = broker_path(message)
        if path:
            self.forget(message.message_id)
        structure = self._converter.from_message(message)
        structure.fields["producerId"] = self._remote_producer
        structure.fields["destination"] = destination_structure(message.destination)
        structure.fields["brokerPath"] = [
            Structure(t.BROKER_ID, {"value": broker}) for broker in (*path, self.local_id)
        ]
        return structure

    async def _ack_loop(self) -> None:
        """Acknowledge the local copies in the order they were sent, each once the remote
        has it (a persistent one once the remote answered its run: stored), all those
        ready at once: one range ack per local consumer (as ActiveMQ's bridge acks)."""
        sent = self._sent
        while True:
            if not sent:
                self._sent_more.clear()
                await self._sent_more.wait()
                continue
            head = sent[0][2]
            if head is not None and head.future is not None and not head.future.done():
                with contextlib.suppress(RemoteError):
                    await head.future  # (its failure is read below)
            ready: list[tuple[ConsumerId, str]] = []
            while sent:
                consumer_id, message_id, answer = sent[0]
                if answer is not None:
                    future = answer.future
                    if future is None or not future.done():
                        break
                    failure = future.exception()
                    if failure is not None:
                        self.failure = f"the remote refused a forwarded message: {failure}"
                        self.stop()
                        return
                sent.popleft()
                ready.append((consumer_id, message_id))
            if self._stopped.is_set():
                return  # (the remote reported an error before these answers)
            if ready:
                await self._ack_local(ready)
            elif head is not None and head.future is None:
                self._sent_more.clear()  # (its run is not sent yet)
                await self._sent_more.wait()

    async def _ack_local(self, ready: list[tuple[ConsumerId, str]]) -> None:
        """One range ack per consumer for messages it dispatched in this order; not synced
        (a copy a crash brings back is sent again and dropped by the remote's audit)."""
        by_consumer: dict[ConsumerId, list[str]] = {}
        for consumer_id, message_id in ready:
            by_consumer.setdefault(consumer_id, []).append(message_id)
        for consumer_id, ids in by_consumer.items():
            if consumer_id not in self.by_local:
                continue  # its consumer is gone: the messages went back to the queue
            ack = MessageAck(consumer_id, AckType.STANDARD, ids[-1], first_message_id=ids[0],
                             message_count=len(ids), sync=False)  # fmt: skip
            try:
                await self.broker.process(self.connection_id, ack)
            except DovecoteError as exc:
                # Some left flight meanwhile (expired, removed by an operator): one by one.
                log.debug("bridge %s: range ack refused (%s), acking singly", self.settings.name,
                          exc)  # fmt: skip
                for message_id in ids:
                    with contextlib.suppress(DovecoteError):
                        await self.broker.process(self.connection_id, MessageAck(
                            consumer_id, AckType.INDIVIDUAL, message_id, sync=False))  # fmt: skip
            self.counts.forwarded += len(ids)
