"""The broker's read-only query API: what exists and what it holds, for everything outside
broker/ (the admin API, /metrics, the console) and for plugins (statistics, security).
Nothing here changes what the broker holds; callers never reach into the regions or the
connections themselves. Answers are snapshots (frozen views), read on the broker's loop.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from itertools import islice

from dovecote.broker.connection import ConnectionState, ConsumerRecord, Peer
from dovecote.broker.queue import Queue, QueueStats
from dovecote.broker.regions import Regions
from dovecote.core.destinations import Destination, destination_matches
from dovecote.core.ids import ConnectionId, ConsumerId
from dovecote.core.message import Message

_NO_COUNTS = QueueStats()


@dataclass(frozen=True, slots=True)
class DestinationView:
    """A queue or topic with its counters, as the admin API, /metrics and the statistics
    plugin show them."""

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


@dataclass(frozen=True, slots=True)
class UsageView:
    """The system usages (compatibility M6): bytes used of each limit."""

    memory_used: int
    memory_limit: int
    store_used: int
    store_limit: int
    temp_used: int
    temp_limit: int


@dataclass(frozen=True, slots=True)
class BrokerView:
    """Totals over every destination and the usages (ActiveMQ's statistics plugin's broker
    fields)."""

    broker_name: str
    destinations: tuple[DestinationView, ...]
    connections: int
    usage: UsageView

    def as_map(self) -> dict[str, object]:
        """The fields by ActiveMQ's names (the plugin's map message, /api/broker)."""
        all_views, usage = self.destinations, self.usage
        return {
            "brokerName": self.broker_name,
            "size": sum(s.size for s in all_views),
            "enqueueCount": sum(s.enqueued for s in all_views),
            "dequeueCount": sum(s.dequeued for s in all_views),
            "dispatchCount": sum(s.dispatched for s in all_views),
            "expiredCount": sum(s.expired for s in all_views),
            "inflightCount": sum(s.inflight for s in all_views),
            "consumerCount": sum(s.consumers for s in all_views),
            "producerCount": sum(s.producers for s in all_views),
            "connectionCount": self.connections,
            "memoryUsage": usage.memory_used,
            "memoryLimit": usage.memory_limit,
            "storeUsage": usage.store_used,
            "storeLimit": usage.store_limit,
            "tempUsage": usage.temp_used,
            "tempLimit": usage.temp_limit,
        }


@dataclass(frozen=True, slots=True)
class ConnectionView:
    connection_id: str
    client_id: str
    peer: Peer
    """Where it comes from: address, protocol, TLS and a client certificate's subject."""
    user: str | None
    """The authenticated user (None without authentication)."""
    sessions: int
    consumers: int
    producers: int


@dataclass(frozen=True, slots=True)
class ConsumerView:
    consumer_id: str
    connection_id: str
    destination: Destination
    selector: str | None
    subscription_name: str | None
    browser: bool
    prefetch: int
    inflight: int
    """Dispatched to it and not yet acknowledged."""


@dataclass(frozen=True, slots=True)
class ProducerView:
    producer_id: str
    connection_id: str
    destination: Destination | None
    """None: an anonymous producer (each message names its destination)."""


@dataclass(frozen=True, slots=True)
class DurableView:
    client_id: str
    name: str
    destination: Destination
    selector: str | None
    active: bool
    """A consumer is attached."""
    pending: int
    """Messages kept for it (waiting and in flight)."""


