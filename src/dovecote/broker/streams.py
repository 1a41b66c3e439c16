"""Offset-based reading for streaming engines (compatibility X1): the broker side of the Spark
source's exactly-once hand-off. Documented for clients in docs/streams.md.

A reader addresses a queue, or a durable topic subscription, by the broker's sequence numbers
(``Message.sequence``). Three requests, each an ordinary message sent with a reply-to to a
``dovecote.Stream.<verb>.<name>`` destination of the kind being read (so any STOMP or
OpenWire client can make them; nothing is stored or routed for the request itself):

- ``Offsets``: the plan for the next batch. Properties ``after`` (exclusive start), optional
  ``maxMessages``, ``upTo`` and ``splits``. The reply map holds ``end`` (the sequence number
  of the last message planned, or ``after`` when there is none), ``count`` and ``bounds``: a
  comma-separated list of ``splits + 1`` numbers cutting (after, end] into parts of about the
  same number of messages. Only messages already enqueued are planned (the sequencer's
  watermark), so a range never grows once planned. With ``prepare`` the parts' blocks are
  encoded ahead for the ``Blocks`` requests that follow (broker/prepared_blocks.py).
- ``Range``: the messages with ``after < sequence <= upTo``, in sequence order, copied to the
  reply-to with the properties ``dovecoteSequence``, ``dovecoteDestination`` (and
  ``dovecoteExpiration``, ``dovecotePersistent`` where they apply), then an empty
  message with ``dovecoteEnd = true``. Nothing is consumed: reading a range twice (a retried
  task) gives the same messages.
- ``Blocks``: the same messages as ``Range``, many to a reply: each reply a bytes message
  whose body is a stream block (dovecote.core.stream_blocks: columnar, about ``blockBytes``
  of body each, default 4 MiB) with the property ``dovecoteCount``, then the end marker.
  Readers that turn ranges into columns (the Spark source) use it.
- ``Commit``: remove every message with ``sequence <= upTo``, durably, then reply
  ``{"removed": n}``. Spark calls it when a batch is committed; a later commit covers an
  earlier one that was lost with a crashed driver.
- ``Append``: the other way, many messages in one request (broker/appends.py): a stream
  block of messages to add to the destination, in the sender's open transaction or at once;
  reply ``{"appended": n}``. The Spark source's writers use it.

For a topic the request names the durable subscription with the properties ``clientId`` and
``subscriptionName``; ``Offsets`` creates it when it does not exist yet (messages sent before
that are not kept for it, as for any durable subscriber). The reader must be the only
consumer of what it reads: a consumer attached to the same queue takes messages out of the
ranges.

The requests are answered by ``StreamPlugin``, a broker plugin (on unless ``[broker] streams
= false``); it reads and changes what destinations hold only through ``broker.contents``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import ClassVar, Protocol, runtime_checkable

from dovecote.broker.appends import PERSISTENT_PROPERTY as APPEND_PERSISTENT
from dovecote.broker.appends import open_transaction
from dovecote.broker.connection import ConnectionState
from dovecote.broker.prepared_blocks import PreparedBlocks
from dovecote.broker.replies import AnsweringPlugin
from dovecote.core.appended_blocks import AppendedBlock
from dovecote.core.collector import NoCollections
from dovecote.core.commands import SendMessage
from dovecote.core.destinations import Destination, queue, topic
from dovecote.core.errors import BrokerError, DovecoteError
from dovecote.core.ids import ConnectionId
from dovecote.core.message import BROKER_PATH_PROPERTY, BodyType, Message, PropertyValue
from dovecote.core.stream_blocks import DEFAULT_BLOCK_BYTES, cut_blocks, encode_block

Deliver = Callable[[Sequence[Message]], Awaitable[None]]
STREAM_PREFIX = "dovecote.Stream."
APPEND_PREFIX = STREAM_PREFIX + "Append."
SEQUENCE_PROPERTY = "dovecoteSequence"
DESTINATION_PROPERTY = "dovecoteDestination"
END_PROPERTY = "dovecoteEnd"
EXPIRATION_PROPERTY = "dovecoteExpiration"
PERSISTENT_PROPERTY = "dovecotePersistent"
COUNT_PROPERTY = "dovecoteCount"
# Not a user's property in a block, as a copy's reader does not see them as its own.
HIDDEN_IN_BLOCKS = frozenset(
    (SEQUENCE_PROPERTY, DESTINATION_PROPERTY, EXPIRATION_PROPERTY, PERSISTENT_PROPERTY,
     BROKER_PATH_PROPERTY)
)  # fmt: skip


def _int(properties: Mapping[str, PropertyValue], name: str, default: int | None = None) -> int:
    """A numeric property; STOMP headers arrive as strings."""
    value = properties.get(name)
    if value is None:
        if default is None:
            raise BrokerError(f"stream request needs the property {name!r}")
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BrokerError(f"stream request property {name!r} is not a number: {value!r}") from None


def _flag(properties: Mapping[str, PropertyValue], name: str) -> bool:
    """A boolean property (a STOMP header's text)."""
    value = properties.get(name)
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _subscription(request: Message, target: Destination) -> tuple[str, str] | None:
    """The durable subscription a topic request names (None for a queue)."""
    if target.is_queue:
        return None
    client_id = request.properties.get("clientId")
    name = request.properties.get("subscriptionName")
    if not isinstance(client_id, str) or not isinstance(name, str):
        raise BrokerError("reading a topic needs the properties clientId and subscriptionName")
    return client_id, name


def _bounds(after: int, sequences: list[int], splits: int) -> list[int]:
    """``splits + 1`` cut points with about the same number of messages between each."""
    bounds = [after]
    n = len(sequences)
    for i in range(1, splits):
        cut = n * i // splits
        bounds.append(sequences[cut - 1] if cut > 0 else after)
    bounds.append(sequences[-1] if sequences else after)
    return bounds


def _encode(run: Sequence[Message]) -> bytes:
    return encode_block(run, HIDDEN_IN_BLOCKS)


def _copy(message: Message, reply_to: Destination) -> Message:
    """A held message as the reader gets it: to its reply-to, with where it came from."""
    properties = dict(message.properties)
    properties[SEQUENCE_PROPERTY] = message.sequence
    properties[DESTINATION_PROPERTY] = str(message.destination)
    if message.expiration:
        # The copy itself must not expire on its way to the reader.
        properties[EXPIRATION_PROPERTY] = message.expiration
    if message.persistent:
        properties[PERSISTENT_PROPERTY] = True
    return Message(
        message_id=message.message_id,
        destination=reply_to,
        body=message.body,
        body_type=message.body_type,
        priority=message.priority,
        timestamp=message.timestamp,
        expiration=0,
        correlation_id=message.correlation_id,
        reply_to=message.reply_to,
        type=message.type,
        redelivery_counter=message.redelivery_counter,
        properties=properties,
    )


@runtime_checkable
class _Admitting(Protocol):
    """The broker's check of a send (usable destination, the sender's right to write, flow
    control), which an Append request passes for its messages."""

    async def admit_send(self, connection_id: ConnectionId, command: SendMessage) -> None: ...


class StreamPlugin(AnsweringPlugin):
    name: ClassVar[str] = "streams"
    request_prefixes: ClassVar[tuple[str, ...]] = (STREAM_PREFIX,)

    def __init__(self) -> None:
        super().__init__()
        self.prepared = PreparedBlocks(_encode, DEFAULT_BLOCK_BYTES)

    async def on_request(self, state: ConnectionState, message: Message) -> None:
        if message.destination.name.startswith(APPEND_PREFIX):
            replies = [self._map_reply(message, await self._append(state, message))]
        else:
            replies = await self.answer(message, self.broker.deliver)
        await self.broker.deliver(replies)

    async def _append(self, state: ConnectionState, request: Message) -> dict[str, PropertyValue]:
        """Add an Append request's messages to its transaction, or route them now; an error
        (a bad block, no right to write, no such transaction) takes none of them."""
        target_name = request.destination.name[len(APPEND_PREFIX) :]
        make = queue if request.destination.is_queue else topic
        try:
            if not target_name:
                raise BrokerError(f"stream request {request.destination} names no destination")
            if not isinstance(request.body, bytes) or request.body_type != BodyType.BYTES:
                raise BrokerError("an Append request's body is a stream block (a bytes message)")
            transaction = open_transaction(state, request)
            persistent = str(request.properties.get(APPEND_PERSISTENT, "true")).lower() != "false"
            connection_id = state.info.connection_id
            producer_id = request.producer_id or f"{connection_id.value}:append"
            # Its messages live on (in the transaction, then a queue): to the oldest
            # generation unwalked, as a large commit's (transactions.LARGE_COMMIT_SENDS).
            with NoCollections(promote=True):
                appended = AppendedBlock(
                    request.body, make(target_name), persistent, producer_id, connection_id.value
                )
            messages = appended.messages
            if messages:
                host = self.broker
                assert isinstance(host, _Admitting), "the broker checks sends"
                tid = transaction.transaction_id if transaction is not None else None
                await host.admit_send(connection_id, SendMessage(messages[0], tid))
                if transaction is not None:
                    transaction.sends.extend(messages)
                    if persistent:  # (the store may keep the block as it came)
                        transaction.blocks[id(messages[0])] = appended
                else:
                    await host.deliver(messages)
            return {"appended": len(messages)}
        except DovecoteError as exc:
            return {"error": str(exc)}

    async def answer(self, request: Message, deliver: Deliver | None = None) -> list[Message]:
        """Answer one stream request; errors become a reply with an ``error`` entry. With
        ``deliver``, the blocks a ``Blocks`` request reads are given to it as they are made
        (the rest is returned): the reader decodes one while the next is made, and the
        requests of a batch's other partitions take turns with this one."""
        name = request.destination.name[len(STREAM_PREFIX) :]
        verb, _, target_name = name.partition(".")
        make = queue if request.destination.is_queue else topic
        try:
            if not target_name:
                raise BrokerError(f"stream request {request.destination} names no destination")
            target = make(target_name)
            match verb:
                case "Offsets":
                    return [self._map_reply(request, await self._offsets(request, target))]
                case "Range":
                    return [*await self._range(request, target), self._end_marker(request)]
                case "Blocks":
                    blocks = await self._blocks(request, target, deliver)
                    return [*blocks, self._end_marker(request)]
                case "Commit":
                    return [self._map_reply(request, await self._commit(request, target))]
                case _:
                    raise BrokerError(
                        f"unknown stream request {verb!r}: Offsets, Range, Blocks, Commit or Append"
                    )
        except BrokerError as exc:
            return [self._map_reply(request, {"error": str(exc)})]

    async def _offsets(self, request: Message, target: Destination) -> dict[str, PropertyValue]:
        props = request.properties
        after = _int(props, "after", 0)
        limit = _int(props, "maxMessages", 0)
        watermark = self.broker.query.sequence_watermark()
        up_to = min(_int(props, "upTo", watermark), watermark)
        splits = max(1, _int(props, "splits", 1))
        subscription = _subscription(request, target)
        sequences = await self.broker.contents.sequences(
            target, subscription, after, up_to, max(0, limit)
        )
        bounds = _bounds(after, sequences, splits)
        if sequences and _flag(props, "prepare"):

            def fetch(after: int, up_to: int) -> Awaitable[list[Message]]:
                return self.broker.contents.messages(target, subscription, after, up_to)

            self.prepared.prepare((target, subscription), bounds, fetch)
        return {"end": bounds[-1], "count": len(sequences), "bounds": ",".join(map(str, bounds))}

    async def _held(self, request: Message, target: Destination) -> list[Message]:
        """What a ``Range`` or ``Blocks`` request asks for, in sequence order."""
        after, up_to = _int(request.properties, "after"), _int(request.properties, "upTo")
        subscription = _subscription(request, target)
        return await self.broker.contents.messages(target, subscription, after, up_to)

    async def _range(self, request: Message, target: Destination) -> list[Message]:
        assert request.reply_to is not None
        return [_copy(m, request.reply_to) for m in await self._held(request, target)]

    async def _blocks(
        self, request: Message, target: Destination, deliver: Deliver | None
    ) -> list[Message]:
        props = request.properties
        block_bytes = max(1, _int(props, "blockBytes", DEFAULT_BLOCK_BYTES))
        held = await self._held(request, target)
        reader = (target, _subscription(request, target))
        after, up_to = _int(props, "after"), _int(props, "upTo")
        ready = self.prepared.take(reader, after, up_to, held, block_bytes)
        runs, bodies = ready if ready is not None else (cut_blocks(held, block_bytes), [])
        blocks = (
            self._block(request, run, bodies[i] if i < len(bodies) else None)
            for i, run in enumerate(runs)
        )
        if deliver is None:
            return list(blocks)
        for block in blocks:
            await deliver([block])
            await asyncio.sleep(0)  # (the loop's turn: writes, other requests)
        return []

    def _block(self, request: Message, run: Sequence[Message], body: bytes | None) -> Message:
        if body is None:
            body = _encode(run)
        return self.replies.reply(request, body, BodyType.BYTES, {COUNT_PROPERTY: len(run)})

    async def _commit(self, request: Message, target: Destination) -> dict[str, PropertyValue]:
        up_to = _int(request.properties, "upTo")
        subscription = _subscription(request, target)
        removed = await self.broker.contents.remove_through(target, subscription, up_to)
        self.prepared.forget_through((target, subscription), up_to)
        return {"removed": removed}

    def _map_reply(self, request: Message, body: dict[str, PropertyValue]) -> Message:
        """A map message, with the same entries as properties: a STOMP client reads them as
        headers (it cannot read an OpenWire map body)."""
        return self.replies.map_reply(request, dict(body), properties=body)

    def _end_marker(self, request: Message) -> Message:
        # The lowest priority: copies keep theirs, and the reply queue hands out higher
        # priorities first; a marker of priority 4 overtook copies of priority 0-3.
        marker = self.replies.reply(request, properties={END_PROPERTY: True})
        return replace(marker, priority=0)
