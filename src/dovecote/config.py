"""The configuration: one TOML file with ActiveMQ's concepts (SPEC O4), parsed once into a
frozen, typed tree and passed down. With no file the embedded defaults apply.

Example (every key optional)::

    [broker]
    name = "localhost"
    data_dir = "data"

    [store]
    kind = "journal"

    [stomp]
    host = "127.0.0.1"
    port = 61613
    max_frame_size = 10485760

    [policy]
    expire_messages_period_ms = 30000

    [[policy.entries]]
    pattern = "orders.>"
    queues = true
    dead_letter = "individual"
    maximum_redeliveries = 3
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from dovecote.broker.policy import (
    BrokerSettings,
    DeadLetterKind,
    DeadLetterStrategy,
    DestinationPolicy,
    PolicyMap,
)
from dovecote.broker.security.authorization import AuthorizationEntry, AuthorizationMap, Rights
from dovecote.broker.security.plugins import CertificateUsers, SecuritySettings, normal_subject
from dovecote.broker.security.users import (
    DEFAULT_ANONYMOUS_GROUPS,
    DEFAULT_ANONYMOUS_USER,
    AnonymousAccess,
    User,
    UserStore,
    parse_hash,
)
from dovecote.network.settings import (
    Backoff,
    DestinationPattern,
    NetworkConnectorSettings,
    NetworkUriError,
    parse_network_uri,
)

# msgspec rather than pydantic: the same typed, validated, frozen tree, for 3-5 MiB of the
# broker's memory (msgspec with what it imports, and these classes) where pydantic took
# about 12 (its import and its first model), a quarter of an idle broker.
NonNegative = Annotated[int, Meta(ge=0)]
Positive = Annotated[int, Meta(gt=0)]
Port = Annotated[int, Meta(ge=0, le=65535)]
LimitOrUnset = Annotated[int, Meta(ge=-1)]
"""-1: not set here (the broker's own limit applies)."""


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid; the message says where."""


class _Section(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A table of the file: unknown keys are refused, and nothing changes once read (each
    subclass says frozen again for the type checker; msgspec inherits it anyway)."""


class BrokerSection(_Section, frozen=True):
    name: str = "localhost"
    """The broker name, as in ActiveMQ's brokerName."""
    data_dir: Path = Path("data")
    """Where stores keep their files (relative paths are relative to the working dir)."""
    persistent: bool = True
    """False: the memory store, whatever ``store.kind`` says (ActiveMQ's persistent=false)."""
    scheduler_support: bool = False
    """Delayed and scheduled delivery (AMQ_SCHEDULED_* properties; ActiveMQ's
    schedulerSupport). Off: such messages are delivered at once, properties and all."""
    statistics: bool = True
    """Answer ActiveMQ.Statistics.* requests (ActiveMQ's statisticsBrokerPlugin, off by
    default there; ``dovecote dstat`` asks them)."""
    streams: bool = True
    """Answer dovecote.Stream.* requests (reads by offset for the Spark source,
    docs/streams.md)."""
    advisory_support: bool = True
    """Send advisory messages on ActiveMQ.Advisory.* topics (ActiveMQ's advisorySupport,
    docs/advisories.md): the Java client's temporary-destination checks, DestinationSource
    and network bridges rely on them. Off: none at all, as in ActiveMQ."""


class StoreSection(_Section, frozen=True):
    kind: Literal["journal", "sql", "journaled-sql", "memory"] = "journal"
    """The persistence adapter: the journal (KahaDB's design, under data_dir/journal), sql
    (ActiveMQ's JDBC design), journaled-sql (a journal in front of sql), or memory."""
    journal_max_file_length: Annotated[int, Meta(gt=4096)] = 32 * 1024 * 1024
    """Data files roll over at this size (journalMaxFileLength)."""
    enable_journal_disk_syncs: bool = True
    """fsync each group of writes before acknowledging them (enableJournalDiskSyncs)."""
    compact_live_limit: NonNegative = 1000
    """The oldest data file is compacted when at most this many live records pin it."""
    check_for_corrupt_journal_files: bool = False
    """journal: at start, read every data file and check each record's checksum, reporting
    (and dropping) the messages in damaged records before serving (KahaDB's
    checkForCorruptJournalFiles). Off: damage is found when a record is read."""
    url: str | None = None
    """sql: a SQLAlchemy URL (postgresql+psycopg://user@host/db); default SQLite in data_dir."""
    create_tables_on_startup: bool = True
    """sql: create the ACTIVEMQ_* tables when they are missing (createTablesOnStartup)."""
    checkpoint_interval_ms: NonNegative = 5_000
    """journaled-sql: how often the journal is checkpointed into the tables."""
    lock_lease_ms: Annotated[int, Meta(ge=100)] = 10_000
    """sql: how long the ACTIVEMQ_LOCK lease lasts unless renewed; a broker restarted after
    a crash waits this long for its predecessor's lease."""


class StompSection(_Section, frozen=True):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: Port = 61613
    max_frame_size: Positive = 10 * 1024 * 1024
    """Frames larger than this are refused with an ERROR (ActiveMQ's maxFrameSize)."""
    max_header_size: Positive = 64 * 1024
    max_headers: Positive = 1000
    heartbeat_ms: tuple[int, int] = (10_000, 10_000)
    """What the server offers in CONNECTED: (can send every, wants to receive every)."""
    heartbeat_grace: Annotated[float, Meta(ge=1.0)] = 1.5
    """A client is dropped after heart-beat interval x this of silence."""
    max_connections: Positive = 1000
    """Connections beyond this are refused (ActiveMQ's maximumConnections)."""
    connect_attempt_timeout_ms: NonNegative = 30_000
    """A client that sends no CONNECT in this long is dropped (connectAttemptTimeout; 0: never)."""


class OpenWireSection(_Section, frozen=True):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: Port = 61616
    max_frame_size: Positive = 100 * 1024 * 1024
    max_inactivity_ms: NonNegative = 30_000
    """maxInactivityDuration: keep-alives both ways; a silent peer is dropped (0: off)."""
    max_inactivity_initial_delay_ms: NonNegative = 10_000
    max_connections: Positive = 1000
    """Connections beyond this are refused (ActiveMQ's maximumConnections)."""
    connect_attempt_timeout_ms: NonNegative = 30_000
    """A client whose WireFormatInfo does not come in this long is dropped (the inactivity
    monitor's connectAttemptTimeout; 0: never)."""


class AutoSection(_Section, frozen=True):
    """auto://: one port that tells OpenWire from STOMP by the first bytes."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: Port = 61608
    max_connections: Positive = 1000
    protocol_detection_timeout_ms: NonNegative = 30_000
    """A client that sends nothing in this long is dropped (protocolDetectionTimeOut; 0: never)."""
    tls: bool = False
    """auto+ssl://: every connection is TLS ([tls] has the certificate); a TLS handshake not
    over within protocol_detection_timeout_ms is dropped too."""


class ConsoleSection(_Section, frozen=True):
    """The admin API and Prometheus metrics over HTTP (ActiveMQ's web console port)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Port = 8161
    tls: bool = False
    """HTTPS with the [tls] certificate (no client certificates asked for here)."""
    admin_group: str = "admins"
    """With [security] users: only members may change state (send, purge, delete, cancel)."""
    read_group: str | None = None
    """With [security] users: only members (and admins) may read; unset: any user."""
    metrics_anonymous: bool = False
    """With [security] users: /metrics answers without credentials (for a scraper)."""
    allowed_hosts: tuple[str, ...] = ()
    """Names, beyond localhost and IP addresses, that the Host header may give (DNS
    rebinding: a request for any other name is refused), e.g. ["broker1.example.com"]."""
    allowed_origins: tuple[Annotated[str, Meta(pattern=r"^https?://[^/?#]+$")], ...] = ()
    """Origins, beyond the console's own, whose pages may change state, e.g. a TLS proxy's
    "https://console.example.com"."""


class TlsSection(_Section, frozen=True):
    """The broker's certificate for its TLS listeners ([ssl], [stomp_ssl], [auto] and
    [console] with tls = true): PEM files, where ActiveMQ's sslContext has Java key stores.
    Relative paths are relative to the working directory, as data_dir."""

    certificate_file: Path | None = None
    """The broker's certificate, then the intermediate CA certificates (keyStore)."""
    key_file: Path | None = None
    """The certificate's private key (unset: it follows the certificates in certificate_file)."""
    key_password: str | None = None
    """The key's password, if it is encrypted (keyStorePassword)."""
    ca_file: Path | None = None
    """The CA certificates client certificates must chain to (trustStore); needed with
    client_auth "want" or "need"."""
    client_auth: Literal["none", "want", "need"] = "none"
    """Client certificates: not asked for; asked for and verified when one comes
    (wantClientAuth); required (needClientAuth). A verified certificate's subject is the
    connection's (e.g. "CN=alice,O=example")."""


class SslSection(OpenWireSection, frozen=True):
    """ssl://: OpenWire over TLS (ActiveMQ's ssl transport connector), with [tls]'s
    certificate; a TLS handshake not over within connect_attempt_timeout_ms is dropped."""

    enabled: bool = False
    port: Port = 61617


class StompSslSection(StompSection, frozen=True):
    """stomp+ssl://: STOMP over TLS, with [tls]'s certificate; a TLS handshake not over
    within connect_attempt_timeout_ms is dropped."""

    enabled: bool = False
    port: Port = 61614


class DeadLetterSection(_Section, frozen=True):
    shared_queue: str = "ActiveMQ.DLQ"
    queue_prefix: str = "DLQ."
    topic_prefix: str = "DLQ."
    use_queue_for_queue_messages: bool = True
    use_queue_for_topic_messages: bool = True
    process_expired: bool = True
    process_non_persistent: bool = False


class UsageSection(_Section, frozen=True):
    """systemUsage: the broker-wide limits (SPEC M6)."""

    memory_limit: NonNegative = 256 * 1024 * 1024
    """Bytes of messages held in memory; at the limit producers wait (0: no limit)."""
    store_limit: NonNegative = 100 * 1024**3
    """Bytes of persistent messages kept in the store."""
    temp_limit: NonNegative = 50 * 1024**3
    """Bytes of non-persistent messages spilled to the temp store (data_dir/tmp_storage)."""
    send_fail_if_no_space: bool = False
    """At a limit, a send fails with an error naming it instead of waiting."""
    disk_check_period_ms: NonNegative = 2_000
    """How often the store and temp limits are checked against their disks' free space
    while the broker runs, and lowered when another process fills the disk (0: at start
    only)."""


class PolicyEntry(_Section, frozen=True):
    pattern: str = ">"
    queues: bool = True
    """True: the entry applies to queues matching pattern; False: to topics."""
    dead_letter: Literal["shared", "individual"] = "shared"
    dead_letter_options: DeadLetterSection = field(default_factory=DeadLetterSection)
    maximum_redeliveries: LimitOrUnset = 6
    pending_message_limit: LimitOrUnset = -1
    memory_limit: LimitOrUnset = -1
    """Bytes this destination may hold in memory (-1: only the broker's limit)."""
    producer_flow_control: bool = True
    """Off: non-persistent messages beyond the memory limit spill to the temp store."""
    pending_queue_cursor: Literal["store", "vm"] = "store"
    """store (ActiveMQ's default): past 70% of the memory limit, persistent messages wait
    out of memory and producers go on; vm: all stay in memory, producers wait at the limit."""

    def to_policy(self) -> DestinationPolicy:
        options = self.dead_letter_options
        return DestinationPolicy(
            pattern=self.pattern,
            for_queues=self.queues,
            dead_letter=DeadLetterStrategy(
                kind=DeadLetterKind(self.dead_letter),
                shared_queue=options.shared_queue,
                queue_prefix=options.queue_prefix,
                topic_prefix=options.topic_prefix,
                use_queue_for_queue_messages=options.use_queue_for_queue_messages,
                use_queue_for_topic_messages=options.use_queue_for_topic_messages,
                process_expired=options.process_expired,
                process_non_persistent=options.process_non_persistent,
            ),
            maximum_redeliveries=self.maximum_redeliveries,
            pending_message_limit=self.pending_message_limit,
            memory_limit=self.memory_limit,
            producer_flow_control=self.producer_flow_control,
            store_cursor=self.pending_queue_cursor == "store",
        )


class PolicySection(_Section, frozen=True):
    expire_messages_period_ms: NonNegative = 30_000
    entries: tuple[PolicyEntry, ...] = ()


GroupNames = tuple[Annotated[str, Meta(min_length=1)], ...]


class UserEntry(_Section, frozen=True):
    """A user: its password's hash (``dovecote passwd`` prints one) and its groups."""

    name: Annotated[str, Meta(min_length=1)]
    password: str | None = None
    """The hash (scrypt$...); unset: the user can only be named by a client certificate."""
    groups: GroupNames = ()

    def __post_init__(self) -> None:
        if self.password is not None:
            try:
                parse_hash(self.password)
            except ValueError as exc:
                raise ValueError(f"user {self.name!r}: {exc}") from None


class UsersFile(_Section, frozen=True):
    """The file ``security.users_file`` names: ``[[users]]`` tables and a ``[groups]`` table."""

    users: tuple[UserEntry, ...] = ()
    groups: dict[str, GroupNames] = field(default_factory=dict)


class RightsSection(_Section, frozen=True):
    """Groups (``*``: everyone) that may read (consume, browse), write (send) and admin
    (create a destination that does not exist yet)."""

    read: GroupNames = ()
    write: GroupNames = ()
    admin: GroupNames = ()

    def to_rights(self) -> Rights:
        return Rights(frozenset(self.read), frozenset(self.write), frozenset(self.admin))


class AuthorizationEntrySection(RightsSection, frozen=True):
    """ActiveMQ's authorizationEntry: the rights on queues or topics matching a pattern."""

    queue: str | None = None
    topic: str | None = None

    def __post_init__(self) -> None:
        if (self.queue is None) == (self.topic is None):
            raise ValueError("an authorization entry names a queue or a topic pattern (one)")


class CertificateUserEntry(_Section, frozen=True):
    subject: Annotated[str, Meta(min_length=1)]
    """A verified client certificate's subject, e.g. "CN=alice,O=example"."""
    user: Annotated[str, Meta(min_length=1)]


class SecuritySection(_Section, frozen=True):
    """Authentication and authorization (ActiveMQ's simpleAuthenticationPlugin and
    authorizationPlugin). With no users, every connection is let in and may do anything,
    and every listener must be on loopback unless allow_anonymous says otherwise."""

    users: tuple[UserEntry, ...] = ()
    users_file: Path | None = None
    """A TOML file with more [[users]] and a [groups] table (relative to the working dir)."""
    groups: dict[str, GroupNames] = field(default_factory=dict)
    """group -> its users, beside each user's own groups."""
    allow_anonymous: bool = False
    """With users: a connection giving no user and no password is anonymous_user. Without
    users: the listeners may listen beyond loopback with nobody authenticated."""
    anonymous_user: str = DEFAULT_ANONYMOUS_USER
    anonymous_groups: GroupNames = tuple(sorted(DEFAULT_ANONYMOUS_GROUPS))
    certificate_users: tuple[CertificateUserEntry, ...] = ()
    """Users named by a verified client certificate's subject."""
    certificate_user_from_cn: bool = False
    """A verified client certificate whose CN is a configured user's name is that user."""
    authorization: tuple[AuthorizationEntrySection, ...] = ()
    temp_destinations: RightsSection | None = None
    """Rights on every temporary destination (tempDestinationAuthorizationEntry); unset:
    every authenticated connection has them all."""

    @property
    def authenticates(self) -> bool:
        """Whether connections must say who they are."""
        return bool(
            self.users
            or self.users_file is not None
            or self.certificate_users
            or self.certificate_user_from_cn
            or self.authorization
            or self.temp_destinations is not None
        )

    def to_settings(self) -> SecuritySettings:
        """The section as the security plugins take it (reads users_file)."""
        if not self.authenticates:
            return SecuritySettings(allow_anonymous=self.allow_anonymous)
        entries, groups = list(self.users), dict(self.groups)
        if self.users_file is not None:
            extra = _read_users_file(self.users_file)
            entries += extra.users
            for group, members in extra.groups.items():
                groups[group] = groups.get(group, ()) + members
        users = []
        for entry in entries:
            joined = {g for g, members in groups.items() if entry.name in members}
            users.append(User(entry.name, entry.password, frozenset(entry.groups) | joined))
        anonymous = None
        if self.allow_anonymous:
            anonymous = AnonymousAccess(self.anonymous_user, frozenset(self.anonymous_groups))
        elif not any(u.password_hash for u in users) and not (
            self.certificate_users or self.certificate_user_from_cn
        ):
            raise ConfigError(
                "security: nobody could connect: give users passwords, certificate_users "
                "or allow_anonymous = true"
            )
        authorization = None
        if self.authorization or self.temp_destinations is not None:
            authorization = AuthorizationMap(
                tuple(
                    AuthorizationEntry(e.queue or e.topic or "", e.queue is not None, e.to_rights())
                    for e in self.authorization
                ),
                None if self.temp_destinations is None else self.temp_destinations.to_rights(),
            )
        return SecuritySettings(
            users=UserStore(users, anonymous),
            certificates=CertificateUsers(
                {normal_subject(c.subject): c.user for c in self.certificate_users},
                self.certificate_user_from_cn,
            ),
            authorization=authorization,
            allow_anonymous=self.allow_anonymous,
        )


def _read_users_file(path: Path) -> UsersFile:
    data = read_toml(path, "security.users_file")
    try:
        return msgspec.convert(data, UsersFile)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"security.users_file {path}: {_problem(str(exc))}") from None


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def exposure_problem(config: Config) -> str | None:
    """Why the broker must not start as configured: a listener beyond loopback while
    nobody is authenticated, unless allow_anonymous says it is meant (secure by default)."""
    security = config.security
    if security.authenticates or security.allow_anonymous:
        return None
    exposed = []
    for name in config.__struct_fields__:
        section = getattr(config, name)
        host = getattr(section, "host", None)
        if isinstance(host, str) and getattr(section, "enabled", False) and not is_loopback(host):
            exposed.append(f"{name}.host = {host!r}")
    if not exposed:
        return None
    return (
        f"{', '.join(exposed)} listens beyond loopback with no authentication: configure "
        "[security] users, or set [security] allow_anonymous = true to let anyone in on purpose"
    )


def check_exposure(config: Config) -> None:
    """Raise ConfigError saying why, when ``exposure_problem`` finds one."""
    if problem := exposure_problem(config):
        raise ConfigError(problem)


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file's tables; ConfigError saying ``what`` file could not be read."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML: {exc}") from None


class NetworkDestinationEntry(_Section, frozen=True):
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


class NetworkConnectorSection(_Section, frozen=True):
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
        )


