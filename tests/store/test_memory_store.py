"""The memory adapter against the store contract."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from contract import StoreContract

from dovecote.store.api import PersistenceAdapter
from dovecote.store.memory import MemoryPersistenceAdapter


@pytest.fixture
async def store() -> AsyncIterator[PersistenceAdapter]:
    adapter = MemoryPersistenceAdapter()
    await adapter.start()
    yield adapter
    await adapter.stop()


@pytest.fixture
def reopen():  # type: ignore[no-untyped-def]
    async def again(adapter: PersistenceAdapter) -> PersistenceAdapter:
        # The memory store lives as long as the process: stopping and starting keeps it.
        await adapter.stop()
        await adapter.start()
        return adapter

    return again


class TestMemoryStore(StoreContract):
    pass
