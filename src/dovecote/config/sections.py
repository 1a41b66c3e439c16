"""The broker's own tables: broker, store, the listeners and TLS, usage and policies."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta, field

from dovecote.broker.policy import DeadLetterKind, DeadLetterStrategy, DestinationPolicy
from dovecote.config.base import LimitOrUnset, NonNegative, Port, Positive, Section
from dovecote.config.replication import ReplicatedStoreOptions
from dovecote.core.commands import (
    DURABLE_TOPIC_PREFETCH,
    QUEUE_BROWSER_PREFETCH,
    QUEUE_PREFETCH,
    TOPIC_PREFETCH,
)


class BrokerSection(Section, frozen=True):
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


class StoreSection(ReplicatedStoreOptions, frozen=True):
    kind: Literal["journal", "sql", "journaled-sql", "leveldb", "replicated-leveldb", "memory"] = (
        "journal"
    )
    """The persistence adapter: the journal (KahaDB's design, under data_dir/journal), sql
    (ActiveMQ's JDBC design), journaled-sql (a journal in front of sql), leveldb (an LSM
    tree under data_dir/leveldb; needs the leveldb extra, plyvel), replicated-leveldb
    (leveldb replicated to a group elected through ZooKeeper, config/replication.py; needs
    the replicated extra), or memory."""
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


class StompSection(Section, frozen=True):
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


class OpenWireSection(Section, frozen=True):
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


class AutoSection(Section, frozen=True):
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


class ConsoleSection(Section, frozen=True):
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


class TlsSection(Section, frozen=True):
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


class DeadLetterSection(Section, frozen=True):
    shared_queue: str = "ActiveMQ.DLQ"
    queue_prefix: str = "DLQ."
    topic_prefix: str = "DLQ."
    use_queue_for_queue_messages: bool = True
    use_queue_for_topic_messages: bool = True
    process_expired: bool = True
    process_non_persistent: bool = False


class UsageSection(Section, frozen=True):
    """systemUsage: the broker-wide limits (compatibility M6)."""

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
    return_free_memory_after_ms: NonNegative = 30_000
    """Memory the broker has freed (a backlog consumed) and left unused this long is given
    back to the system, 32 MiB or more at a time (glibc; 0: kept for reuse)."""


class PolicyEntry(Section, frozen=True):
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
    send_advisory_if_no_consumers: bool = False
    """ActiveMQ's sendAdvisoryIfNoConsumers (ActiveMQ.Advisory.NoConsumer.*)."""
    advisory_for_slow_consumers: bool = False
    advisory_for_fast_producers: bool = False
    advisory_when_full: bool = False
    advisory_for_discarding_messages: bool = False
    advisory_for_delivery: bool = False
    advisory_for_consumed: bool = False
    """ActiveMQ's policy flags of the same names (camelCase there): SlowConsumer,
    FastProducer, FULL, MessageDiscarded, MessageDelivered, MessageConsumed advisories."""
    queue_prefetch: NonNegative = QUEUE_PREFETCH
    queue_browser_prefetch: NonNegative = QUEUE_BROWSER_PREFETCH
    topic_prefetch: NonNegative = TOPIC_PREFETCH
    durable_topic_prefetch: NonNegative = DURABLE_TOPIC_PREFETCH
    """Given to consumers that asked for their client's default prefetch (ActiveMQ's
    policyEntry queuePrefetch, queueBrowserPrefetch, topicPrefetch, durableTopicPrefetch)."""

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
            send_advisory_if_no_consumers=self.send_advisory_if_no_consumers,
            advisory_for_slow_consumers=self.advisory_for_slow_consumers,
            advisory_for_fast_producers=self.advisory_for_fast_producers,
            advisory_when_full=self.advisory_when_full,
            advisory_for_discarding_messages=self.advisory_for_discarding_messages,
            advisory_for_delivery=self.advisory_for_delivery,
            advisory_for_consumed=self.advisory_for_consumed,
            queue_prefetch=self.queue_prefetch,
            queue_browser_prefetch=self.queue_browser_prefetch,
            topic_prefetch=self.topic_prefetch,
            durable_topic_prefetch=self.durable_topic_prefetch,
        )


class PolicySection(Section, frozen=True):
    expire_messages_period_ms: NonNegative = 30_000
    entries: tuple[PolicyEntry, ...] = ()
