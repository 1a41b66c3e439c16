"""Broker URLs and connection options, accepted and refused as ActiveMQ's Java client 5.17
accepts and refuses them (compatibility P4, K1).

``tcp://host:61616?jms.useAsyncSend=true&jms.prefetchPolicy.queuePrefetch=10`` and
``failover:(tcp://a:61616,tcp://b:61616)?randomize=false&nested.soTimeout=500``. As in
the Java client, each option goes to the object that has a setter of its name, and an
option no object took is an error naming it:

- ``jms.*``: ActiveMQConnectionFactory (and its prefetchPolicy, redeliveryPolicy and
  blobTransferPolicy); on a failover URL, on its own options only.
- on a tcp:// URI: ``wireFormat.*`` (OpenWireFormatFactory), then TcpTransport's own
  properties (no ``transport.`` prefix: that one is the broker's, for its listeners),
  ``socket.*`` (java.net.Socket's, checked when the socket opens), the inactivity
  monitor's, the negotiator's, ``soWriteTimeout`` and ``auto.*``.
- on failover: FailoverTransport's properties, ``nested.*`` added to every member URI.

A value converts as Java's IntrospectionSupport converts it: ``Boolean.valueOf`` (any text,
true only for "true"), integers in range, numbers; a setter taking an object no text
converts to (transportListener, rejectedTaskHandler, ...) refuses every value. Which
accepted options dovecote acts on, and why the others are not: docs/client-options.md.
"""

from __future__ import annotations

import dataclasses
import re
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class OptionError(ValueError):
    """A broker URL or an option in it is not understood; the message names it."""


# -- the objects the options set: the fields dovecote acts on ---------------------------------


@dataclass
class PrefetchPolicy:
    queuePrefetch: int = 1000
    topicPrefetch: int = 32767  # Short.MAX_VALUE, ActiveMQPrefetchPolicy.DEFAULT_TOPIC_PREFETCH
    durableTopicPrefetch: int = 100
    queueBrowserPrefetch: int = 500
    maximumPendingMessageLimit: int = 0
    """Every consumer's ConsumerInfo.maximumPendingMessageLimit (the broker's topic
    subscriptions keep at most this many pending for a slow consumer; 0: no limit)."""

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
    """The ``jms.*`` options of ActiveMQConnectionFactory that dovecote's client acts on."""

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
    clientIDPrefix: str | None = None
    connectionIDPrefix: str | None = None
    exclusiveConsumer: bool = False
    useRetroactiveConsumer: bool = False
    disableTimeStampsByDefault: bool = False
    consumerExpiryCheckEnabled: bool = True
    sendAcksAsync: bool = True
    prefetchPolicy: PrefetchPolicy = field(default_factory=PrefetchPolicy)
    redeliveryPolicy: RedeliveryPolicy = field(default_factory=RedeliveryPolicy)


@dataclass
class WireFormatOptions:
    maxInactivityDuration: int = 30000
    maxInactivityDurationInitalDelay: int = 10000
    maxFrameSize: int = 100 * 1024 * 1024
    stackTraceEnabled: bool = False
    tcpNoDelayEnabled: bool = True
    providerName: str = "dovecote"
    platformDetails: str = "Python"


@dataclass
class TransportOptions:
    """A tcp:// (or ssl://) URI's socket options, named as TcpTransport names them."""

    connectionTimeout: int = 30000
    """ms to wait for the TCP connect; 0: no limit."""
    soTimeout: int = 0
    """ms a socket read may block (0: no limit); a read that times out is not an error."""
    tcpNoDelay: bool | None = None
    """None: the operating system's default (Nagle on), as in Java."""
    keepAlive: bool | None = None
    soLinger: int = -(2**31)
    socketBufferSize: int = 64 * 1024
    ioBufferSize: int = 8 * 1024
    trace: bool = False
    negotiateTimeout: int = 15000
    """ms to wait for the broker's WireFormatInfo (WireFormatNegotiator's property)."""
    useInactivityMonitor: bool = True
    """False: no keep-alives sent, no inactivity check (the broker may still check)."""
    socket: dict[str, Any] = field(default_factory=dict)
    """``socket.*``: java.net.Socket's properties, converted."""
    verifyHostName: bool = True
    """ssl:// only: check the broker's certificate names the host (SslTransport's)."""
    tls: bool = False
    """An ssl:// URI: the connection speaks TLS, never plain text."""
    tls_context: ssl.SSLContext | None = None
    """Set by SslConnectionFactory (its trust store); None: the system's trust."""


