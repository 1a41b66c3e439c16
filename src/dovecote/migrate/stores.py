"""<persistenceAdapter> (and <persistenceFactory>) as [store], <systemUsage> as [usage]."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from urllib.parse import quote, urlsplit

from dovecote.migrate.context import Conversion
from dovecote.migrate.listeners import tidy_path
from dovecote.migrate.xmlread import (
    children,
    local,
    parse_bool,
    parse_duration_ms,
    parse_int,
    parse_size,
)

_NOT_READ = (
    "dovecote keeps its own files in data_dir/{kind}; ActiveMQ's are not read, so "
    "move stored messages over before switching (docs/migration.md)"
)


def convert_store(conv: Conversion, root: ET.Element, broker: ET.Element) -> None:
    adapters = [
        (wrapper, adapter)
        for name in ("persistenceAdapter", "persistenceFactory")
        for wrapper in children(broker, name)
        for adapter in children(wrapper)
    ]
    for wrapper, _ in adapters:
        conv.use(wrapper)
    if not adapters:
        return  # ActiveMQ's default is KahaDB, dovecote's the journal
    wrapper, adapter = adapters[0]
    for _, extra in adapters[1:]:
        conv.leftover(extra, None, "a broker has one persistence adapter (the first is kept)")
    kind = local(adapter.tag)
    handler = _ADAPTERS.get(kind)
    if handler is None:
        conv.leftover(adapter, None, "dovecote has no such store")
        return
    conv.use(adapter)
    handler(conv, root, broker, adapter)


def _kind(conv: Conversion, adapter: ET.Element, kind: str) -> None:
    conv.put(conv.table("store"), "kind", kind, adapter)


def _directory(
    conv: Conversion, broker: ET.Element, adapter: ET.Element, attr: str, kind: str
) -> None:
    directory = conv.text(adapter, attr)
    if directory is None:
        return
    broker_table = conv.table("broker")
    if broker_table.get("data_dir") is None and "dataDirectory" not in broker.attrib:
        parent = tidy_path(directory).rpartition("/")[0] or "."
        conv.put(broker_table, "data_dir", parent, adapter, attr)
    conv.leftover(adapter, attr, _NOT_READ.format(kind=kind))


def _kahadb(conv: Conversion, root: ET.Element, broker: ET.Element, adapter: ET.Element) -> None:
    _kind(conv, adapter, "journal")
    _directory(conv, broker, adapter, "directory", "journal")
    store = conv.table("store")
    conv.carry(store, "journal_max_file_length", adapter, "journalMaxFileLength", parse_size)
    for attr, key in (
        ("enableJournalDiskSyncs", "enable_journal_disk_syncs"),
        ("checkForCorruptJournalFiles", "check_for_corrupt_journal_files"),
    ):
        conv.carry(store, key, adapter, attr, parse_bool)
    strategy = (conv.text(adapter, "journalDiskSyncStrategy") or "").lower()
    if strategy in ("always", "never"):
        conv.put(
            store,
            "enable_journal_disk_syncs",
            strategy == "always",
            adapter,
            "journalDiskSyncStrategy",
        )
    elif strategy:
        conv.leftover(
            adapter,
            "journalDiskSyncStrategy",
            "dovecote syncs each group of writes (always) or never: kept always",
        )
    if adapter.get("checksumJournalFiles", "").lower() == "true":
        conv.same_as(adapter, "checksumJournalFiles", "every journal record has a CRC-32")


def _multi_kahadb(
    conv: Conversion, root: ET.Element, broker: ET.Element, adapter: ET.Element
) -> None:
    _kind(conv, adapter, "journal")
    _directory(conv, broker, adapter, "directory", "journal")
    for child in children(adapter):
        conv.leftover(child, None, "dovecote keeps every destination in one journal")


def _leveldb(conv: Conversion, root: ET.Element, broker: ET.Element, adapter: ET.Element) -> None:
    replicated = local(adapter.tag) == "replicatedLevelDB"
    _kind(conv, adapter, "replicated-leveldb" if replicated else "leveldb")
    _directory(conv, broker, adapter, "directory", "leveldb")
    store = conv.table("store")
    if adapter.get("verifyChecksums", "").lower() == "true":
        conv.same_as(adapter, "verifyChecksums", "dovecote's LevelDB reads verify checksums")
    if not replicated:
        conv.carry(store, "enable_journal_disk_syncs", adapter, "sync", parse_bool)
        return
    # replicatedLevelDB's sync is when a write is done (quorum_mem...), as dovecote's.
    conv.carry(store, "replicas", adapter, "replicas", parse_int)
    conv.carry(store, "zk_address", adapter, "zkAddress", str)
    conv.carry(store, "zk_path", adapter, "zkPath", str)
    conv.carry(store, "zk_session_timeout_ms", adapter, "zkSessionTimeout", parse_duration_ms)
    conv.carry(store, "hostname", adapter, "hostname", str)
    conv.carry(store, "bind", adapter, "bind", str)
    conv.carry(store, "sync", adapter, "sync", str)
    for attr in ("zkPassword", "securityToken"):
        if attr in adapter.attrib:
            conv.leftover(adapter, attr, "dovecote's replication has no authentication yet")


def _memory(conv: Conversion, root: ET.Element, broker: ET.Element, adapter: ET.Element) -> None:
    _kind(conv, adapter, "memory")


def _jdbc(conv: Conversion, root: ET.Element, broker: ET.Element, adapter: ET.Element) -> None:
    journaled = local(adapter.tag) in ("journaledJDBC", "journalPersistenceAdapterFactory")
    if journaled and adapter.get("useJournal", "true").lower() == "false":
        conv.use(adapter, "useJournal")
        journaled = False
    _kind(conv, adapter, "journaled-sql" if journaled else "sql")
    store = conv.table("store")
    conv.carry(store, "create_tables_on_startup", adapter, "createTablesOnStartup", parse_bool)
    reference = conv.text(adapter, "dataSource")
    if reference is None:
        if "dataSource" not in adapter.attrib:
            conv.warnings.append(
                "the JDBC store had no dataSource (ActiveMQ's Derby): SQLite under data_dir"
            )
        return
    bean = _bean(root, reference.removeprefix("#"))
    if bean is None:
        conv.leftover(
            adapter, "dataSource", "no <bean> of that id in this file: SQLite under data_dir"
        )
        return
    url = datasource_url(conv, bean)
    if url is not None:
        conv.put(store, "url", url, bean, None)


def _bean(root: ET.Element, bean_id: str) -> ET.Element | None:
    for element in root.iter():
        if (
            isinstance(element.tag, str)
            and local(element.tag) == "bean"
            and element.get("id") == bean_id
        ):
            return element
    return None


def bean_properties(conv: Conversion, bean: ET.Element) -> dict[str, str]:
    """A Spring bean's <property name= value=> (or a <value> child), placeholders resolved."""
    values: dict[str, str] = {}
    for prop in children(bean, "property"):
        name = prop.get("name", "")
        conv.use(prop, "name")
        if "value" in prop.attrib:
            value = conv.text(prop, "value")
        else:
            inner = children(prop, "value")
            value = None
            if inner:
                conv.use(inner[0])
                value, missing = conv.placeholders.resolve(inner[0].text or "")
                if missing:
                    conv.leftover(inner[0], None, f"unresolved placeholder ${{{missing[0]}}}")
                    value = None
        if value is not None:
            values[name] = value.strip()
    return values


