"""[store]'s options for ``kind = "replicated-leveldb"`` (issue 35, docs/replication.md):
ActiveMQ's replicatedLevelDB attributes in snake_case. They sit in [store] beside the other
kinds' options, as ActiveMQ's sit on its one store element."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from msgspec import Meta

from dovecote.config.base import Positive, Section
from dovecote.store.replicated.settings import DEFAULT_BIND, host_port, parse_sync


class ReplicatedStoreOptions(Section, frozen=True):
    directory: Path | None = None
    """leveldb and replicated-leveldb: the LevelDB directory (default data_dir/leveldb)."""
    replicas: Positive = 3
    """replicated-leveldb: the group's size; a quorum (replicas // 2 + 1, the master
    included) must be up to elect a master and to accept a write."""
    zk_address: Annotated[str, Meta(min_length=1)] = "127.0.0.1:2181"
    """ZooKeeper's servers, "host:port,host:port" (zkAddress)."""
    zk_path: Annotated[str, Meta(pattern=r"^/[^\s]*$")] = "/default"
    """The group's znode (zkPath): brokers under one path form one group."""
    zk_session_timeout_ms: Annotated[int, Meta(ge=100)] = 2_000
    """zkSessionTimeout: a broker silent this long loses its ZooKeeper session (a master, its
    role). ZooKeeper keeps it within 2 and 20 of its ticks (4-40 s with tickTime 2000)."""
    hostname: str = ""
    """The host slaves connect to ("" : bind's host), as ActiveMQ's hostname."""
    bind: str = DEFAULT_BIND
    """Where this broker's replication server listens, tcp://host:port (loopback by default,
    where ActiveMQ's is 0.0.0.0: nothing travels beyond this machine unless asked)."""
    sync: str = "quorum_mem"
    """When a write is done: quorum_mem (a quorum holds it, the slaves in memory),
    quorum_disk (a quorum synced it), local_disk, local_mem, remote_mem, remote_disk, or a
    comma list of them."""

    def __post_init__(self) -> None:
        # msgspec reports a ValueError raised here as the table's error (store: ...).
        parse_sync(self.sync)
        host_port(self.bind)
