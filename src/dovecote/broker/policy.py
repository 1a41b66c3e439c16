"""Destination policies (ActiveMQ's policyEntry): dead-letter strategy, broker-side
redelivery limit, expiry sweep, and the settings the broker takes from the config."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Final

from dovecote.core.commands import (
    DURABLE_TOPIC_PREFETCH,
    QUEUE_BROWSER_PREFETCH,
    QUEUE_PREFETCH,
    TOPIC_PREFETCH,
    ConsumerInfo,
)
from dovecote.core.destinations import Destination, DestinationType, queue, wildcard_matches

OPTIMIZE_DURABLE_TOPIC_PREFETCH: Final = 1000
"""What the Java client asks for an auto-acknowledging durable subscriber (its
optimizeDurableTopicPrefetch); a policy treats it as a default, as ActiveMQ does."""


class DeadLetterKind(StrEnum):
    SHARED = "shared"
    INDIVIDUAL = "individual"


@dataclass(frozen=True, slots=True)
class DeadLetterStrategy:
    """Where a message goes when it cannot be delivered (compatibility R3)."""

    kind: DeadLetterKind = DeadLetterKind.SHARED
    shared_queue: str = "ActiveMQ.DLQ"
    queue_prefix: str = "DLQ."
    topic_prefix: str = "DLQ."
    use_queue_for_queue_messages: bool = True
    use_queue_for_topic_messages: bool = True
    process_expired: bool = True
    process_non_persistent: bool = False

    def dead_letter_destination(self, original: Destination) -> Destination:
        if self.kind is DeadLetterKind.SHARED:
            return queue(self.shared_queue)
        if original.is_queue:
            prefix = self.queue_prefix
            as_queue = self.use_queue_for_queue_messages
        else:
            prefix = self.topic_prefix
            as_queue = self.use_queue_for_topic_messages
        kind = DestinationType.QUEUE if as_queue else DestinationType.TOPIC
        return Destination(kind, prefix + original.name)

    def wants(self, persistent: bool, expired: bool) -> bool:
        """Whether a dead message is kept in the DLQ (True) or discarded."""
        if expired and not self.process_expired:
            return False
        return persistent or self.process_non_persistent


@dataclass(frozen=True, slots=True)
class DestinationPolicy:
    """One policy entry. ``pattern`` is a destination name with optional wildcards
    (``>`` matches every destination); ``for_queues`` picks queues or topics."""

    pattern: str = ">"
    for_queues: bool = True
    dead_letter: DeadLetterStrategy = field(default_factory=DeadLetterStrategy)
    maximum_redeliveries: int = 6
    """Broker-side limit (like ActiveMQ's redelivery plugin): a message returned for
    redelivery more often goes to the DLQ. -1 redelivers forever."""
    pending_message_limit: int = -1
    """Non-durable topic subscribers keep at most this many pending messages beyond their
    prefetch, dropping the oldest (constantPendingMessageLimitStrategy, compatibility D4);
    -1 = all."""
    memory_limit: int = -1
    """Bytes of messages the destination may hold in memory (-1: only the broker's limit)."""
    producer_flow_control: bool = True
    """At the memory limit, producers wait. Off: non-persistent messages spill to the temp
    store instead (persistent ones still wait)."""
    store_cursor: bool = True
    """ActiveMQ's default pending-queue cursor (the store cursor): once the destination's
    memory is 70% used, persistent messages wait out of memory (held by a paging store
    alone and paged in a window at a time, or their bodies in the temp store), so a
    persistent backlog is bounded by the store, not by memory. False is ActiveMQ's
    vmQueueCursor: every message stays in memory and producers wait at the limit."""
    send_advisory_if_no_consumers: bool = False
    """ActiveMQ's sendAdvisoryIfNoConsumers: non-persistent messages sent while nobody
    consumes are copied to ActiveMQ.Advisory.NoConsumer.* (broker/advisories.py)."""
    advisory_for_slow_consumers: bool = False
    advisory_for_fast_producers: bool = False
    advisory_when_full: bool = False
    advisory_for_discarding_messages: bool = False
    advisory_for_delivery: bool = False
    advisory_for_consumed: bool = False
    """ActiveMQ's advisoryForSlowConsumers, advisoryForFastProducers, advisoryWhenFull,
    advisoryForDiscardingMessages, advisoryForDelivery, advisoryForConsumed
    (broker/flag_advisories.py)."""
    queue_prefetch: int = QUEUE_PREFETCH
    queue_browser_prefetch: int = QUEUE_BROWSER_PREFETCH
    topic_prefetch: int = TOPIC_PREFETCH
    durable_topic_prefetch: int = DURABLE_TOPIC_PREFETCH
    """The policy's prefetch sizes: a consumer that asked for its client's default gets the
    policy's instead (ActiveMQ's policyEntry queuePrefetch etc.); one that asked for
    anything else keeps it."""

    def configure_prefetch(self, info: ConsumerInfo) -> ConsumerInfo:
        asked = info.prefetch_size
        destination = info.destination
        if info.browser:
            size = self.queue_browser_prefetch if asked == QUEUE_BROWSER_PREFETCH else asked
        elif destination.is_queue:
            size = self.queue_prefetch if asked == QUEUE_PREFETCH else asked
        elif info.subscription_name is not None:
            defaults = (DURABLE_TOPIC_PREFETCH, OPTIMIZE_DURABLE_TOPIC_PREFETCH)
            size = self.durable_topic_prefetch if asked in defaults else asked
        else:
            size = self.topic_prefetch if asked == TOPIC_PREFETCH else asked
        return info if size == asked else replace(info, prefetch_size=size)

    def applies_to(self, destination: Destination) -> bool:
        if destination.is_queue != self.for_queues:
            return False
        return self.pattern == ">" or wildcard_matches(self.pattern, destination.name)


@dataclass(frozen=True, slots=True)
class PolicyMap:
    entries: tuple[DestinationPolicy, ...] = ()
    default_queue: DestinationPolicy = field(default_factory=DestinationPolicy)
    default_topic: DestinationPolicy = field(
        default_factory=lambda: DestinationPolicy(for_queues=False)
    )

    def for_destination(self, destination: Destination) -> DestinationPolicy:
        # The first entry that matches wins, as in a configuration file read top-down.
        for entry in self.entries:
            if entry.applies_to(destination):
                return entry
        return self.default_queue if destination.is_queue else self.default_topic


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """What the broker core needs from the configuration."""

    broker_name: str = "localhost"
    policies: PolicyMap = field(default_factory=PolicyMap)
    expire_messages_period_ms: int = 30_000
    """How often every destination is swept for expired messages (compatibility R4)."""
    memory_limit: int = 256 * 1024 * 1024
    """systemUsage memoryUsage: bytes of messages held in memory across the broker."""
    store_limit: int = 100 * 1024**3
    """systemUsage storeUsage: bytes of persistent messages kept."""
    temp_limit: int = 50 * 1024**3
    """systemUsage tempUsage: bytes of non-persistent messages spilled to disk."""
    send_fail_if_no_space: bool = False
    """At a limit, fail the send with an error instead of making the producer wait."""
    temp_directory: Path = Path("data/tmp_storage")
    """The temp store; wiped at every start."""
