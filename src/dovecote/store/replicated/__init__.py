"""The replicated LevelDB store (issue 35): a master's LevelDB store streams each applied
batch to its slaves; a Coordinator (coordination.py) elects the master. PROTOCOL.md says
what travels between them."""

from dovecote.store.replicated.coordination import Coordinator, Member, Role, quorum_of

__all__ = ["Coordinator", "Member", "Role", "quorum_of"]
