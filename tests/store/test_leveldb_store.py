"""The LevelDB adapter against the store contract, then its own cases: paging a queue back,
the lock (a second broker waits as a slave), counts after a restart."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from contract import Q, StoreContract, msg

from brokers import running_broker
from dovecote.app import make_store
from dovecote.config import ConfigError, load_config
from dovecote.core.destinations import Destination, queue
from dovecote.core.errors import StoreFailedError
from dovecote.core.message import Message
from dovecote.protocol.stomp import Frame
from dovecote.store.api import (
    AddMessage,
    PagingStore,
    PersistenceAdapter,
    RemoveDestination,
    RemoveMessage,
    StoredQueue,
    UpdateRedelivery,
)
from dovecote.store.journal.records import JournalOp
from dovecote.store.leveldb import LevelDBPersistenceAdapter
from smalldisk import fill, mounted_tmpfs
from stomplink import Link


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[PersistenceAdapter]:
    adapter = LevelDBPersistenceAdapter(tmp_path / "leveldb")
    await adapter.start()
    yield adapter
    await adapter.stop()


@pytest.fixture
def reopen(tmp_path: Path):  # type: ignore[no-untyped-def]
    async def again(adapter: PersistenceAdapter) -> PersistenceAdapter:
        # A new adapter over the same directory: what a broker restart sees.
        await adapter.stop()
        fresh = LevelDBPersistenceAdapter(tmp_path / "leveldb")
        await fresh.start()
        return fresh

    return again


class TestLevelDBStore(StoreContract):
    pass


async def open_store(directory: Path, **options: object) -> LevelDBPersistenceAdapter:
    adapter = LevelDBPersistenceAdapter(directory, **options)  # type: ignore[arg-type]
    await adapter.start()
    return adapter


def ids(messages: list[Message]) -> list[str]:
    return [m.message_id for m in messages]


async def test_a_queue_is_read_back_a_page_at_a_time_in_broker_order(tmp_path: Path) -> None:
    """PagingStore: a restart reads each queue's count, bytes and last broker sequence only,
    and the broker pages the messages in from a position; the broker's sequence orders them
    before the store's own."""
    store = await open_store(tmp_path)
    sent = [replace(msg(i), sequence=1000 - i) for i in range(250)]  # broker order: reversed
    await store.write([AddMessage(m) for m in sent])
    await store.write([RemoveMessage(Q, sent[0].message_id)])
    await store.write([UpdateRedelivery(Q, sent[10].message_id, 2)])
    await store.stop()
    store = await open_store(tmp_path)
    assert isinstance(store, PagingStore)
    recovered = store.recover_paged()
    assert recovered.queues == {
        Q: StoredQueue(249, sum(m.size for m in sent[1:]), max(m.sequence for m in sent[1:]))
    }
    expected = sorted(sent[1:], key=lambda m: m.sequence)
    pages, position = [], (0, 0)
    while page := store.read_queue(Q, position, 100).messages:
        pages.append(page)
        position = store.read_queue(Q, position, 100).next
    assert [len(p) for p in pages] == [100, 100, 49]
    got = [m for page in pages for m in page]
    assert ids(got) == ids(expected)
    assert got[-10].redelivery_counter == 2 and got[-10].message_id == sent[10].message_id
    assert store.read_queue(Q, position, 100).messages == []
    assert store.read_queue(queue("other"), (0, 0), 10).messages == []
    await store.stop()


async def test_counts_follow_sends_removals_and_resends(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(msg(i)) for i in range(5)])
    await store.write([AddMessage(msg(1))])  # a resend under the same id replaces it
    await store.write([RemoveMessage(Q, msg(2).message_id), RemoveMessage(Q, "ID:unknown")])
    assert store.message_count(Q) == 4
    await store.write([RemoveDestination(Q)])
    assert store.message_count(Q) == 0 and store.recover().queues == {}
    await store.write([AddMessage(msg(9))])
    await store.stop()
    store = await open_store(tmp_path)
    assert store.message_count(Q) == 1
    assert store.recover_paged().queues[Q].count == 1
    await store.stop()