@dataclass
class FailoverOptions:
    randomize: bool = True
    initialReconnectDelay: int = 10
    maxReconnectDelay: int = 30000
    useExponentialBackOff: bool = True
    reconnectDelayExponent: float = 2.0
    maxReconnectAttempts: int = -1
    startupMaxReconnectAttempts: int = -1
    timeout: int = -1
    priorityBackup: bool = False
    priorityURIs: str | None = None
    backup: bool = False


@dataclass
class Member:
    """One broker of the URL: its address and the options of its URI."""

    scheme: str
    host: str
    port: int
    transport: TransportOptions = field(default_factory=TransportOptions)
    wire_format: WireFormatOptions = field(default_factory=WireFormatOptions)
    ignored: dict[str, str] = field(default_factory=dict)
    """Options accepted and not acted on (docs/client-options.md says why)."""

    @property
    def endpoint(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


@dataclass
class BrokerUrl:
    members: list[Member]
    failover: FailoverOptions | None
    connection: ConnectionOptions
    ignored: dict[str, str] = field(default_factory=dict)
    """jms.* and failover options accepted and not acted on."""

    @property
    def endpoints(self) -> list[tuple[str, str, int]]:
        """(scheme, host, port) for each broker: one for tcp://, several for failover:."""
        return [m.endpoint for m in self.members]

    def member(self, endpoint: tuple[str, str, int]) -> Member:
        return next(m for m in self.members if m.endpoint == endpoint)

    @property
    def wire_format(self) -> WireFormatOptions:
        return self.members[0].wire_format

    @property
    def transport(self) -> TransportOptions:
        return self.members[0].transport


# -- every setter the Java client's objects have, by the type it takes ------------------------
# Java types: boolean, int, long, short, double, String, List (a "[a,b]" destination list);
# None: an object no URL text converts to, so Java refuses every value.

BOOL, INT, LONG, SHORT = "boolean", "integer (int)", "integer (long)", "integer (short)"
DOUBLE, STR, LIST = "number (double)", "String", "List"

CONNECTION_FACTORY: dict[str, str | None] = {
    "alwaysSessionAsync": BOOL, "alwaysSyncSend": BOOL, "auditDepth": INT,
    "auditMaximumProducerNumber": INT, "blobTransferPolicy": None, "brokerURL": STR,
    "checkForDuplicates": BOOL, "clientID": STR, "clientIDPrefix": STR,
    "clientInternalExceptionListener": None, "closeTimeout": INT, "connectResponseTimeout": INT,
    "connectionIDPrefix": STR, "consumerExpiryCheckEnabled": BOOL,
    "consumerFailoverRedeliveryWaitPeriod": LONG, "copyMessageOnSend": BOOL,
    "disableTimeStampsByDefault": BOOL, "dispatchAsync": BOOL, "exceptionListener": None,
    "exclusiveConsumer": BOOL, "maxThreadPoolSize": INT, "messagePrioritySupported": BOOL,
    "nestedMapAndListEnabled": BOOL, "nonBlockingRedelivery": BOOL,
    "objectMessageSerializationDefered": BOOL, "optimizeAcknowledge": BOOL,
    "optimizeAcknowledgeTimeOut": LONG, "optimizedAckScheduledAckInterval": LONG,
    "optimizedMessageDispatch": BOOL, "password": STR, "prefetchPolicy": None,
    "producerWindowSize": INT, "properties": None, "redeliveryPolicy": None,
    "redeliveryPolicyMap": None, "rejectedTaskHandler": None, "rmIdFromConnectionId": BOOL,
    "sendAcksAsync": BOOL, "sendTimeout": INT, "sessionTaskRunner": None, "statsEnabled": BOOL,
    "transactedIndividualAck": BOOL, "transformer": None, "transportListener": None,
    "trustAllPackages": BOOL, "trustedPackages": LIST, "useAsyncSend": BOOL, "useCompression": BOOL,
    "useDedicatedTaskRunner": BOOL, "useRetroactiveConsumer": BOOL, "userName": STR,
    "warnAboutUnstartedConnectionTimeout": LONG, "watchTopicAdvisories": BOOL,
}  # fmt: skip
PREFETCH_POLICY: dict[str, str | None] = {
    "all": INT, "durableTopicPrefetch": INT, "maximumPendingMessageLimit": INT,
    "optimizeDurableTopicPrefetch": INT, "queueBrowserPrefetch": INT, "queuePrefetch": INT,
    "topicPrefetch": INT,
}  # fmt: skip
REDELIVERY_POLICY: dict[str, str | None] = {
    "backOffMultiplier": DOUBLE, "collisionAvoidancePercent": SHORT, "initialRedeliveryDelay": LONG,
    "maximumRedeliveries": INT, "maximumRedeliveryDelay": LONG, "preDispatchCheck": BOOL,
    "redeliveryDelay": LONG, "useCollisionAvoidance": BOOL, "useExponentialBackOff": BOOL,
    # DestinationMapEntry's, which RedeliveryPolicy extends
    "queue": STR, "topic": STR, "tempQueue": BOOL, "tempTopic": BOOL, "destination": None,
}  # fmt: skip
BLOB_TRANSFER_POLICY: dict[str, str | None] = {
    "brokerUploadUrl": STR, "bufferSize": INT, "defaultUploadUrl": STR, "uploadStrategy": None,
    "uploadUrl": STR,
}  # fmt: skip
WIRE_FORMAT: dict[str, str | None] = {
    "cacheEnabled": BOOL, "cacheSize": INT, "host": STR, "includePlatformDetails": BOOL,
    "maxFrameSize": LONG, "maxFrameSizeEnabled": BOOL, "maxInactivityDuration": LONG,
    "maxInactivityDurationInitalDelay": LONG, "platformDetails": STR, "providerName": STR,
    "providerVersion": STR, "sizePrefixDisabled": BOOL, "stackTraceEnabled": BOOL,
    "tcpNoDelayEnabled": BOOL, "tightEncodingEnabled": BOOL, "version": INT,
}  # fmt: skip
TCP_TRANSPORT: dict[str, str | None] = {
    "closeAsync": BOOL, "connectionTimeout": INT, "diffServ": STR, "dynamicManagement": BOOL,
    "ioBufferSize": INT, "jmxPort": INT, "keepAlive": BOOL, "logWriterName": STR,
    "minmumWireFormatVersion": INT, "peerCertificates": None, "soLinger": INT, "soTimeout": INT,
    "socketBufferSize": INT, "socketOptions": None, "startLogging": BOOL, "tcpNoDelay": BOOL,
    "trace": BOOL, "typeOfService": INT, "useLocalHost": BOOL,
    "daemon": BOOL, "stackSize": LONG, "transportListener": None,  # TransportThreadSupport's
}  # fmt: skip
SSL_TRANSPORT = {**TCP_TRANSPORT, "verifyHostName": BOOL}
INACTIVITY_MONITOR: dict[str, str | None] = {
    "connectAttemptTimeout": LONG, "initialDelayTime": LONG, "keepAliveResponseRequired": BOOL,
    "readCheckTime": LONG, "useKeepAlive": BOOL, "writeCheckTime": LONG,
    "ignoreAllWireFormatInfo": BOOL, "ignoreRemoteWireFormat": BOOL, "peerCertificates": None,
    "transportListener": None,
}  # fmt: skip
WIRE_FORMAT_NEGOTIATOR: dict[str, str | None] = {
    "negotiateTimeout": LONG, "peerCertificates": None, "transportListener": None,
}  # fmt: skip
SOCKET: dict[str, str | None] = {
    "keepAlive": BOOL, "oOBInline": BOOL, "receiveBufferSize": INT, "reuseAddress": BOOL,
    "sendBufferSize": INT, "soTimeout": INT, "tcpNoDelay": BOOL, "trafficClass": INT,
}  # fmt: skip
SSL_SOCKET: dict[str, str | None] = {}
"""On an SSL socket Java 17 refuses every socket.* property: IntrospectionSupport cannot
reach the setters of the JDK's internal SSLSocketImpl (only socket.verifyHostName, which
SslTransport takes first, is accepted)."""
FAILOVER: dict[str, str | None] = {
    "backup": BOOL, "backupPoolSize": INT, "initialReconnectDelay": LONG, "maxCacheSize": INT,
    "maxReconnectAttempts": INT, "maxReconnectDelay": LONG, "nestedExtraQueryOptions": STR,
    "peerCertificates": None, "priorityBackup": BOOL, "priorityURIs": STR, "randomize": BOOL,
    "rebalanceUpdateURIs": BOOL, "reconnectDelay": LONG, "reconnectDelayExponent": DOUBLE,
    "reconnectSupported": BOOL, "startupMaxReconnectAttempts": INT, "timeout": LONG,
    "trackMessages": BOOL, "trackTransactionProducers": BOOL, "transportListener": None,
    "updateURIsSupported": BOOL, "updateURIsURL": STR, "useExponentialBackOff": BOOL,
    "warnAfterReconnectAttempts": INT,
}  # fmt: skip

_RANGES = {INT: 2**31, LONG: 2**63, SHORT: 2**15}
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)\s*"
)
_DSCP_NAMES = {f"CS{i}" for i in range(8)} | {f"AF{a}{b}" for a in (1, 2, 3, 4) for b in (1, 2, 3)}