class Config(_Section, frozen=True):
    broker: BrokerSection = field(default_factory=BrokerSection)
    store: StoreSection = field(default_factory=StoreSection)
    stomp: StompSection = field(default_factory=StompSection)
    openwire: OpenWireSection = field(default_factory=OpenWireSection)
    auto: AutoSection = field(default_factory=AutoSection)
    console: ConsoleSection = field(default_factory=ConsoleSection)
    tls: TlsSection = field(default_factory=TlsSection)
    ssl: SslSection = field(default_factory=SslSection)
    stomp_ssl: StompSslSection = field(default_factory=StompSslSection)
    policy: PolicySection = field(default_factory=PolicySection)
    usage: UsageSection = field(default_factory=UsageSection)
    security: SecuritySection = field(default_factory=SecuritySection)
    network_connectors: tuple[NetworkConnectorSection, ...] = ()

    def broker_settings(self) -> BrokerSettings:
        return BrokerSettings(
            broker_name=self.broker.name,
            policies=PolicyMap(entries=tuple(e.to_policy() for e in self.policy.entries)),
            expire_messages_period_ms=self.policy.expire_messages_period_ms,
            memory_limit=self.usage.memory_limit,
            store_limit=self.usage.store_limit,
            temp_limit=self.usage.temp_limit,
            send_fail_if_no_space=self.usage.send_fail_if_no_space,
            temp_directory=self.broker.data_dir / "tmp_storage",
        )