async def test_a_second_store_on_the_directory_waits_as_a_slave(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    master = await open_store(tmp_path)
    await master.write([AddMessage(msg(1))])
    slave = LevelDBPersistenceAdapter(tmp_path)
    starting = asyncio.create_task(slave.start())
    while "waiting as a slave" not in caplog.text:
        await asyncio.sleep(0.05)
    assert not starting.done()
    await master.stop()
    await asyncio.wait_for(starting, 10)
    assert ids(slave.recover().queues[Q]) == [msg(1).message_id]
    assert "now the master" in caplog.text
    await slave.stop()


async def test_a_slave_told_to_stop_while_waiting_lets_go(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker stopped while it waits as a slave stops waiting and holds nothing: the
    master goes on, and after it the directory opens for the next broker at once."""
    caplog.set_level(logging.INFO)
    master = await open_store(tmp_path)
    slave = LevelDBPersistenceAdapter(tmp_path)
    starting = asyncio.create_task(slave.start())
    while "waiting as a slave" not in caplog.text:
        await asyncio.sleep(0.02)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    await master.write([AddMessage(msg(1))])
    await master.stop()
    after = await open_store(tmp_path)
    assert caplog.text.count("waiting as a slave") == 1  # the next broker did not wait
    assert ids(after.recover().queues[Q]) == [msg(1).message_id]
    await after.stop()


def test_two_brokers_on_one_directory_the_second_waits_then_takes_over(
    tmp_path: Path,
) -> None:
    """Two broker processes on one LevelDB directory: the second logs that it waits as a
    slave and serves nothing; once the first is killed (the OS drops its LOCK) it opens the
    store and delivers what the first confirmed."""
    config = '[store]\nkind = "leveldb"\n'
    (tmp_path / "dovecote.toml").write_text(config)
    with running_broker(config, workdir=tmp_path) as master:
        link = Link(master.stomp_port)
        link.send(Frame("SEND", (("destination", "/queue/lock"), ("persistent", "true"),
                                 ("receipt", "r")), b"kept"))  # fmt: skip
        assert link.read().command == "RECEIPT"
        slave = subprocess.Popen(
            [sys.executable, "-m", "dovecote", "broker", "--stomp-port", "0",
             "--openwire-port", "0", "--console-port", "0", "--config", "dovecote.toml"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert slave.stderr is not None and slave.stdout is not None
            while "waiting as a slave" not in (line := slave.stderr.readline()):
                assert line, "the second broker never waited"
            assert slave.poll() is None
            master.process.send_signal(signal.SIGKILL)
            master.process.wait()
            while not (line := slave.stdout.readline()).startswith("dovecote ready"):
                assert line, "the second broker never served"
            port = int(re.search(r"stomp=[\d.]+:(\d+)", line).group(1))  # type: ignore[union-attr]
            threading.Thread(target=slave.stderr.read, daemon=True).start()
            bodies = [m.body for m in Link(port).take_backlog("/queue/lock")]
            assert bodies == [b"kept"]
        finally:
            slave.terminate()
            slave.wait(30)


async def test_a_full_disk_degrades_the_store_until_there_is_room_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A write LevelDB refuses (ENOSPC) fails its writers with the disk's reason and puts
    the store in degraded mode, one WARNING; once there is room the probe opens the database
    again on its own, the mode ends with one INFO line, and everything answered is there."""
    caplog.set_level(logging.DEBUG, logger="dovecote.store")
    body = b"x" * 100_000
    with mounted_tmpfs(tmp_path / "disk", 16) as disk:
        store = await open_store(disk / "leveldb")
        try:
            for i in range(3):
                await store.write([AddMessage(replace(msg(i), body=body))])
            ballast = fill(disk)
            stored = 3
            with pytest.raises(StoreFailedError) as refused:
                for i in range(3, 200):
                    await store.write([AddMessage(replace(msg(i), body=body))])
                    stored += 1
            assert "No space left on device" in str(refused.value)
            assert store.degraded is not None and "No space left" in store.degraded
            with pytest.raises(StoreFailedError, match="No space left"):
                await store.write([RemoveMessage(Q, msg(0).message_id)])
            assert len([r for r in caplog.records if "store degraded:" in r.getMessage()]) == 1
            assert not [r for r in caplog.records if r.exc_info and r.levelno > logging.DEBUG]
            assert store.message_count(Q) == stored  # reads go on

            ballast.unlink()
            deadline = time.monotonic() + 10
            while store.degraded is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert store.degraded is None
            assert "leaving degraded mode" in caplog.text
            await store.write([AddMessage(replace(msg(500), body=body))])
            await store.write([RemoveMessage(Q, msg(0).message_id)])
        finally:
            await store.stop()
        store = await open_store(disk / "leveldb")
        try:
            got = ids(store.recover().queues[Q])
            assert got == ids([msg(i) for i in range(1, stored)] + [msg(500)])
        finally:
            await store.stop()


async def test_only_groups_somebody_waits_for_are_synced(tmp_path: Path) -> None:
    """A group of writes nobody waits for (lazy, sync=False) is written without a sync; a
    waited-for one with it; with disk syncs off, none is."""
    synced: list[bool] = []
    store = await open_store(tmp_path / "on")
    real = store._write

    def spying(batches: list[list[JournalOp]], sync: bool) -> dict[bytes, Destination]:
        synced.append(sync)
        return real(batches, sync)

    store._write = spying  # type: ignore[method-assign]
    await store.write([AddMessage(msg(1))])
    await store.write([RemoveMessage(Q, msg(1).message_id)], sync=False, lazy=True)
    assert synced == [True, False]
    await store.stop()
    off = await open_store(tmp_path / "off", disk_syncs=False)
    real = off._write
    off._write = spying  # type: ignore[method-assign]
    synced.clear()
    await off.write([AddMessage(msg(1))])
    assert synced == [False]
    await off.stop()


def test_the_leveldb_kind_makes_the_store_under_data_dir(tmp_path: Path) -> None:
    path = tmp_path / "dovecote.toml"
    path.write_text(f'[broker]\ndata_dir = "{tmp_path}/data"\n[store]\nkind = "leveldb"\n')
    store = make_store(load_config(path))
    assert isinstance(store, LevelDBPersistenceAdapter)
    assert store.directory == tmp_path / "data" / "leveldb" and store.disk_syncs


def test_the_leveldb_kind_without_plyvel_is_a_config_error_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base install has no plyvel: asking for the kind says what to install, and
    nothing else imports it."""
    for name in [m for m in sys.modules if m.startswith("dovecote.store.leveldb")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plyvel", None)  # import plyvel now fails
    path = tmp_path / "dovecote.toml"
    path.write_text('[store]\nkind = "leveldb"\n')
    with pytest.raises(ConfigError, match=r"needs plyvel.*dovecote\[leveldb\]"):
        make_store(load_config(path))
    path.write_text('[store]\nkind = "journal"\n')
    make_store(load_config(path))  # the other kinds never import it


async def test_a_damaged_table_block_fails_the_read_with_the_reason(tmp_path: Path) -> None:
    """Reads verify LevelDB's block checksums: bytes changed in a table make the read fail
    with a StoreFailedError naming the damage (the paging broker leaves those messages
    waiting) instead of handing garbage on (random bodies: stored as they are, a changed
    byte in one would otherwise read back as a changed body)."""
    store = await open_store(tmp_path)
    await store.write([AddMessage(replace(msg(i), body=os.urandom(2048))) for i in range(50)])
    await store.stop()
    store = await open_store(tmp_path)  # the log is recovered into a table
    await store.stop()
    (table,) = [p for p in tmp_path.glob("*.ldb") if p.stat().st_size > 10_000]
    data = bytearray(table.read_bytes())
    data[len(data) // 3] ^= 0xFF
    table.write_bytes(bytes(data))
    store = await open_store(tmp_path)
    with pytest.raises(StoreFailedError, match="could not read: Corruption"):
        store.read_queue(Q, (0, 0), 100)
    await store.stop()