class BrokerQuery:
    def __init__(
        self,
        broker_name: str,
        regions: Regions,
        connections: Mapping[ConnectionId, ConnectionState],
        consumers: Mapping[ConsumerId, ConsumerRecord],
        open_temps: Container[Destination],
    ) -> None:
        self._broker_name = broker_name
        self._regions = regions
        self._connections = connections
        self._consumers = consumers
        self._open_temps = open_temps

    def destination_exists(self, destination: Destination) -> bool:
        """True for a queue or topic the broker knows (one created before, or a temporary
        destination that is open); composite destinations exist when all parts do."""
        regions = self._regions
        for part in destination.components():
            if part.is_temporary:
                if part not in self._open_temps:
                    return False
            elif part.is_queue:
                if part not in regions.queues:
                    return False
            elif part not in regions.topic_subs and part not in regions.topic_stats:
                return False
        return True

    # -- destinations ----------------------------------------------------------------------

    def destinations(self, pattern: Destination | None = None) -> list[DestinationView]:
        """Every queue and topic (or those ``pattern`` matches, wildcards allowed): queues
        first, then topics, each by name."""
        regions = self._regions
        producers = self._producer_counts()
        found: list[DestinationView] = []
        for destination, q in regions.queues.items():
            if pattern is not None and not destination_matches(pattern, destination):
                continue
            memory = regions.paging.memory_usage(destination)
            stats = q.stats
            found.append(DestinationView(
                destination, q.size(), stats.enqueued, stats.dequeued, stats.dispatched,
                stats.expired, q.inflight_count, len(q.consumers), producers.get(destination, 0),
                memory.used, memory.limit,
            ))  # fmt: skip
        for destination in set(regions.topic_stats) | set(regions.topic_subs):
            if pattern is not None and not destination_matches(pattern, destination):
                continue
            subs = regions.topic_subs.get(destination, [])
            inflight = sum(len(s.consumer.inflight) for s in subs if s.consumer is not None)
            stats = regions.topic_stats.get(destination, _NO_COUNTS)
            memory = regions.paging.memory_usage(destination)
            found.append(DestinationView(
                destination, sum(len(s.pending) for s in subs) + inflight, stats.enqueued,
                stats.dequeued, stats.dispatched, stats.expired, inflight,
                # (a durable subscription counts while inactive too, as in ActiveMQ)
                sum(1 for s in subs if s.consumer is not None or s.durable is not None),
                producers.get(destination, 0), memory.used, memory.limit,
            ))  # fmt: skip
        found.sort(key=lambda s: (not s.destination.is_queue, s.destination.name))
        return found

    def consumer_count(self, destination: Destination) -> int:
        """Consumers on the existing destinations ``destination`` names (a wildcard: each it
        matches; a topic's count includes the wildcard subscribers it reaches), as
        ActiveMQ's advisories count them."""
        regions = self._regions
        count = 0
        for part in destination.components():
            if part.is_queue:
                if part.is_wildcard:
                    count += sum(
                        len(q.consumers)
                        for d, q in regions.queues.items()
                        if destination_matches(part, d)
                    )
                elif (q := regions.queues.get(part)) is not None:
                    count += len(q.consumers)
                continue
            topics = [part] if not part.is_wildcard else [
                d for d in set(regions.topic_subs) | set(regions.topic_stats)
                if destination_matches(part, d)
            ]  # fmt: skip
            for topic in topics:
                # A durable subscription counts while inactive too, as in ActiveMQ.
                subs = regions.topic_subs.get(topic, [])
                count += sum(1 for s in subs if s.consumer is not None or s.durable is not None)
                count += sum(
                    1
                    for s in regions.wildcard_subs
                    if (s.consumer is not None or s.durable is not None)
                    and destination_matches(s.destination, topic)
                )
        return count

    def producer_count(self, destination: Destination) -> int:
        """Producers made for ``destination`` (or for a destination it matches)."""
        return sum(
            1
            for state in self._connections.values()
            for made_for in state.producers.values()
            if made_for is not None
            and any(destination_matches(destination, p) for p in made_for.components())
        )

    def _producer_counts(self) -> dict[Destination, int]:
        counts: dict[Destination, int] = {}
        for state in self._connections.values():
            for destination in state.producers.values():
                if destination is not None:
                    for component in destination.components():
                        counts[component] = counts.get(component, 0) + 1
        return counts

    def broker(self, destinations: list[DestinationView] | None = None) -> BrokerView:
        """Totals over every destination (``destinations`` when the caller has them)."""
        if destinations is None:
            destinations = self.destinations()
        return BrokerView(
            self._broker_name, tuple(destinations), len(self._connections), self.usage()
        )

    def usage(self) -> UsageView:
        usage = self._regions.paging.usage
        return UsageView(
            usage.memory.used, usage.memory.limit, usage.store.used, usage.store.limit,
            usage.temp.used, usage.temp.limit,
        )  # fmt: skip

    def store_degraded(self) -> str | None:
        """Why the store is in degraded mode (no writes accepted: a full disk, an I/O
        error), or None while it works."""
        return self._regions.store.degraded

    def browse(self, destination: Destination, limit: int) -> list[Message]:
        """Up to ``limit`` of the messages a queue holds, in order, without consuming them
        (none for a queue that does not exist)."""
        queue: Queue | None = self._regions.queues.get(destination)
        if queue is None:
            return []
        return list(islice(self._regions.paging.browse(queue), limit))

    def sequence_watermark(self) -> int:
        """The highest sequence number below which every message is enqueued (stream
        offsets plan only up to it)."""
        return self._regions.sequencer.watermark

    # -- clients ---------------------------------------------------------------------------

    def connections(self) -> list[ConnectionView]:
        return [
            ConnectionView(
                str(state.info.connection_id), state.client_id, state.peer,
                state.principal.user if state.principal is not None else None,
                len(state.sessions), len(state.consumers), len(state.producers),
            )
            for state in self._connections.values()
        ]  # fmt: skip

    def consumers(self) -> list[ConsumerView]:
        found = []
        for state in self._connections.values():
            for consumer_id in state.consumers:
                record = self._consumers.get(consumer_id)
                if record is None:
                    continue
                info = record.consumer.info
                found.append(ConsumerView(
                    str(consumer_id), str(state.info.connection_id), info.destination,
                    info.selector, info.subscription_name, info.browser, info.prefetch_size,
                    len(record.consumer.inflight),
                ))  # fmt: skip
        return found

    def producers(self) -> list[ProducerView]:
        return [
            ProducerView(str(producer_id), str(state.info.connection_id), destination)
            for state in self._connections.values()
            for producer_id, destination in state.producers.items()
        ]

    def durable_subscriptions(self) -> list[DurableView]:
        found = []
        for sub in self._regions.durables.values():
            durable = sub.durable
            assert durable is not None
            inflight = len(sub.consumer.inflight) if sub.consumer is not None else 0
            found.append(DurableView(
                durable.client_id, durable.name, durable.destination, durable.selector,
                sub.consumer is not None, len(sub.pending) + inflight,
            ))  # fmt: skip
        found.sort(key=lambda d: (d.client_id, d.name))
        return found
