"""[[network_connectors]]: ActiveMQ's <networkConnector> attributes in snake_case."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from dovecote.config.base import ConfigError, LimitOrUnset, Positive, Section
from dovecote.network.settings import (
    Backoff,
    DestinationPattern,
    NetworkConnectorSettings,
    NetworkUriError,
    parse_network_uri,
)


class NetworkDestinationEntry(Section, frozen=True):
    """A destination in a network connector's lists: ``{ queue = "orders.>" }`` or
    ``{ topic = "prices.*" }`` (wildcards allowed)."""

    queue: str | None = None
    topic: str | None = None

    def to_pattern(self, where: str) -> DestinationPattern:
        if (self.queue is None) == (self.topic is None):
            raise ConfigError(f"{where}: give either queue or topic")
        if self.queue is not None:
            return DestinationPattern(self.queue, True)
        assert self.topic is not None
        return DestinationPattern(self.topic, False)


class NetworkConnectorSection(Section, frozen=True):
    """``[[network_connectors]]``: ActiveMQ's ``<networkConnector>`` attributes in snake_case
    (docs/networks.md)."""

    uri: str
    """static:(tcp://host:port,...) or masterslave:(tcp://master:port,tcp://slave:port)."""
    name: str = "bridge"
    duplex: bool = False
    network_ttl: Positive = 1
    message_ttl: LimitOrUnset = -1
    """-1: network_ttl."""
    consumer_ttl: LimitOrUnset = -1
    """-1: network_ttl."""
    conduit_subscriptions: bool = True
    decrease_network_consumer_priority: bool = False
    dynamic_only: bool = False
    dynamically_included_destinations: tuple[NetworkDestinationEntry, ...] = ()
    excluded_destinations: tuple[NetworkDestinationEntry, ...] = ()
    statically_included_destinations: tuple[NetworkDestinationEntry, ...] = ()
    prefetch_size: Positive = 1000
    user: str | None = None
    password: str | None = None
    initial_reconnect_delay_ms: Positive = 1_000
    max_reconnect_delay_ms: Positive = 30_000
    use_exponential_backoff: bool = True
    back_off_multiplier: Annotated[float, Meta(ge=1.0)] = 2.0
    sync_durable_subs: bool = False
    """A starting bridge syncs the network durable subscriptions with the remote's."""
    replay_when_no_consumers: bool = True
    """Queue messages go back over the bridge they came by when their consumers moved."""

    def to_settings(self, index: int) -> NetworkConnectorSettings:
        where = f"network_connectors.{index}"
        try:
            uri = parse_network_uri(self.uri)
        except NetworkUriError as exc:
            raise ConfigError(f"{where}.uri: {exc}") from None

        def patterns(
            key: str, entries: tuple[NetworkDestinationEntry, ...]
        ) -> tuple[DestinationPattern, ...]:
            return tuple(e.to_pattern(f"{where}.{key}.{i}") for i, e in enumerate(entries))

        return NetworkConnectorSettings(
            name=self.name,
            uri=uri,
            duplex=self.duplex,
            network_ttl=self.network_ttl,
            message_ttl=self.network_ttl if self.message_ttl < 0 else self.message_ttl,
            consumer_ttl=self.network_ttl if self.consumer_ttl < 0 else self.consumer_ttl,
            conduit_subscriptions=self.conduit_subscriptions,
            decrease_network_consumer_priority=self.decrease_network_consumer_priority,
            dynamic_only=self.dynamic_only,
            dynamically_included=patterns(
                "dynamically_included_destinations", self.dynamically_included_destinations
            ),
            excluded=patterns("excluded_destinations", self.excluded_destinations),
            statically_included=patterns(
                "statically_included_destinations", self.statically_included_destinations
            ),
            prefetch_size=self.prefetch_size,
            user=self.user,
            password=self.password,
            backoff=Backoff(
                self.initial_reconnect_delay_ms,
                self.max_reconnect_delay_ms,
                self.back_off_multiplier,
                self.use_exponential_backoff,
            ),
            replay_when_no_consumers=self.replay_when_no_consumers,
            sync_durable_subs=self.sync_durable_subs,
        )
