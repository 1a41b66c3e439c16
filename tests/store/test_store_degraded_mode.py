"""A disk that refuses the store's writes puts the store in a stated degraded mode (issue:
hardening): one WARNING saying why, sends failing with that reason, removals still written
where the disk allows, ``degraded`` for the admin API; once the disk has room again the
store leaves the mode on its own (the journal tries to start a data file every couple of
seconds), with one INFO line, and nothing acknowledged is lost.

On a small tmpfs mounted for the test (root only: skipped elsewhere)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path

import pytest
from contract import Q, msg

from dovecote.core.errors import StoreFailedError
from dovecote.core.message import Message
from dovecote.store.api import AddMessage, RemoveMessage
from dovecote.store.journal import JournalPersistenceAdapter
from smalldisk import fill, mounted_tmpfs

BODY = b"x" * 100_000


def big(i: int) -> Message:
    return replace(msg(i), body=BODY)


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


async def test_a_full_disk_degrades_the_journal_until_there_is_room_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="dovecote.store")
    with mounted_tmpfs(tmp_path / "disk", 8) as disk:
        store = JournalPersistenceAdapter(disk / "journal", max_file_length=1024 * 1024)
        await store.start()
        try:
            for i in range(3):
                await store.write([AddMessage(big(i))])
            assert store.degraded is None
            ballast = fill(disk)
            stored = 3
            with pytest.raises(StoreFailedError) as refused:
                for i in range(3, 40):
                    await store.write([AddMessage(big(i))])
                    stored += 1
            assert "No space left on device" in str(refused.value)
            assert store.degraded is not None and "No space left on device" in store.degraded

            # Degraded: each send is tried, and fails with the reason; a small one that
            # fits where a large one did not is stored, a removal too, and the store stays
            # degraded (its probe, a new data file, still cannot be made).
            with pytest.raises(StoreFailedError, match="No space left"):
                await store.write([AddMessage(big(99))])
            await store.write([AddMessage(msg(100))])
            await store.write([RemoveMessage(Q, big(0).message_id)])
            assert store.degraded is not None
            assert len(lines(caplog, "store degraded:")) == 1
            assert not [r for r in caplog.records if r.exc_info and r.levelno > logging.DEBUG]

            # Room again: the store notices on its own, with no write to tell it.
            ballast.unlink()
            deadline = time.monotonic() + 10
            while store.degraded is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert store.degraded is None
            assert len(lines(caplog, "leaving degraded mode")) == 1
            await store.write([AddMessage(big(200))])
        finally:
            await store.stop()
        store = JournalPersistenceAdapter(disk / "journal", max_file_length=1024 * 1024)
        await store.start()
        try:
            kept = [m.message_id for m in store.recover().queues[Q]]
        finally:
            await store.stop()
        assert kept == [m.message_id for m in [*map(big, range(1, stored)), msg(100), big(200)]]
        assert len(lines(caplog, "store degraded:")) == 1
