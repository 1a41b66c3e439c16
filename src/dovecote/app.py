"""Wiring: a configuration becomes a store, a broker and its listeners, started and stopped
together. The CLI and the test fixtures both go through here."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dovecote.broker.advisories import AdvisoryPlugin, NoConsumerAdvisories
from dovecote.broker.broker import Broker
from dovecote.broker.flag_advisories import FlagAdvisories, any_flag
from dovecote.broker.plugins import BrokerPlugin
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.producer_audit import ProducerAudit
from dovecote.broker.security.plugins import AuthenticationPlugin
from dovecote.broker.stats import StatisticsPlugin
from dovecote.broker.streams import StreamPlugin
from dovecote.broker.usage import DiskWatch, capped, disk_room
from dovecote.config import (
    Config,
    ConfigError,
    OpenWireSection,
    StompSection,
    check_exposure,
    network_settings,
    tls_listeners,
    tls_problem,
    with_ports,
)
from dovecote.extras import sql_driver_problem
from dovecote.network.connector import NetworkConnectors
from dovecote.store.api import PersistenceAdapter
from dovecote.store.journal import JournalPersistenceAdapter
from dovecote.transport.servers import AutoServer, OpenWireServer, StompServer
from dovecote.transport.settings import (
    AutoListenerSettings,
    OpenWireListenerSettings,
    StompListenerSettings,
)
from dovecote.transport.tls import TlsFiles, server_context
from dovecote.web.access import ConsoleAccess, ConsoleUsers
from dovecote.web.console import Console

if TYPE_CHECKING:
    from dovecote.store.schedules import JobStore

log = logging.getLogger("dovecote")


def make_store(
    config: Config, on_demoted: Callable[[str], None] | None = None
) -> PersistenceAdapter:
    """The configured store; ``on_demoted(reason)``: a replicated store's master is master
    no more (the app starts again as a slave)."""
    store = config.store
    if not config.broker.persistent or store.kind == "memory":
        from dovecote.store.memory import MemoryPersistenceAdapter  # (here: as the others)

        return MemoryPersistenceAdapter()
    if store.kind in ("sql", "journaled-sql"):
        # Imported here: SQLAlchemy's memory is something a journal broker does not need.
        from dovecote.store.sql import SqlPersistenceAdapter
        from dovecote.store.sql.journaled import JournaledSqlPersistenceAdapter

        url = store.url or f"sqlite:///{config.broker.data_dir.resolve() / 'dovecote.db'}"
        if problem := sql_driver_problem(url):  # e.g. PostgreSQL without its extra
            raise ConfigError(problem)
        config.broker.data_dir.mkdir(parents=True, exist_ok=True)
        sql = SqlPersistenceAdapter(
            url, create_tables=store.create_tables_on_startup, lease_ms=store.lock_lease_ms
        )
        if store.kind == "sql":
            return sql
        return JournaledSqlPersistenceAdapter(
            config.broker.data_dir / "sql-journal",
            sql,
            max_file_length=store.journal_max_file_length,
            disk_syncs=store.enable_journal_disk_syncs,
            checkpoint_interval_ms=store.checkpoint_interval_ms,
        )
    if store.kind == "leveldb":
        return _leveldb_store(config)
    if store.kind == "replicated-leveldb":
        return _replicated_store(config, on_demoted)
    return JournalPersistenceAdapter(
        config.broker.data_dir / "journal",
        max_file_length=store.journal_max_file_length,
        disk_syncs=store.enable_journal_disk_syncs,
        compact_live_limit=store.compact_live_limit,
        check_files=store.check_for_corrupt_journal_files,
    )


def _leveldb_store(config: Config) -> PersistenceAdapter:
    # Imported here: plyvel is an optional extra the other stores do not need.
    try:
        from dovecote.store.leveldb import LevelDBPersistenceAdapter
    except ImportError as exc:
        if exc.name != "plyvel":
            raise
        raise ConfigError(
            'store.kind = "leveldb" needs plyvel, which is not installed: '
            'pip install "dovecote[leveldb]"'
        ) from None
    return LevelDBPersistenceAdapter(
        leveldb_directory(config), disk_syncs=config.store.enable_journal_disk_syncs
    )


def leveldb_directory(config: Config) -> Path:
    return config.store.directory or config.broker.data_dir / "leveldb"


def _replicated_store(
    config: Config, on_demoted: Callable[[str], None] | None
) -> PersistenceAdapter:
    # Imported here: plyvel and kazoo are the replicated extra, not every broker's.
    try:
        from dovecote.store.replicated.adapter import ReplicatedLevelDBStore
        from dovecote.store.replicated.settings import ReplicationSettings, host_port
        from dovecote.store.replicated.zookeeper import ZooKeeperCoordinator, ZooKeeperSettings
    except ImportError as exc:
        if exc.name not in ("plyvel", "kazoo"):
            raise
        raise ConfigError(
            f'store.kind = "replicated-leveldb" needs {exc.name}, which is not installed: '
            'pip install "dovecote[replicated]"'
        ) from None
    s = config.store
    host, port = host_port(s.bind)
    # The node id names this broker in the group, stable across restarts (brokers of one
    # group may share a broker name, as ActiveMQ's must): its replication address, or with
    # an ephemeral port (bind = "tcp://0.0.0.0:0", as ActiveMQ's examples) its store's path.
    advertised = s.hostname or host
    node_id = (
        f"{advertised}:{port}" if port else f"{advertised}:{leveldb_directory(config).resolve()}"
    )
    settings = ReplicationSettings(
        directory=leveldb_directory(config),
        node_id=node_id,
        bind=s.bind,
        hostname=s.hostname,
        replicas=s.replicas,
        sync=s.sync,
        disk_syncs=s.enable_journal_disk_syncs,
    )
    zookeeper = ZooKeeperSettings(
        s.zk_address, s.zk_path, s.zk_session_timeout_ms / 1000, s.replicas
    )
    return ReplicatedLevelDBStore(settings, ZooKeeperCoordinator(zookeeper), on_demoted)


def store_directory(config: Config) -> Path | None:
    """Where the store keeps its files on this machine (None: in memory, or a server's)."""
    store = config.store
    if not config.broker.persistent or store.kind == "memory":
        return None
    if store.kind == "journal":
        return config.broker.data_dir / "journal"
    if store.kind in ("leveldb", "replicated-leveldb"):
        return leveldb_directory(config)
    if store.url and not store.url.startswith("sqlite"):
        return None
    return config.broker.data_dir


def disk_capped(config: Config) -> BrokerSettings:
    """The broker's settings with the store and temp limits cut to what their disks can
    hold, as ActiveMQ does at start: a store limit past the free space would let producers
    fill the disk instead of waiting at the limit (or failing, with send_fail_if_no_space)."""
    settings = config.broker_settings()
    directory = store_directory(config)
    if directory is not None:
        settings = replace(
            settings, store_limit=_cap_to_disk("store", settings.store_limit, directory)
        )
    return replace(
        settings, temp_limit=_cap_to_disk("temp", settings.temp_limit, settings.temp_directory)
    )


def _cap_to_disk(name: str, limit: int, directory: Path) -> int:
    disk = disk_room(directory)
    room = capped(limit, disk.room)
    if room == limit:
        return limit
    log.warning(
        "%s limit of %d MiB is more than %s can hold (%d MiB free, %d MiB in use): "
        "limited to %d MiB",
        name, limit >> 20, disk.mount, disk.free >> 20, disk.held >> 20, room >> 20,
    )  # fmt: skip
    return room


def disk_watch(config: Config, broker: Broker) -> DiskWatch:
    """The re-check of the store and temp limits against their disks as the broker runs."""
    watch = DiskWatch(config.usage.disk_check_period_ms / 1000)
    usage = broker.usage
    directory = store_directory(config)
    if directory is not None:
        watch.watch(usage.store, config.usage.store_limit, directory)
    watch.watch(usage.temp, config.usage.temp_limit, broker.settings.temp_directory)
    return watch


def make_plugins(config: Config) -> list[BrokerPlugin]:
    # Security first: a connection is authenticated before any other plugin sees it.
    plugins: list[BrokerPlugin] = config.security.to_settings().plugins()
    if config.broker.scheduler_support:
        from dovecote.broker.scheduler import Scheduler

        plugins.append(Scheduler(make_job_store(config)))
    if config.broker.statistics:
        plugins.append(StatisticsPlugin())
    if config.broker.streams:
        plugins.append(StreamPlugin())
    if config.broker.advisory_support:
        openwire = config.openwire
        advisories = AdvisoryPlugin(f"tcp://{openwire.host}:{openwire.port}")
        plugins.append(advisories)
        if any(entry.send_advisory_if_no_consumers for entry in config.policy.entries):
            plugins.append(NoConsumerAdvisories())
        if any_flag(config.policy.entries):
            plugins.append(FlagAdvisories(advisories))
    # Always: bridges from other brokers are accepted (and audited) with or without ours.
    plugins.append(NetworkConnectors(network_settings(config)))
    return plugins


def make_job_store(config: Config) -> JobStore:
    """Where schedules are kept: beside the message store (under data_dir), as ActiveMQ
    keeps its job scheduler store; in memory when messages are (imported with the scheduler:
    most brokers run none)."""
    from dovecote.store.schedules import JobLog, MemoryJobStore

    if not config.broker.persistent or config.store.kind == "memory":
        return MemoryJobStore()
    return JobLog(config.broker.data_dir / "scheduler", sync=config.store.enable_journal_disk_syncs)


def stomp_settings(config: Config, section: StompSection | None = None) -> StompListenerSettings:
    """[stomp]'s settings, or another section's of its kind ([stomp_ssl])."""
    s = config.stomp if section is None else section
    return StompListenerSettings(
        host=s.host,
        port=s.port,
        max_frame_size=s.max_frame_size,
        max_header_size=s.max_header_size,
        max_headers=s.max_headers,
        heartbeat_ms=s.heartbeat_ms,
        heartbeat_grace=s.heartbeat_grace,
        max_connections=s.max_connections,
        connect_attempt_timeout_ms=s.connect_attempt_timeout_ms,
    )


def openwire_settings(
    config: Config, section: OpenWireSection | None = None
) -> OpenWireListenerSettings:
    """[openwire]'s settings, or another section's of its kind ([ssl])."""
    o = config.openwire if section is None else section
    return OpenWireListenerSettings(
        host=o.host,
        port=o.port,
        max_frame_size=o.max_frame_size,
        max_inactivity_ms=o.max_inactivity_ms,
        max_inactivity_initial_delay_ms=o.max_inactivity_initial_delay_ms,
        max_connections=o.max_connections,
        connect_attempt_timeout_ms=o.connect_attempt_timeout_ms,
    )


def tls_context(config: Config, client_auth: bool = True) -> ssl.SSLContext:
    """[tls]'s certificate as a server's SSL context (raises ConfigError when it names none,
    TlsSetupError, an OSError, when its files cannot be used)."""
    if problem := tls_problem(config):
        raise ConfigError(problem)
    t = config.tls
    assert t.certificate_file is not None  # else tls_problem said so
    files = TlsFiles(t.certificate_file, t.key_file, t.key_password, t.ca_file, t.client_auth)
    return server_context(files, client_auth)


def console_access(config: Config, broker: Broker) -> ConsoleAccess:
    """[console]'s access rules, against the users the broker's connections log in as."""
    c = config.console
    authentication = broker.plugins.find(AuthenticationPlugin)
    users = None
    if authentication is not None:
        users = ConsoleUsers(authentication.users, c.admin_group, c.read_group, c.metrics_anonymous)
    return ConsoleAccess(users, frozenset(c.allowed_hosts), frozenset(c.allowed_origins))


class BrokerApp:
    def __init__(self, config: Config) -> None:
        check_exposure(config)  # secure by default: not open beyond loopback by mistake
        self.config = config
        self.replicated = config.broker.persistent and config.store.kind == "replicated-leveldb"
        """A replicated store: start() waits as a slave until elected; a master demoted
        closes everything and starts again as a slave (ActiveMQ's replicated LevelDB)."""
        self._rejoining: asyncio.Task[None] | None = None
        self._build()

    def _build(self) -> None:
        config = self.config
        store = make_store(config, on_demoted=self._demoted)
        # The producer duplicate check starts from the store's contents: it needs the store.
        plugins = [*make_plugins(config), ProducerAudit(store)]
        self.broker = Broker(disk_capped(config), store, plugins=plugins)
        self.disk_watch = disk_watch(config, self.broker)
        self.stomp: StompServer | None = None
        if config.stomp.enabled:
            self.stomp = StompServer(self.broker, stomp_settings(config))
        self.openwire: OpenWireServer | None = None
        if config.openwire.enabled:
            self.openwire = OpenWireServer(self.broker, openwire_settings(config))
        tls = tls_context(config) if tls_listeners(config) else None
        self.ssl: OpenWireServer | None = None
        if config.ssl.enabled:
            self.ssl = OpenWireServer(self.broker, openwire_settings(config, config.ssl), tls)
        self.stomp_ssl: StompServer | None = None
        if config.stomp_ssl.enabled:
            self.stomp_ssl = StompServer(self.broker, stomp_settings(config, config.stomp_ssl), tls)
        self.auto: AutoServer | None = None
        if config.auto.enabled:
            self.auto = AutoServer(
                self.broker,
                AutoListenerSettings(
                    config.auto.host,
                    config.auto.port,
                    config.auto.max_connections,
                    config.auto.protocol_detection_timeout_ms,
                ),
                stomp_settings(config),
                openwire_settings(config),
                tls if config.auto.tls else None,
            )

        self.console: Console | None = None
        if config.console.enabled:
            console_tls = tls_context(config, client_auth=False) if config.console.tls else None
            self.console = Console(
                self.broker,
                config.console.host,
                config.console.port,
                tls=console_tls,
                access=console_access(config, self.broker),
            )

    async def start(self) -> None:
        if self.replicated and self.console is not None:
            # First: a slave's admin API answers (its role and the replicas it sees) while
            # start() waits below for the store to be elected master.
            await self.console.start()
        await self.broker.start()
        self.disk_watch.start()
        if self.stomp is not None:
            await self.stomp.start()
        if self.openwire is not None:
            await self.openwire.start()
            advisories = self.broker.plugins.find(AdvisoryPlugin)
            if advisories is not None:  # the port bound, when the configuration said 0
                advisories.broker_url = f"tcp://{self.openwire.host}:{self.openwire.port}"
        if self.ssl is not None:
            await self.ssl.start()
        if self.stomp_ssl is not None:
            await self.stomp_ssl.start()
        if self.auto is not None:
            await self.auto.start()
        if self.console is not None and not self.replicated:
            await self.console.start()
        kind = self.config.store.kind if self.config.broker.persistent else "memory"
        log.info("broker %r started (store: %s)", self.config.broker.name, kind)
        if self.replicated:  # a restart as a slave, then master, listens where this one does
            self.config = with_ports(
                self.config,
                stomp=self.stomp.port if self.stomp is not None else None,
                openwire=self.openwire.port if self.openwire is not None else None,
                console=self.console.port if self.console is not None else None,
            )

    def _demoted(self, reason: str) -> None:
        """The store is master no more: its writes fail from now on."""
        if self._rejoining is None or self._rejoining.done():
            self._rejoining = asyncio.get_running_loop().create_task(self._rejoin(reason))

    async def _rejoin(self, reason: str) -> None:
        log.warning(
            "broker %r is no longer master (%s): closing its connections, starting again "
            "as a slave", self.config.broker.name, reason,
        )  # fmt: skip
        await self._stop_parts()
        self._build()
        try:
            await self.start()
        except (OSError, ConfigError) as exc:
            log.error("broker %r cannot start again: %s", self.config.broker.name, exc)

    async def stop(self) -> None:
        if self._rejoining is not None and not self._rejoining.done():
            self._rejoining.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rejoining
        await self._stop_parts()

    async def _stop_parts(self) -> None:
        if self.console is not None:
            await self.console.stop()
        if self.auto is not None:
            await self.auto.stop()
        if self.stomp_ssl is not None:
            await self.stomp_ssl.stop()
        if self.ssl is not None:
            await self.ssl.stop()
        if self.openwire is not None:
            await self.openwire.stop()
        if self.stomp is not None:
            await self.stomp.stop()
        await self.disk_watch.stop()
        await self.broker.stop()
        log.info("broker %r stopped", self.config.broker.name)
