"""The journal store: append-only data files and an LMDB index (see FORMAT.md)."""

from dovecote.store.journal.adapter import JournalPersistenceAdapter

__all__ = ["JournalPersistenceAdapter"]
