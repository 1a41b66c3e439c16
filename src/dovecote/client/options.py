"""Broker URLs and connection options, as ActiveMQ's client reads them (SPEC P4, K1).

``tcp://host:61616?jms.useAsyncSend=true&jms.prefetchPolicy.queuePrefetch=10`` and
``failover:(tcp://a:61616,tcp://b:61616)?randomize=false``. Each query option is applied to
the object it names (``jms.*`` to the connection, ``wireFormat.*`` to the wire format,
``transport.*`` to the transport); an option dovecote does not know is an error naming it,
never silently ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class OptionError(ValueError):
    """A broker URL or an option in it is not understood; the message names it."""


@dataclass
class PrefetchPolicy:
    queuePrefetch: int = 1000
    topicPrefetch: int = 32766
    durableTopicPrefetch: int = 100
    queueBrowserPrefetch: int = 500

    def set_all(self, value: int) -> None:
        self.queuePrefetch = self.topicPrefetch = value
        self.durableTopicPrefetch = self.queueBrowserPrefetch = value


@dataclass
class RedeliveryPolicy:
    maximumRedeliveries: int = 6
    initialRedeliveryDelay: int = 1000
    redeliveryDelay: int = 1000
    useExponentialBackOff: bool = False
    backOffMultiplier: float = 5.0
    maximumRedeliveryDelay: int = -1

    def delay_ms(self, redeliveries: int) -> int:
        """How long to wait before redelivery number ``redeliveries`` (1 = the first)."""
        if redeliveries <= 1:
            return self.initialRedeliveryDelay
        delay = self.redeliveryDelay
        if self.useExponentialBackOff:
            delay = int(self.initialRedeliveryDelay * self.backOffMultiplier ** (redeliveries - 1))
        if self.maximumRedeliveryDelay > 0:
            delay = min(delay, self.maximumRedeliveryDelay)
        return delay


@dataclass
class ConnectionOptions:
    """The ``jms.*`` options of ActiveMQConnectionFactory that dovecote's client honours."""

    useAsyncSend: bool = False
    alwaysSyncSend: bool = False
    producerWindowSize: int = 0
    optimizeAcknowledge: bool = False
    optimizeAcknowledgeTimeOut: int = 300
    sendTimeout: int = 0
    dispatchAsync: bool = True
    watchTopicAdvisories: bool = True
    clientID: str | None = None
    userName: str | None = None
    password: str | None = None
    closeTimeout: int = 15000
    prefetchPolicy: PrefetchPolicy = field(default_factory=PrefetchPolicy)
    redeliveryPolicy: RedeliveryPolicy = field(default_factory=RedeliveryPolicy)


@dataclass
class WireFormatOptions:
    maxInactivityDuration: int = 30000
    maxInactivityDurationInitalDelay: int = 10000
    maxFrameSize: int = 100 * 1024 * 1024


@dataclass
class TransportOptions:
    connectionTimeout: int = 30000
    soTimeout: int = 0
    tcpNoDelay: bool = True


@dataclass
class FailoverOptions:
    randomize: bool = True
    initialReconnectDelay: int = 10
    maxReconnectDelay: int = 30000
    useExponentialBackOff: bool = True
    backOffMultiplier: float = 2.0
    maxReconnectAttempts: int = -1
    startupMaxReconnectAttempts: int = -1
    timeout: int = -1


@dataclass
class BrokerUrl:
    endpoints: list[tuple[str, str, int]]
    """(scheme, host, port) for each broker: one for tcp://, several for failover:."""
    failover: FailoverOptions | None
    connection: ConnectionOptions
    wire_format: WireFormatOptions
    transport: TransportOptions


_SCHEMES = {"tcp", "nio", "ssl", "auto"}


def _coerce(current: Any, text: str, name: str) -> Any:
    if isinstance(current, bool):
        if text.lower() not in ("true", "false"):
            raise OptionError(f"option {name} takes true or false, not {text!r}")
        return text.lower() == "true"
    if isinstance(current, int):
        try:
            return int(text)
        except ValueError:
            raise OptionError(f"option {name} takes an integer, not {text!r}") from None
    if isinstance(current, float):
        try:
            return float(text)
        except ValueError:
            raise OptionError(f"option {name} takes a number, not {text!r}") from None
    return text


def _apply(target: Any, path: list[str], text: str, name: str) -> None:
    head, rest = path[0], path[1:]
    if not dataclasses.is_dataclass(target) or head not in {
        f.name for f in dataclasses.fields(target)
    }:
        if head == "all" and isinstance(target, PrefetchPolicy) and not rest:
            target.set_all(_coerce(0, text, name))
            return
        raise OptionError(f"unknown option {name!r}")
    if rest:
        _apply(getattr(target, head), rest, text, name)
        return
    setattr(target, head, _coerce(getattr(target, head), text, name))


def parse_broker_url(url: str) -> BrokerUrl:
    """Parse a broker URL and its options; raises OptionError naming what is wrong."""
    failover: FailoverOptions | None = None
    query = ""
    if url.startswith("failover:"):
        inner = url[len("failover:") :]
        if inner.startswith("("):
            close = inner.find(")")
            if close < 0:
                raise OptionError(f"failover URL {url!r} has no closing parenthesis")
            members, query = inner[1:close], inner[close + 1 :].lstrip("?")
        else:
            members, _, query = inner.partition("?")
        failover = FailoverOptions()
        uris = [m.strip() for m in members.split(",") if m.strip()]
    else:
        uris = [url]
    endpoints: list[tuple[str, str, int]] = []
    jms, wire, transport = ConnectionOptions(), WireFormatOptions(), TransportOptions()
    options: dict[str, Any] = {"jms": jms, "wireFormat": wire, "transport": transport}
    for uri in uris:
        parts = urlsplit(uri)
        if parts.scheme not in _SCHEMES:
            raise OptionError(f"unsupported transport {parts.scheme!r} in {uri!r}")
        if not parts.hostname:
            raise OptionError(f"broker URL {uri!r} names no host")
        endpoints.append((parts.scheme, parts.hostname, parts.port or 61616))
        if parts.query:
            _apply_query(parts.query, options, None)
    if not endpoints:
        raise OptionError(f"broker URL {url!r} names no broker")
    if query:
        _apply_query(query, options, failover)
    return BrokerUrl(
        endpoints, failover, options["jms"], options["wireFormat"], options["transport"]
    )


def _apply_query(query: str, options: dict[str, Any], failover: FailoverOptions | None) -> None:
    for name, text in parse_qsl(query, keep_blank_values=True):
        prefix, _, rest = name.partition(".")
        if prefix in options and rest:
            _apply(options[prefix], rest.split("."), text, name)
        elif failover is not None and "." not in name:
            _apply(failover, [name], text, name)
        else:
            raise OptionError(f"unknown option {name!r}")