def load_config(path: Path | None) -> Config:
    """Read a TOML file (None: the embedded defaults). Raises ConfigError naming the problem."""
    if path is None:
        return Config()
    data = read_toml(path, "config file")
    try:
        config = msgspec.convert(data, Config, dec_hook=_path_from_text)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"config file {path}: {_problem(str(exc))}") from None
    if problem := tls_problem(config):
        raise ConfigError(f"config file {path}: {problem}")
    try:
        network_settings(config)
    except ConfigError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    return config


def network_settings(config: Config) -> list[NetworkConnectorSettings]:
    """The network connectors' settings (ConfigError for a bad URI or list entry)."""
    return [c.to_settings(i) for i, c in enumerate(config.network_connectors)]


def tls_listeners(config: Config) -> list[str]:
    """The listeners configured to speak TLS, by their sections' names."""
    return [
        name
        for name, wants in (
            ("ssl", config.ssl.enabled),
            ("stomp_ssl", config.stomp_ssl.enabled),
            ("auto.tls", config.auto.enabled and config.auto.tls),
            ("console.tls", config.console.enabled and config.console.tls),
        )
        if wants
    ]


def tls_problem(config: Config) -> str | None:
    """What is missing for the TLS listeners configured, if anything."""
    wanting = tls_listeners(config)
    if wanting and config.tls.certificate_file is None:
        return f"{', '.join(wanting)}: TLS needs the broker's certificate: set tls.certificate_file"
    if config.tls.client_auth != "none" and config.tls.ca_file is None:
        return (
            f'tls.client_auth = "{config.tls.client_auth}" needs tls.ca_file: the CA '
            "certificates that client certificates must chain to"
        )
    return None