class _Refused(Exception):
    """A value the setter's type does not take: Java leaves the option unset (refused)."""


def java_value(kind: str | None, text: str | None) -> Any:
    """``text`` converted as IntrospectionSupport converts a URL's text for a setter taking
    ``kind``; _Refused where Java's conversion fails."""
    if kind is None:
        raise _Refused
    if text is None:  # an option without "=": Java calls the setter with null
        if kind in (STR, BOOL):
            return None
        raise _Refused
    if kind == BOOL:
        return text.lower() == "true"  # Boolean.valueOf: anything else is false, no error
    if kind in _RANGES:
        if not _JAVA_INTEGER.fullmatch(text) or not -_RANGES[kind] <= int(text) < _RANGES[kind]:
            raise _Refused
        return int(text)
    if kind == DOUBLE:
        if not _JAVA_DOUBLE.fullmatch(text):
            raise _Refused
        number = text.strip().rstrip("fFdD")
        return float(number.replace("Infinity", "inf"))
    if kind == LIST:
        # Only "[a, b]" converts (to a list of queues); anything else has no converter.
        inner = text[1:-1].strip() if text.startswith("[") and text.endswith("]") else ""
        if not inner:
            raise _Refused
        return [item.strip() for item in inner.split(",")]
    return text


class _Options:
    """A URI's options, taken by name as the Java client's objects take them."""

    def __init__(self, query: str, where: str) -> None:
        self.where = where
        self.left: dict[str, str | None] = {}
        self.mistyped: dict[str, str | None] = {}
        for part in query.split("&") if query else []:
            if not part:
                continue
            name, eq, value = part.partition("=")
            decoded = parse_qsl(f"{name}={value}", keep_blank_values=True)[0]
            self.left[decoded[0]] = decoded[1] if eq else None  # a later one wins, as in Java

    def take(self, table: dict[str, str | None], prefix: str = "") -> dict[str, Any]:
        """Every option ``prefix + name`` with ``name`` in ``table`` whose value converts."""
        taken: dict[str, Any] = {}
        for key in list(self.left):
            name = key[len(prefix) :] if key.startswith(prefix) else None
            if name is None or name not in table:
                continue
            try:
                taken[name] = java_value(table[name], self.left[key])
            except _Refused:
                self.mistyped[key] = table[name]  # left over: refused, naming the type
                continue
            del self.left[key]
        return taken

    def extract(self, prefix: str) -> dict[str, str | None]:
        """Every option under ``prefix``, whatever its name (IntrospectionSupport's)."""
        found = {k[len(prefix) :]: v for k, v in self.left.items() if k.startswith(prefix)}
        for key in [k for k in self.left if k.startswith(prefix)]:
            del self.left[key]
        return found

    def refuse_leftovers(self) -> None:
        if not self.left:
            return
        name, value = next(iter(self.left.items()))
        if name in self.mistyped:  # a property of that name whose type refuses the value
            kind = self.mistyped[name]
            takes = "an object no URL text converts to" if kind is None else f"a Java {kind}"
            raise OptionError(
                f"option {name}={value} of {self.where}: it takes {takes}"
                f"{'' if kind is None else f', not {value!r}'} (Invalid connect parameters)"
            )
        raise OptionError(
            f"unknown option {name!r} in {self.where} (Invalid connect parameters: "
            f"{', '.join(self.left)})"
        )


