"""The SQL store leaves degraded mode on its own (issue 28): while the database refuses
writes, a probe tries one every couple of seconds, so the mode ends once the database takes
writes again with no send to tell it (it used to end only at the next successful send).
SQLite on a small tmpfs that fills up and is freed (root only: skipped elsewhere), and a
real PostgreSQL server stopped and started again."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from contract import msg

from dovecote.core.errors import StoreFailedError
from dovecote.store.api import AddMessage
from dovecote.store.sql import SqlPersistenceAdapter

sys.path.insert(0, str(Path(__file__).parent.parent))
from postgres import postgres
from smalldisk import fill, mounted_tmpfs

LEAVES_WITHIN_S = 10.0


async def _leaves_degraded_mode(store: SqlPersistenceAdapter) -> float:
    """Seconds until the store is writable again, with nothing written meanwhile."""
    started = time.monotonic()
    while store.degraded is not None:
        assert time.monotonic() - started < LEAVES_WITHIN_S, f"still degraded: {store.degraded}"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def test_sqlite_leaves_degraded_mode_once_its_disk_has_room(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dovecote.store")
    with mounted_tmpfs(tmp_path / "disk", 8) as disk:
        store = SqlPersistenceAdapter(f"sqlite:///{disk / 'dovecote.db'}")
        await store.start()
        try:
            await store.write([AddMessage(msg(0))])
            ballast = fill(disk)
            with pytest.raises(StoreFailedError, match="full"):
                for i in range(1, 50):
                    await store.write([AddMessage(replace(msg(i), body=b"x" * 200_000))])
            assert store.degraded is not None and "full" in store.degraded
            ballast.unlink()
            await _leaves_degraded_mode(store)
            assert any("leaving degraded mode" in r.getMessage() for r in caplog.records)
            await store.write([AddMessage(msg(100))])  # and sends are stored again
        finally:
            await store.stop()


async def test_postgresql_leaves_degraded_mode_once_the_server_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dovecote.store")
    with postgres() as server:
        store = SqlPersistenceAdapter(server.url)
        await store.start()
        try:
            await store.write([AddMessage(msg(0))])
            server.stop()
            with pytest.raises(StoreFailedError):
                await store.write([AddMessage(msg(1))])
            assert store.degraded is not None
            server.start()
            await _leaves_degraded_mode(store)
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1, [r.getMessage() for r in warnings]
            await store.write([AddMessage(msg(2))])
            recovered = store.recover()
            assert [m.message_id for m in next(iter(recovered.queues.values()))] == [
                msg(0).message_id,
                msg(2).message_id,
            ]
        finally:
            await store.stop()