def datasource_url(conv: Conversion, bean: ET.Element) -> str | None:
    """PostgreSQL's data sources (PGSimpleDataSource, PGPoolingDataSource, a pool's
    jdbc:postgresql:// url) as a SQLAlchemy URL; None (named) for any other database."""
    conv.use(bean, "id", "class", "destroy-method")
    cls = bean.get("class", "")
    props = bean_properties(conv, bean)
    user = props.get("user") or props.get("username")
    password = props.get("password")
    if cls.startswith("org.postgresql.ds."):
        host = props.get("serverName") or props.get("serverNames") or "localhost"
        port = props.get("portNumber") or props.get("portNumbers")
        database = props.get("databaseName", "")
        address = f"{host}:{port}" if port and port != "0" else host
    elif props.get("url", "").startswith("jdbc:postgresql:"):
        parts = urlsplit(props["url"].removeprefix("jdbc:"))
        address, database = parts.netloc or "localhost", parts.path.lstrip("/")
    else:
        what = props.get("url") or cls
        conv.leftover(
            bean,
            None,
            f"{what}: dovecote's sql store runs on PostgreSQL or SQLite "
            "(SQLite under data_dir instead)",
        )
        return None
    login = ""
    if user:
        login = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
    conv.warnings.append(
        f"the JDBC data source (line {conv.line(bean)}) becomes store.url; "
        "dovecote creates its own tables, ActiveMQ's rows are not read"
    )
    return f"postgresql+psycopg://{login}{address}/{database}"


_ADAPTERS = {
    "kahaDB": _kahadb,
    "mKahaDB": _multi_kahadb,
    "levelDB": _leveldb,
    "replicatedLevelDB": _leveldb,
    "memoryPersistenceAdapter": _memory,
    "jdbcPersistenceAdapter": _jdbc,
    "journaledJDBC": _jdbc,
    "journalPersistenceAdapterFactory": _jdbc,
}


def convert_usage(conv: Conversion, broker: ET.Element) -> None:
    usage = conv.table("usage")
    for wrapper in children(broker, "systemUsage"):
        conv.use(wrapper)
        for system in children(wrapper, "systemUsage"):
            conv.use(system)
            conv.carry(usage, "send_fail_if_no_space", system, "sendFailIfNoSpace", parse_bool)
            for name, key in (
                ("memoryUsage", "memory_limit"),
                ("storeUsage", "store_limit"),
                ("tempUsage", "temp_limit"),
            ):
                for outer in children(system, name):
                    conv.use(outer)
                    for inner in children(outer, name):
                        conv.use(inner)
                        conv.carry(usage, key, inner, "limit", parse_size)
                        if "percentOfJvmHeap" in inner.attrib:
                            conv.leftover(
                                inner, "percentOfJvmHeap", "no JVM heap here: give a limit in bytes"
                            )