def _assign(target: Any, values: dict[str, Any], ignored: dict[str, str], prefix: str) -> None:
    """Values for fields ``target`` has are set; the others are kept as accepted-only."""
    names = {f.name for f in dataclasses.fields(target)}
    for name, value in values.items():
        if name in names:
            setattr(target, name, value)
        else:
            ignored[prefix + name] = str(value)


_SCHEMES = {"tcp": 61616, "nio": 61616, "auto": 61616, "ssl": 61617, "nio+ssl": 61617}


def parse_broker_url(url: str) -> BrokerUrl:
    """Parse a broker URL and its options; raises OptionError naming what is wrong."""
    if url.startswith("failover:"):
        members, query = _split_failover(url)
        options = _Options(query, url)
        jms = options.extract("jms.")
        nested = options.extract("nested.")
        failover = FailoverOptions()
        ignored: dict[str, str] = {}
        _assign(failover, options.take(FAILOVER), ignored, "")
        options.refuse_leftovers()
        extra = "&".join(k if v is None else f"{k}={v}" for k, v in nested.items())
        parsed = [_member(m, extra, top_level=False) for m in members]
    else:
        jms, failover, ignored = {}, None, {}
        split = urlsplit(url)
        parsed = [_member(url, "", top_level=True)]
        if split.query:
            jms = {k[4:]: v for k, v in _Options(split.query, url).left.items()
                   if k.startswith("jms.")}  # fmt: skip
    if not parsed:
        raise OptionError(f"broker URL {url!r} names no broker")
    return BrokerUrl(parsed, failover, _connection_options(jms, url, ignored), ignored)


