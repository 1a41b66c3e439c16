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

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dovecote.broker.policy import (
    BrokerSettings,
    DeadLetterKind,
    DeadLetterStrategy,
    DestinationPolicy,
    PolicyMap,
)


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid; the message says where."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BrokerSection(_Section):
    name: str = "localhost"
    """The broker name, as in ActiveMQ's brokerName."""
    data_dir: Path = Path("data")
    """Where stores keep their files (relative paths are relative to the working dir)."""
    persistent: bool = True
    """False: the memory store, whatever ``store.kind`` says (ActiveMQ's persistent=false)."""


class StoreSection(_Section):
    kind: Literal["journal", "sql", "journaled-sql", "memory"] = "journal"
    """The persistence adapter: the journal (KahaDB's design, under data_dir/journal), sql
    (ActiveMQ's JDBC design), journaled-sql (a journal in front of sql), or memory."""
    journal_max_file_length: int = Field(32 * 1024 * 1024, gt=4096)
    """Data files roll over at this size (journalMaxFileLength)."""
    enable_journal_disk_syncs: bool = True
    """fsync each group of writes before acknowledging them (enableJournalDiskSyncs)."""
    compact_live_limit: int = Field(1000, ge=0)
    """The oldest data file is compacted when at most this many live records pin it."""
    url: str | None = None
    """sql: a SQLAlchemy URL (postgresql+psycopg://user@host/db); default SQLite in data_dir."""
    create_tables_on_startup: bool = True
    """sql: create the ACTIVEMQ_* tables when they are missing (createTablesOnStartup)."""
    checkpoint_interval_ms: int = Field(5_000, ge=0)
    """journaled-sql: how often the journal is checkpointed into the tables."""
    lock_lease_ms: int = Field(10_000, ge=100)
    """sql: how long the ACTIVEMQ_LOCK lease lasts unless renewed; a broker restarted after
    a crash waits this long for its predecessor's lease."""


class StompSection(_Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(61613, ge=0, le=65535)
    max_frame_size: int = Field(10 * 1024 * 1024, gt=0)
    """Frames larger than this are refused with an ERROR (ActiveMQ's maxFrameSize)."""
    max_header_size: int = Field(64 * 1024, gt=0)
    max_headers: int = Field(1000, gt=0)
    heartbeat_ms: tuple[int, int] = (10_000, 10_000)
    """What the server offers in CONNECTED: (can send every, wants to receive every)."""
    heartbeat_grace: float = Field(1.5, ge=1.0)
    """A client is dropped after heart-beat interval x this of silence."""
    max_connections: int = Field(1000, gt=0)


class OpenWireSection(_Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(61616, ge=0, le=65535)
    max_frame_size: int = Field(100 * 1024 * 1024, gt=0)
    max_inactivity_ms: int = Field(30_000, ge=0)
    """maxInactivityDuration: keep-alives both ways; a silent peer is dropped (0: off)."""
    max_inactivity_initial_delay_ms: int = Field(10_000, ge=0)
    max_connections: int = Field(1000, gt=0)


class AutoSection(_Section):
    """auto://: one port that tells OpenWire from STOMP by the first bytes."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(61608, ge=0, le=65535)


class ConsoleSection(_Section):
    """The admin API and Prometheus metrics over HTTP (ActiveMQ's web console port)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8161, ge=0, le=65535)


class DeadLetterSection(_Section):
    shared_queue: str = "ActiveMQ.DLQ"
    queue_prefix: str = "DLQ."
    topic_prefix: str = "DLQ."
    use_queue_for_queue_messages: bool = True
    use_queue_for_topic_messages: bool = True
    process_expired: bool = True
    process_non_persistent: bool = False


class UsageSection(_Section):
    """systemUsage: the broker-wide limits (SPEC M6)."""

    memory_limit: int = Field(256 * 1024 * 1024, ge=0)
    """Bytes of messages held in memory; at the limit producers wait (0: no limit)."""
    store_limit: int = Field(100 * 1024**3, ge=0)
    """Bytes of persistent messages kept in the store."""
    temp_limit: int = Field(50 * 1024**3, ge=0)
    """Bytes of non-persistent messages spilled to the temp store (data_dir/tmp_storage)."""
    send_fail_if_no_space: bool = False
    """At a limit, a send fails with an error naming it instead of waiting."""


class PolicyEntry(_Section):
    pattern: str = ">"
    queues: bool = True
    """True: the entry applies to queues matching pattern; False: to topics."""
    dead_letter: Literal["shared", "individual"] = "shared"
    dead_letter_options: DeadLetterSection = DeadLetterSection()
    maximum_redeliveries: int = Field(6, ge=-1)
    pending_message_limit: int = Field(-1, ge=-1)
    memory_limit: int = Field(-1, ge=-1)
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


class PolicySection(_Section):
    expire_messages_period_ms: int = Field(30_000, ge=0)
    entries: tuple[PolicyEntry, ...] = ()


class Config(_Section):
    broker: BrokerSection = BrokerSection()
    store: StoreSection = StoreSection()
    stomp: StompSection = StompSection()
    openwire: OpenWireSection = OpenWireSection()
    auto: AutoSection = AutoSection()
    console: ConsoleSection = ConsoleSection()
    policy: PolicySection = PolicySection()
    usage: UsageSection = UsageSection()

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
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"config file {path}: {problems}") from None
