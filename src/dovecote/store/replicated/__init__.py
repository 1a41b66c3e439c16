"""The replicated LevelDB store (issue 35): a master's LevelDB store streams each applied
batch to its slaves; a Coordinator (coordination.py) elects the master. PROTOCOL.md says
what travels between them. The store itself is ``adapter.ReplicatedLevelDBStore`` (it
needs plyvel; this package's own names do not)."""

from dovecote.store.replicated.coordination import Coordinator, Member, Role, quorum_of
from dovecote.store.replicated.settings import ReplicationSettings, SyncPolicy, parse_sync

__all__ = [
    "Coordinator",
    "Member",
    "ReplicationSettings",
    "Role",
    "SyncPolicy",
    "parse_sync",
    "quorum_of",
]
