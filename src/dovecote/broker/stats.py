"""What operators ask the broker (SPEC O1, O2): counters per destination and for the whole
broker, purging a queue, and ActiveMQ's statistics plugin, so that a JMS client (and
``dovecote dstat``) can ask over the wire by sending to ``ActiveMQ.Statistics.Destination.<query>``
or ``ActiveMQ.Statistics.Broker`` with a reply-to destination, exactly as it would ask an
ActiveMQ that has ``<statisticsBrokerPlugin/>``.

These are functions over a broker rather than broker methods so that the broker module
stays about messaging; they read the regions and connections and never change routing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING

from dovecote.broker.consumer import release_all
from dovecote.core.destinations import Destination, destination_matches, queue, topic
from dovecote.core.message import BodyType, Message, PropertyValue
from dovecote.protocol.openwire.primitives import JavaInt, encode_map

if TYPE_CHECKING:
    from dovecote.broker.broker import Broker

STATISTICS_PREFIX = "ActiveMQ.Statistics."
DESTINATION_STATISTICS = "ActiveMQ.Statistics.Destination"
BROKER_STATISTICS = "ActiveMQ.Statistics.Broker"
END_OF_LIST = "ActiveMQ.Statistics.Destination.List.End.With.Null"
"""In the query or as a property: finish the replies with an empty map message."""


@dataclass(frozen=True, slots=True)
class DestinationStats:
    destination: Destination
    size: int
    """Messages held: waiting plus dispatched and not yet acknowledged."""
    enqueued: int
    dequeued: int
    dispatched: int
    expired: int
    inflight: int
    consumers: int
    producers: int
    memory_usage: int
    memory_limit: int

    def as_map(self, broker_name: str) -> dict[str, object]:
        """The fields ActiveMQ's statistics plugin puts in its map message."""
        percent = 100 * self.memory_usage // self.memory_limit if self.memory_limit > 0 else 0
        return {
            "brokerName": broker_name,
            "destinationName": str(self.destination),
            "size": self.size,
            "enqueueCount": self.enqueued,
            "dequeueCount": self.dequeued,
            "dispatchCount": self.dispatched,
            "expiredCount": self.expired,
            "inflightCount": self.inflight,
            "consumerCount": self.consumers,
            "producerCount": self.producers,
            "memoryUsage": self.memory_usage,
            "memoryLimit": self.memory_limit,
            "memoryPercentUsage": JavaInt(percent),
        }

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.destination.name,
            "type": "queue" if self.destination.is_queue else "topic",
            "size": self.size,
            "enqueued": self.enqueued,
            "dequeued": self.dequeued,
            "dispatched": self.dispatched,
            "expired": self.expired,
            "inflight": self.inflight,
            "consumers": self.consumers,
            "producers": self.producers,
            "memory_usage": self.memory_usage,
            "memory_limit": self.memory_limit,
        }


def _producer_counts(broker: Broker) -> dict[Destination, int]:
    counts: dict[Destination, int] = {}
    for state in broker.connections():
        for destination in state.producers.values():
            if destination is not None:
                for component in destination.components():
                    counts[component] = counts.get(component, 0) + 1
    return counts


def destination_stats(broker: Broker, pattern: Destination | None = None) -> list[DestinationStats]:
    """Every queue and topic (or those ``pattern`` matches, wildcards allowed), by name."""
    regions = broker.regions
    producers = _producer_counts(broker)
    found: list[DestinationStats] = []
    for destination, q in regions.queues.items():
        if pattern is not None and not destination_matches(pattern, destination):
            continue
        memory = regions.memory_usage(destination)
        stats = q.stats
        found.append(DestinationStats(
            destination, q.size(), stats.enqueued, stats.dequeued, stats.dispatched,
            stats.expired, q.inflight_count, len(q.consumers), producers.get(destination, 0),
            memory.used, memory.limit,
        ))  # fmt: skip
    for destination in set(regions.topic_stats) | set(regions.topic_subs):
        if pattern is not None and not destination_matches(pattern, destination):
            continue
        subs = regions.topic_subs.get(destination, [])
        inflight = sum(len(s.consumer.inflight) for s in subs if s.consumer is not None)
        stats = regions.topic_counters(destination)
        memory = regions.memory_usage(destination)
        found.append(DestinationStats(
            destination, sum(len(s.pending) for s in subs) + inflight, stats.enqueued,
            stats.dequeued, stats.dispatched, stats.expired, inflight,
            sum(1 for s in subs if s.consumer is not None), producers.get(destination, 0),
            memory.used, memory.limit,
        ))  # fmt: skip
    found.sort(key=lambda s: (not s.destination.is_queue, s.destination.name))
    return found