def _path_from_text(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise TypeError(f"Expected a path as text, got `{type(value).__name__}`")


# msgspec says "Expected `int` <= 65535 - at `$.stomp.port`" and "Object contains unknown
# field `prot` - at `$.stomp`"; the user wrote stomp.port and stomp.prot.
_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<where>[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]*)`$")


def _problem(message: str) -> str:
    """msgspec's message as ``dotted.key: what is wrong``."""
    match = _AT.match(message)
    assert match is not None  # the pattern matches any text
    what, where = match["what"], (match["where"] or "").lstrip(".")
    where = re.sub(r"\[(\d+)\]", r".\1", where)  # policy.entries[0] -> policy.entries.0
    if unknown := _UNKNOWN.match(what):
        where = f"{where}.{unknown['key']}" if where else unknown["key"]
        what = "unknown key"
    return f"{where}: {what}" if where else what


def with_ports(
    config: Config,
    stomp: int | None = None,
    openwire: int | None = None,
    console: int | None = None,
) -> Config:
    """``config`` with the listener ports the command line overrides (None: as configured)."""
    replace = msgspec.structs.replace
    if stomp is not None:
        config = replace(config, stomp=replace(config.stomp, port=stomp))
    if openwire is not None:
        config = replace(config, openwire=replace(config.openwire, port=openwire))
    if console is not None:
        config = replace(config, console=replace(config.console, port=console))
    return config