def _split_failover(url: str) -> tuple[list[str], str]:
    inner = url[len("failover:") :]
    if inner.startswith("("):
        depth, close = 0, -1
        for i, char in enumerate(inner):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                close = i
                break
        if close < 0:
            raise OptionError(f"failover URL {url!r} has no closing parenthesis")
        members, query = inner[1:close], inner[close + 1 :]
        if query and not query.startswith("?"):
            raise OptionError(f"failover URL {url!r}: options after ')' start with '?'")
        query = query[1:]
    else:
        members, _, query = inner.partition("?")
    return [m.strip() for m in members.split(",") if m.strip()], query


def _member(uri: str, nested: str, top_level: bool) -> Member:
    parts = urlsplit(uri)
    scheme = parts.scheme
    if scheme not in _SCHEMES:
        raise OptionError(f"unsupported transport {scheme!r} in {uri!r}")
    if not parts.hostname:
        raise OptionError(f"broker URL {uri!r} names no host")
    try:
        port = parts.port or _SCHEMES[scheme]
    except ValueError:
        raise OptionError(f"broker URL {uri!r} has no valid port") from None
    query = "&".join(q for q in (parts.query, nested) if q)
    options = _Options(query, uri)
    member = Member(scheme, parts.hostname, port)
    if top_level:
        options.extract("jms.")  # the connection factory's, taken before the transport's
    wire_type = options.left.pop("wireFormat", "default")
    if wire_type != "default":
        raise OptionError(f"wire format {wire_type!r} in {uri!r}: only OpenWire ('default')")
    _assign(member.wire_format, options.take(WIRE_FORMAT, "wireFormat."), member.ignored,
            "wireFormat.")  # fmt: skip
    tls = scheme in ("ssl", "nio+ssl")
    member.transport.tls = tls
    taken = options.take(SSL_TRANSPORT if tls else TCP_TRANSPORT)
    _assign(member.transport, taken, member.ignored, "")
    socket_options = options.extract("socket.")
    if tls and "verifyHostName" in socket_options and "verifyHostName" not in taken:
        # SslTransport's own rule: socket.verifyHostName stands in for the unset property
        # (set as well, it is left to the socket, which refuses it).
        text = socket_options.pop("verifyHostName")
        member.transport.verifyHostName = (text or "").lower() == "true"
    for name, text in socket_options.items():
        try:
            member.transport.socket[name] = java_value((SSL_SOCKET if tls else SOCKET).get(name),
                                                       text)  # fmt: skip
        except _Refused:
            # Java applies them to the socket when it connects: "Invalid socket parameters".
            raise OptionError(f"option socket.{name}={text} of {uri}: Invalid socket "
                              "parameters (no property Java can set on this socket)"
                              ) from None  # fmt: skip
    member.transport.useInactivityMonitor = (
        options.left.pop("useInactivityMonitor", "true") == "true"
    )
    if member.transport.useInactivityMonitor:
        _assign(member.transport, options.take(INACTIVITY_MONITOR), member.ignored, "")
    if "soWriteTimeout" in options.left:
        text = options.left.pop("soWriteTimeout")
        if text is not None and not _JAVA_INTEGER.fullmatch(text):
            raise OptionError(f"option soWriteTimeout={text} of {uri}: takes an integer")
        member.ignored["soWriteTimeout"] = str(text)
    _assign(member.transport, options.take(WIRE_FORMAT_NEGOTIATOR), member.ignored, "")
    if top_level:
        options.extract("auto.")
    _check_tcp_values(member, uri)
    options.refuse_leftovers()
    return member