def broker_stats(
    broker: Broker, all_stats: list[DestinationStats] | None = None
) -> dict[str, object]:
    """Totals over every destination (``all_stats`` if the caller has them already) and the
    system usages (the plugin's broker fields)."""
    if all_stats is None:
        all_stats = destination_stats(broker)
    usage = broker.regions.usage
    return {
        "brokerName": broker.settings.broker_name,
        "size": sum(s.size for s in all_stats),
        "enqueueCount": sum(s.enqueued for s in all_stats),
        "dequeueCount": sum(s.dequeued for s in all_stats),
        "dispatchCount": sum(s.dispatched for s in all_stats),
        "expiredCount": sum(s.expired for s in all_stats),
        "inflightCount": sum(s.inflight for s in all_stats),
        "consumerCount": sum(s.consumers for s in all_stats),
        "producerCount": sum(s.producers for s in all_stats),
        "connectionCount": len(list(broker.connections())),
        "memoryUsage": usage.memory.used,
        "memoryLimit": usage.memory.limit,
        "storeUsage": usage.store.used,
        "storeLimit": usage.store.limit,
        "tempUsage": usage.temp.used,
        "tempLimit": usage.temp.limit,
    }


async def purge(broker: Broker, destination: Destination) -> int:
    """Remove every message waiting on a queue (not those a consumer holds unacknowledged,
    which its ack or its close settles); returns how many were removed."""
    q = broker.regions.queues.get(destination)
    if q is None:
        return 0
    removed = 0
    while True:  # a page at a time from the store, for a backlog only the store holds
        taken = q.remove_pending()
        ops = broker.regions.consume_ops(q, taken)
        if ops:
            await broker.store.write(ops)
        q.stats.dequeued += len(taken)
        release_all(taken)
        removed += len(taken)
        if not q.stored:
            return removed
        broker.regions.page_in(q)


_reply_ids = count(1)


def reply(
    broker: Broker,
    request: Message,
    body: bytes = b"",
    body_type: BodyType = BodyType.MESSAGE,
    properties: dict[str, PropertyValue] | None = None,
    type: str | None = None,
) -> Message:
    """A message from the broker itself to a request's reply-to, correlated with it (the
    statistics plugin's and the stream requests' answers)."""
    assert request.reply_to is not None
    return Message(
        message_id=f"{broker.statistics_producer}:{next(_reply_ids)}",
        destination=request.reply_to,
        body=body,
        body_type=body_type,
        timestamp=int(time.time() * 1000),
        type=type,
        correlation_id=request.correlation_id,
        properties=properties or {},
    )


def map_reply(
    broker: Broker, request: Message, body: dict[str, object], type: str | None = None
) -> Message:
    return reply(broker, request, encode_map(body), BodyType.MAP, type=type)


def statistics_replies(broker: Broker, request: Message) -> list[Message]:
    """The plugin's answer to a request sent to an ``ActiveMQ.Statistics.*`` destination:
    map messages to the request's reply-to, correlated with the request."""
    reply_to = request.reply_to
    assert reply_to is not None
    name = request.destination.name
    maps: list[dict[str, object]] = []
    if name.startswith(DESTINATION_STATISTICS):
        query = name[len(DESTINATION_STATISTICS) :].removeprefix(".")
        end_of_list = END_OF_LIST in query or END_OF_LIST in request.properties
        query = query.replace(END_OF_LIST, "")
        if query:
            make = queue if request.destination.is_queue else topic
            name_of = broker.settings.broker_name
            maps = [s.as_map(name_of) for s in destination_stats(broker, make(query))]
        if end_of_list:
            maps.append({})
    elif name.startswith(BROKER_STATISTICS):
        maps = [broker_stats(broker)]
    return [map_reply(broker, request, body, type="Advisory") for body in maps]
