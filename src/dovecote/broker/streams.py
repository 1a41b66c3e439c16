"""Offset-based reading for streaming engines (SPEC X1): the broker side of the Spark source's
exactly-once hand-off. Documented for clients in docs/streams.md.

A reader addresses a queue, or a durable topic subscription, by the broker's sequence numbers
(``Message.sequence``). Three requests, each an ordinary message sent with a reply-to to a
``dovecote.Stream.<verb>.<name>`` destination of the kind being read (so any STOMP or
OpenWire client can make them; nothing is stored or routed for the request itself):

- ``Offsets``: the plan for the next batch. Properties ``after`` (exclusive start), optional
  ``maxMessages``, ``upTo`` and ``splits``. The reply map holds ``end`` (the sequence number
  of the last message planned, or ``after`` when there is none), ``count`` and ``bounds``: a
  comma-separated list of ``splits + 1`` numbers cutting (after, end] into parts of about the
  same number of messages. Only messages already enqueued are planned (the sequencer's
  watermark), so a range never grows once planned.
- ``Range``: the messages with ``after < sequence <= upTo``, in sequence order, copied to the
  reply-to with the properties ``dovecoteSequence``, ``dovecoteDestination`` (and
  ``dovecoteExpiration``, ``dovecotePersistent`` where they apply), then an empty
  message with ``dovecoteEnd = true``. Nothing is consumed: reading a range twice (a retried
  task) gives the same messages.
- ``Commit``: remove every message with ``sequence <= upTo``, durably, then reply
  ``{"removed": n}``. Spark calls it when a batch is committed; a later commit covers an
  earlier one that was lost with a crashed driver.

For a topic the request names the durable subscription with the properties ``clientId`` and
``subscriptionName``; ``Offsets`` creates it when it does not exist yet (messages sent before
that are not kept for it, as for any durable subscriber). The reader must be the only
consumer of what it reads: a consumer attached to the same queue takes messages out of the
ranges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dovecote.broker import stats
from dovecote.broker.consumer import Entry, release_all
from dovecote.broker.queue import Queue
from dovecote.broker.topic import TopicSubscription
from dovecote.core.destinations import Destination, queue, topic
from dovecote.core.errors import BrokerError
from dovecote.core.message import BodyType, Message, PropertyValue
from dovecote.protocol.openwire.primitives import encode_map
from dovecote.store.api import AddSubscription, DurableSubscription

if TYPE_CHECKING:
    from dovecote.broker.broker import Broker

STREAM_PREFIX = "dovecote.Stream."
SEQUENCE_PROPERTY = "dovecoteSequence"
DESTINATION_PROPERTY = "dovecoteDestination"
END_PROPERTY = "dovecoteEnd"
EXPIRATION_PROPERTY = "dovecoteExpiration"
PERSISTENT_PROPERTY = "dovecotePersistent"


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


async def _origin(broker: Broker, request: Message, target: Destination, create: bool
                  ) -> Queue | TopicSubscription | None:  # fmt: skip
    if target.is_queue:
        queue = broker.regions.queue(target) if create else broker.regions.queues.get(target)
        if queue is not None:
            # Offsets and ranges see the whole queue: what only the store held comes in.
            broker.regions.page_in_all(queue)
        return queue
    client_id = request.properties.get("clientId")
    name = request.properties.get("subscriptionName")
    if not isinstance(client_id, str) or not isinstance(name, str):
        raise BrokerError("reading a topic needs the properties clientId and subscriptionName")
    sub = broker.regions.durables.get((client_id, name))
    if sub is None and create:
        durable = DurableSubscription(client_id, name, target)
        await broker.store.write([AddSubscription(durable)])
        sub = broker.regions.add_topic_subscription(TopicSubscription(target, durable=durable))
    if sub is not None and sub.destination != target:
        raise BrokerError(f"subscription {name!r} of {client_id!r} is on {sub.destination}")
    return sub


def _entries(origin: Queue | TopicSubscription | None) -> list[Entry]:
    """Everything the destination holds (waiting or dispatched), in sequence order."""
    if origin is None:
        return []
    if isinstance(origin, Queue):
        entries = list(origin.pending_entries())
        consumers = origin.consumers
    else:
        entries = list(origin.pending)
        consumers = [origin.consumer] if origin.consumer is not None else []
    for consumer in consumers:
        entries.extend(consumer.inflight.values())
    entries.sort(key=lambda e: e.message.sequence)
    return entries


def _bounds(after: int, sequences: list[int], splits: int) -> list[int]:
    """``splits + 1`` cut points with about the same number of messages between each."""
    bounds = [after]
    n = len(sequences)
    for i in range(1, splits):
        cut = n * i // splits
        bounds.append(sequences[cut - 1] if cut > 0 else after)
    bounds.append(sequences[-1] if sequences else after)
    return bounds


async def handle(broker: Broker, request: Message) -> list[Message]:
    """Answer one stream request; errors become a reply with an ``error`` entry."""
    reply_to = request.reply_to
    assert reply_to is not None
    name = request.destination.name[len(STREAM_PREFIX) :]
    verb, _, target_name = name.partition(".")
    make = queue if request.destination.is_queue else topic
    try:
        if not target_name:
            raise BrokerError(f"stream request {request.destination} names no destination")
        target = make(target_name)
        match verb:
            case "Offsets":
                return [_map_reply(broker, request, await _offsets(broker, request, target))]
            case "Range":
                return [*await _range(broker, request, target), _end_marker(broker, request)]
            case "Commit":
                return [_map_reply(broker, request, await _commit(broker, request, target))]
            case _:
                raise BrokerError(f"unknown stream request {verb!r}: Offsets, Range or Commit")
    except BrokerError as exc:
        return [_map_reply(broker, request, {"error": str(exc)})]


async def _offsets(
    broker: Broker, request: Message, target: Destination
) -> dict[str, PropertyValue]:
    props = request.properties
    after = _int(props, "after", 0)
    limit = _int(props, "maxMessages", 0)
    up_to = min(_int(props, "upTo", broker.regions.sequencer.watermark),
                broker.regions.sequencer.watermark)  # fmt: skip
    splits = max(1, _int(props, "splits", 1))
    origin = await _origin(broker, request, target, create=True)
    sequences = [s for e in _entries(origin) if after < (s := e.message.sequence) <= up_to]
    if limit > 0:
        sequences = sequences[:limit]
    bounds = _bounds(after, sequences, splits)
    return {"end": bounds[-1], "count": len(sequences), "bounds": ",".join(map(str, bounds))}


async def _range(broker: Broker, request: Message, target: Destination) -> list[Message]:
    after, up_to = _int(request.properties, "after"), _int(request.properties, "upTo")
    origin = await _origin(broker, request, target, create=False)
    assert request.reply_to is not None
    copies = []
    for entry in _entries(origin):
        if after < entry.message.sequence <= up_to:
            m = entry.full_message()
            properties = dict(m.properties)
            properties[SEQUENCE_PROPERTY] = m.sequence
            properties[DESTINATION_PROPERTY] = str(m.destination)
            if m.expiration:
                # The copy itself must not expire on its way to the reader.
                properties[EXPIRATION_PROPERTY] = m.expiration
            if m.persistent:
                properties[PERSISTENT_PROPERTY] = True
            copies.append(
                Message(
                    message_id=m.message_id,
                    destination=request.reply_to,
                    body=m.body,
                    body_type=m.body_type,
                    priority=m.priority,
                    timestamp=m.timestamp,
                    expiration=0,
                    correlation_id=m.correlation_id,
                    reply_to=m.reply_to,
                    type=m.type,
                    redelivery_counter=m.redelivery_counter,
                    properties=properties,
                )
            )
    return copies


async def _commit(
    broker: Broker, request: Message, target: Destination
) -> dict[str, PropertyValue]:
    up_to = _int(request.properties, "upTo")
    origin = await _origin(broker, request, target, create=False)
    if origin is None:
        return {"removed": 0}
    regions = broker.regions
    if isinstance(origin, Queue):
        removed = origin.remove_pending(lambda e: e.message.sequence <= up_to)
        origin.stats.dequeued += len(removed)
    else:
        removed = [e for e in origin.pending if e.message.sequence <= up_to]
        kept = [e for e in origin.pending if e.message.sequence > up_to]
        origin.pending.clear()
        origin.pending.extend(kept)
    ops = regions.consume_ops(origin, removed)
    if ops:
        await broker.store.write(ops)
    release_all(removed)
    return {"removed": len(removed)}


def _map_reply(broker: Broker, request: Message, body: dict[str, PropertyValue]) -> Message:
    """A map message, with the same entries as properties: a STOMP client reads them as
    headers (it cannot read an OpenWire map body)."""
    return stats.reply(broker, request, encode_map(dict(body)), BodyType.MAP, properties=body)


def _end_marker(broker: Broker, request: Message) -> Message:
    return stats.reply(broker, request, properties={END_PROPERTY: True})
