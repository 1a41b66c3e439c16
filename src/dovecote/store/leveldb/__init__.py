"""The LevelDB store over plyvel (an optional extra; see FORMAT.md)."""

from dovecote.store.leveldb.adapter import LevelDBPersistenceAdapter

__all__ = ["LevelDBPersistenceAdapter"]
