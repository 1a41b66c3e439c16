"""The client side of the broker's stream requests (dovecote/broker/streams.py, documented
in docs/streams.md): plan a batch by sequence numbers, read a range without consuming it,
and commit what a batch covered. The Spark source is built on this; a dovecote broker is
needed (ActiveMQ has no sequence numbers)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from dovecote.client.connection import Connection, ConnectionFactory, Message
from dovecote.client.consumer import MessageConsumer
from dovecote.client.session import Session
from dovecote.client.transport import JMSError, TransportClosedError
from dovecote.core.destinations import Destination
from dovecote.core.stream_blocks import last_sequence

REPLY_WAIT_S = 30.0
RETRY_FOR_S = 120.0
REFUSED = "dovecote.StreamRequestRefused"
"""The class name of an error the broker answered: asking again would not help."""
SEQUENCE = "dovecoteSequence"
DESTINATION = "dovecoteDestination"
EXPIRATION = "dovecoteExpiration"
PERSISTENT = "dovecotePersistent"
END = "dovecoteEnd"
INTERNAL_PROPERTIES = (SEQUENCE, DESTINATION, EXPIRATION, PERSISTENT)

log = logging.getLogger("dovecote.client.streams")
T = TypeVar("T")


def _is_refusal(exc: Exception) -> bool:
    return isinstance(exc, JMSError) and exc.class_name == REFUSED


@dataclass(frozen=True)
class Plan:
    end: int
    count: int
    bounds: list[int]
    """Cut points: part i is (bounds[i], bounds[i + 1]]."""


class StreamClient:
    """One connection making stream requests on a queue, or on a topic through the durable
    subscription ``client_id``/``subscription``."""

    def __init__(
        self,
        url: str,
        destination: Destination,
        client_id: str | None = None,
        subscription: str | None = None,
    ) -> None:
        self.destination: Destination
        self._names: dict[str, Any]
        self.retarget(destination, client_id, subscription)
        self.url = url
        self.retry_for_s = RETRY_FOR_S
        self.connection: Connection | None = None
        self._replies: tuple[Destination, MessageConsumer] | None = None
        """The reply queue every request of this connection is answered on, and its
        consumer: made at the first request, kept (four round trips fewer per request)."""
        self._asked = 0
        self._retrying(self._connect)

    def retarget(
        self,
        destination: Destination,
        client_id: str | None = None,
        subscription: str | None = None,
    ) -> None:
        """Make the next requests about ``destination`` (through that durable subscription,
        for a topic). A request names what it asks about: the connection serves any."""
        if destination.is_topic and not (client_id and subscription):
            raise ValueError("reading a topic needs a client id and a subscription name")
        self.destination = destination
        self._names = (
            {"clientId": client_id, "subscriptionName": subscription}
            if destination.is_topic
            else {}
        )

    def _connect(self) -> None:
        connection = ConnectionFactory(self.url).create_connection()
        connection.start()
        self._session = connection.create_session()
        self._producer = self._session.create_producer()
        self._replies = None
        self.connection = connection

    def _retrying(self, request: Callable[[], T]) -> T:
        """Plans and commits are idempotent: across a broker restart, reconnect and ask
        again (with back-off) for up to ``retry_for_s``."""
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.1
        while True:
            try:
                if self.connection is None and request != self._connect:
                    self._connect()  # (a reconnect that failed is tried again here)
                return request()
            except (JMSError, TransportClosedError, OSError) as exc:
                delay = self._again_after(exc, deadline, delay)

    def _again_after(self, exc: Exception, deadline: float, delay: float) -> float:
        """After a failed request: raise it when it was refused or time is up, else drop
        the connection, wait ``delay`` and return the next delay."""
        if time.monotonic() + delay > deadline or _is_refusal(exc):
            raise exc
        log.warning("stream request failed (%s); reconnecting in %.1fs", exc, delay)
        if self.connection is not None:
            with contextlib.suppress(Exception):
                self.connection.close()
            self.connection = None
        time.sleep(delay)
        return min(delay * 2, 2.0)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()

    def __enter__(self) -> StreamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request_target(self, verb: str) -> Destination:
        return Destination(self.destination.type, f"dovecote.Stream.{verb}.{self.destination.name}")

    def _reply_queue(self) -> tuple[Destination, MessageConsumer]:
        if self._replies is None:
            reply_to = self._session.create_temporary_queue()
            self._replies = (reply_to, self._session.create_consumer(reply_to))
        return self._replies

    def _drop_reply_queue(self) -> None:
        """After a request left unfinished: its remaining answers go with its queue."""
        replies, self._replies = self._replies, None
        if replies is not None and self.connection is not None:
            with contextlib.suppress(Exception):
                replies[1].close()
                self._session.delete_temporary(replies[0])

    def _ask(self, verb: str, **properties: Any) -> Generator[Message, None, None]:
        """The answers to one request, up to the last (the one map of Offsets and Commit,
        the end marker of Range and Blocks): answers to an earlier request abandoned on the
        same queue are passed over."""
        one_answer = verb in ("Offsets", "Commit")
        # Range copies keep their messages' correlation ids: a queue of their own.
        own = verb == "Range"
        if own:
            reply_to = self._session.create_temporary_queue()
            replies = self._session.create_consumer(reply_to)
        else:
            reply_to, replies = self._reply_queue()
        self._asked += 1
        correlation_id = f"{verb}-{self._asked}"
        finished = False
        try:
            request = Message("", reply_to=reply_to, correlation_id=correlation_id,
                              persistent=False,
                              properties={**self._names, **properties})  # fmt: skip
            # Not persistent: sent without waiting for a receipt (the answer is the receipt).
            self._producer.send(request, self._request_target(verb), persistent=False)
            while not finished:
                reply = replies.receive(REPLY_WAIT_S)
                if reply is None:
                    raise JMSError(
                        "javax.jms.JMSException",
                        f"no answer to dovecote.Stream.{verb} in {REPLY_WAIT_S:.0f}s"
                        " (stream requests need a dovecote broker)",
                    )
                if reply.correlation_id != correlation_id and not own:
                    continue
                if isinstance(reply.body, dict) and "error" in reply.body:
                    finished = True
                    raise JMSError(REFUSED, str(reply.body["error"]))
                finished = one_answer or bool(reply.properties.get(END))
                yield reply
        finally:
            if own:
                replies.close()
                self._session.delete_temporary(reply_to)
            elif not finished:
                self._drop_reply_queue()

    def _map(self, verb: str, **properties: Any) -> dict[str, Any]:
        def ask() -> dict[str, Any]:
            replies = self._ask(verb, **properties)
            try:
                reply = next(replies)
            finally:
                replies.close()
            assert isinstance(reply.body, dict)
            return reply.body

        return self._retrying(ask)

    def plan(
        self,
        after: int,
        max_messages: int = 0,
        up_to: int | None = None,
        splits: int = 1,
        prepare: bool = False,
    ) -> Plan:
        """The next range to read. With ``prepare``, the broker encodes the parts' blocks
        ahead, for ``iter_blocks`` requests of exactly those parts that follow soon."""
        props: dict[str, Any] = {"after": after, "maxMessages": max_messages, "splits": splits}
        if up_to is not None:
            props["upTo"] = up_to
        if prepare:
            props["prepare"] = True
        body = self._map("Offsets", **props)
        bounds = [int(b) for b in str(body["bounds"]).split(",")]
        return Plan(int(body["end"]), int(body["count"]), bounds)

    def read(self, after: int, up_to: int) -> Iterator[Message]:
        """The messages with after < sequence <= up_to, in order; nothing is consumed.
        The range is collected before it is handed out, so a broker restart in the middle
        (reconnect, ask again) never yields a message twice."""

        def read_range() -> list[Message]:
            got: list[Message] = []
            for message in self._ask("Range", after=after, upTo=up_to):
                if message.properties.get(END):
                    break
                got.append(message)
            # Copies keep their priorities, by which the reply queue may reorder them.
            got.sort(key=lambda m: int(m.properties[SEQUENCE]))
            return got

        yield from self._retrying(read_range)

    def read_blocks(self, after: int, up_to: int, block_bytes: int = 0) -> list[bytes]:
        """The same range as ``read``, as stream blocks (dovecote.core.stream_blocks): a few
        large replies instead of a message each. Collected whole before they are returned,
        for the same reason."""

        def read_range() -> list[bytes]:
            got: list[bytes] = []
            sizing = {"blockBytes": block_bytes} if block_bytes else {}
            for reply in self._ask("Blocks", after=after, upTo=up_to, **sizing):
                if reply.properties.get(END):
                    break
                assert isinstance(reply.body, bytes)
                got.append(reply.body)
            return got

        return self._retrying(read_range)

    def iter_blocks(self, after: int, up_to: int, block_bytes: int = 0) -> Iterator[bytes]:
        """The same blocks as ``read_blocks``, each handed out as it arrives (the caller
        works on one while the broker makes the next). Across a reconnect the range goes on
        after the last sequence number handed out: never a message twice."""
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.1
        sizing = {"blockBytes": block_bytes} if block_bytes else {}
        while True:
            try:
                if self.connection is None:
                    self._connect()
                for reply in self._ask("Blocks", after=after, upTo=up_to, **sizing):
                    if reply.properties.get(END):
                        return
                    assert isinstance(reply.body, bytes)
                    after = max(after, last_sequence(reply.body))
                    yield reply.body
            except (JMSError, TransportClosedError, OSError) as exc:
                delay = self._again_after(exc, deadline, delay)

    def commit(self, up_to: int) -> int:
        """Remove everything up to ``up_to``; returns how many messages that removed."""
        return int(self._map("Commit", upTo=up_to)["removed"])


def is_dovecote(connection: Connection) -> bool:
    """Whether the broker at the other end is a dovecote broker (its WireFormatInfo says
    so): stream requests are dovecote's own, ActiveMQ would store them as messages."""
    details = connection.transport.peer_wire_format.get("PlatformDetails")
    return isinstance(details, str) and details.startswith("dovecote")


