"""The replicated store's settings (the config builds them) and its ``sync`` option."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_BIND: Final = "tcp://127.0.0.1:61619"
MEM: Final = 1
DISK: Final = 2
_LEVELS: Final = {
    "local_mem": (MEM, 0),
    "local_disk": (DISK, 0),
    "remote_mem": (0, MEM),
    "remote_disk": (0, DISK),
    "quorum_mem": (MEM, MEM),
    "quorum_disk": (DISK, DISK),
}


@dataclass(frozen=True, slots=True)
class SyncPolicy:
    """Where a write must be before it is done (ActiveMQ's ``sync``): ``local`` on the master,
    ``remote`` on a quorum's slaves; 0 nowhere, MEM written, DISK synced."""

    local: int
    remote: int


def parse_sync(text: str) -> SyncPolicy:
    """ActiveMQ's comma list (``quorum_mem``, ``local_disk,remote_mem``...); of two settings
    for one side the stronger counts. Raises ValueError naming what it does not know."""
    local = remote = 0
    for part in (p.strip() for p in text.split(",")):
        if part not in _LEVELS:
            raise ValueError(f"sync {part!r} is not one of {', '.join(_LEVELS)}")
        local = max(local, _LEVELS[part][0])
        remote = max(remote, _LEVELS[part][1])
    return SyncPolicy(max(local, MEM), remote)


@dataclass(frozen=True)
class ReplicationSettings:
    directory: Path
    """The local LevelDB (data_dir/leveldb)."""
    node_id: str
    bind: str = DEFAULT_BIND
    """Where the replication server listens; port 0: any free one."""
    hostname: str = ""
    """The host slaves connect to; "" means the bind host."""
    replicas: int = 3
    sync: str = "quorum_mem"
    disk_syncs: bool = True
    """[store] enable_journal_disk_syncs: off, nothing is synced, whatever ``sync`` says."""
    peer_timeout_s: float = 5.0
    """A peer silent this long is dropped; each side sends heartbeats at a third of it."""
    backlog_bytes: int = 64 << 20
    """Recent records the master keeps for slaves that catch up; older ones get a copy."""


def host_port(bind: str) -> tuple[str, int]:
    """``tcp://host:port`` or ``host:port`` as (host, port)."""
    address = bind.removeprefix("tcp://")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bind {bind!r} is not tcp://host:port")
    return host.strip("[]"), int(port)