def _check_tcp_values(member: Member, uri: str) -> None:
    """The setters that check their value (QualityOfServiceUtils) refuse as they do."""
    for name, value in list(member.ignored.items()):
        if name == "typeOfService" and not 0 <= int(value) <= 255:
            raise OptionError(f"option typeOfService={value} of {uri}: takes 0 to 255")
        numeric = _JAVA_INTEGER.fullmatch(value) and 0 <= int(value) <= 63
        if name == "diffServ" and value not in _DSCP_NAMES | {"EF"} and not numeric:
            raise OptionError(f"option diffServ={value} of {uri}: a DSCP name or 0 to 63")


def _connection_options(
    jms: dict[str, str | None], url: str, ignored: dict[str, str]
) -> ConnectionOptions:
    options = _Options("", url)
    options.left = {f"jms.{k}": v for k, v in jms.items()}
    connection = ConnectionOptions()
    prefetch = options.take(PREFETCH_POLICY, "jms.prefetchPolicy.")
    if "all" in prefetch:
        connection.prefetchPolicy.set_all(prefetch.pop("all"))
    _assign(connection.prefetchPolicy, prefetch, ignored, "jms.prefetchPolicy.")
    _assign(connection.redeliveryPolicy, options.take(REDELIVERY_POLICY, "jms.redeliveryPolicy."),
            ignored, "jms.redeliveryPolicy.")  # fmt: skip
    blob = options.take(BLOB_TRANSFER_POLICY, "jms.blobTransferPolicy.")
    ignored.update({f"jms.blobTransferPolicy.{k}": str(v) for k, v in blob.items()})
    _assign(connection, options.take(CONNECTION_FACTORY, "jms."), ignored, "jms.")
    options.refuse_leftovers()
    return connection