class StreamAppender:
    """``Append`` requests (docs/streams.md) on a connection: stream blocks of messages added
    to ``destination`` in the open transaction of the transacted session ``session`` (begun
    by the first block), so they are stored at its commit, all or none. The replies are
    awaited one block behind, so the broker reads a block while the next is made; ``finish``
    waits for the last before the commit. Starts the connection (the answers come to a
    consumer of its own)."""

    def __init__(self, session: Session, destination: Destination) -> None:
        if not session.transacted:
            raise ValueError("Append requests join a transacted session's transaction")
        self._transacted = session
        session.connection.start()  # (the answers come to a consumer)
        self._session = session.connection.create_session()
        self._producer = self._session.create_producer()
        self._reply_to = self._session.create_temporary_queue()
        self._replies = self._session.create_consumer(self._reply_to)
        self._target = Destination(destination.type, f"dovecote.Stream.Append.{destination.name}")
        self._waiting = 0
        self.appended = 0

    def append(self, block: bytes, persistent: bool = True) -> None:
        transaction = self._transacted.transaction_value()
        request = Message(block, reply_to=self._reply_to, persistent=False, properties={
            "transaction": transaction, "persistent": persistent,
        })  # fmt: skip
        # Not persistent (the request is not stored): sent without waiting for a receipt,
        # so the broker reads this block while the next is made.
        self._producer.send(request, self._target, persistent=False)
        self._waiting += 1
        if self._waiting > 1:
            self._answer()

    def finish(self) -> int:
        """Wait for every block's answer; how many messages the broker took."""
        while self._waiting:
            self._answer()
        return self.appended

    def _answer(self) -> None:
        reply = self._replies.receive(REPLY_WAIT_S)
        if reply is None:
            raise JMSError("javax.jms.JMSException", f"no answer to an Append in {REPLY_WAIT_S}s")
        self._waiting -= 1
        if not isinstance(reply.body, dict):
            raise JMSError("javax.jms.JMSException", "an Append was answered with no map")
        if "error" in reply.body:
            raise JMSError(REFUSED, str(reply.body["error"]))
        self.appended += int(reply.body["appended"])

    def close(self) -> None:
        self._replies.close()
        self._session.delete_temporary(self._reply_to)
        self._session.close()
