"""What kill -9 leaves of a journal store, made within the test's process."""

from __future__ import annotations

import os

from dovecote.store.journal import JournalPersistenceAdapter


async def crash(store: JournalPersistenceAdapter) -> None:
    """Stop ``store`` as kill -9 would: what it wrote stays written (and fsynced), nothing
    more reaches its index, the index is not closed cleanly, and its lock is let go."""
    await store._writer.stop()
    assert store._index is not None
    store._index.env.close()
    os.close(store._lock_fd)
