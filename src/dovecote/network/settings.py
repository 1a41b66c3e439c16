"""A network connector's settings, as ActiveMQ's ``<networkConnector>`` attributes name them
(dovecote.config reads them from ``[[network_connectors]]`` in snake_case), and its URI.

``static:(tcp://a:61616,tcp://b:61616)`` bridges to every broker listed, each on its own;
``masterslave:(tcp://m:61616,tcp://s:61616)`` to whichever of them answers first (the
master of a shared-store pair), trying the next when it fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

from dovecote.core.destinations import Destination, wildcard_matches

NETWORK_CONSUMER_PRIORITY: Final = -5
"""ActiveMQ's ConsumerInfo.NETWORK_CONSUMER_PRIORITY: with decreaseNetworkConsumerPriority,
a bridge's consumer is offered a message only after the local consumers."""

_URI = re.compile(r"^(?P<kind>static|masterslave):(?://)?\s*\((?P<list>[^)]*)\)\s*(?:\?.*)?$")
_ADDRESS = re.compile(r"^(?:tcp|nio)://(?P<host>\[[^\]]+\]|[^:/?]+):(?P<port>\d+)(?:[/?].*)?$")


class NetworkUriError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class RemoteAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"tcp://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class NetworkUri:
    kind: Literal["static", "masterslave"]
    addresses: tuple[RemoteAddress, ...]


def parse_network_uri(uri: str) -> NetworkUri:
    """``static:(tcp://h:p,...)`` or ``masterslave:(...)``; NetworkUriError says what is
    wrong (only tcp:// brokers: the bridge speaks plain OpenWire)."""
    match = _URI.match(uri.strip())
    if match is None:
        raise NetworkUriError(
            f"{uri!r} is not a network connector URI: write static:(tcp://host:port,...) "
            "or masterslave:(tcp://host:port,...)"
        )
    addresses = []
    for part in match["list"].split(","):
        found = _ADDRESS.match(part.strip())
        if found is None:
            raise NetworkUriError(f"{part.strip()!r} in {uri!r} is not tcp://host:port")
        addresses.append(RemoteAddress(found["host"].strip("[]"), int(found["port"])))
    if not addresses:
        raise NetworkUriError(f"{uri!r} names no broker")
    if match["kind"] == "static":
        return NetworkUri("static", tuple(addresses))
    return NetworkUri("masterslave", tuple(addresses))


@dataclass(frozen=True, slots=True)
class DestinationPattern:
    """One entry of an included or excluded list: a queue or topic name, wildcards allowed."""

    pattern: str
    queues: bool

    def matches(self, destination: Destination) -> bool:
        if destination.is_queue != self.queues:
            return False
        return self.pattern == ">" or wildcard_matches(self.pattern, destination.name)

    def __str__(self) -> str:
        return f"{'queue' if self.queues else 'topic'}://{self.pattern}"


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long a bridge waits before connecting again: ActiveMQ's static discovery
    (initialReconnectDelay 1 s, doubled each failure up to maxReconnectDelay 30 s)."""

    initial_ms: int = 1_000
    maximum_ms: int = 30_000
    multiplier: float = 2.0
    exponential: bool = True

    def delays(self) -> list[float]:
        """The waits, in seconds, of the first failures; the last one repeats after."""
        waits, delay = [], float(self.initial_ms)
        while True:
            waits.append(min(delay, self.maximum_ms) / 1000)
            if not self.exponential or delay >= self.maximum_ms:
                return waits
            delay *= self.multiplier


@dataclass(frozen=True, slots=True)
class NetworkConnectorSettings:
    name: str
    uri: NetworkUri
    duplex: bool = False
    network_ttl: int = 1
    message_ttl: int = 1
    """How many brokers a message may pass through (defaults to network_ttl)."""
    consumer_ttl: int = 1
    """How far a consumer's demand travels (defaults to network_ttl)."""
    conduit_subscriptions: bool = True
    decrease_network_consumer_priority: bool = False
    dynamic_only: bool = False
    dynamically_included: tuple[DestinationPattern, ...] = ()
    excluded: tuple[DestinationPattern, ...] = ()
    statically_included: tuple[DestinationPattern, ...] = ()
    prefetch_size: int = 1000
    user: str | None = None
    password: str | None = None
    backoff: Backoff = field(default_factory=Backoff)
    sync_durable_subs: bool = False
    """ActiveMQ's syncDurableSubs: a starting bridge asks the remote for its durable
    subscriptions on the dynamically included destinations (network/sync.py)."""
    replay_when_no_consumers: bool = True
    """Beyond ActiveMQ's default: a queue message that came over this bridge may go back
    across it when no consumer is left here (its consumers moved there)."""

    def network_properties(self, broker_name: str) -> str:
        """The bridge's configuration as its BrokerInfo carries it (``networkProperties``, in
        java.util.Properties text): the broker at the other end of a duplex connector
        configures its bridge back from these (without ``duplex`` there, ActiveMQ's bridge
        back has no producer for what we forward and ends the connection). As ActiveMQ's
        bridge, networkTTL is left out (messageTTL and consumerTTL say it)."""
        values: dict[str, object] = {
            "name": self.name, "brokerName": broker_name, "duplex": self.duplex,
            "messageTTL": self.message_ttl, "consumerTTL": self.consumer_ttl,
            "conduitSubscriptions": self.conduit_subscriptions, "dynamicOnly": self.dynamic_only,
            "decreaseNetworkConsumerPriority": self.decrease_network_consumer_priority,
            "prefetchSize": self.prefetch_size, "userName": self.user, "password": self.password,
            "syncDurableSubs": self.sync_durable_subs,
            "excludedDestinations": _destination_list(self.excluded),
            "dynamicallyIncludedDestinations": _destination_list(self.dynamically_included),
            "staticallyIncludedDestinations": _destination_list(self.statically_included),
        }  # fmt: skip
        lines = [
            f"{key}={_properties_escape(_java_text(value))}"
            for key, value in values.items()
            if value is not None
        ]
        return "\n".join(lines) + "\n"

    def wants(self, destination: Destination) -> bool:
        """Whether demand for ``destination`` is bridged (excluded wins; an included list,
        when given, must name it)."""
        if any(p.matches(destination) for p in self.excluded):
            return False
        if not self.dynamically_included:
            return True
        return any(p.matches(destination) for p in self.dynamically_included)


def _destination_list(patterns: tuple[DestinationPattern, ...]) -> str | None:
    """ActiveMQ's text for a destination list: ``[queue://a, topic://b.>]``."""
    return f"[{', '.join(str(p) for p in patterns)}]" if patterns else None


def _java_text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _properties_escape(value: str) -> str:
    """A value as java.util.Properties.store writes it (what its load reads back)."""
    out = []
    for i, char in enumerate(value):
        if char in "\\=:#!" or (char == " " and i == 0):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif not " " <= char <= "~":  # (UTF-16 units, as Java writes them)
            units = char.encode("utf-16-be")
            out += [f"\\u{units[j]:02x}{units[j + 1]:02x}" for j in range(0, len(units), 2)]
        else:
            out.append(char)
    return "".join(out)
